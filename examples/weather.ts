/** The toy domain the four example sellers (Express, Koa, Hono, Fastify) serve. */
export const WEATHER_PRICE = '$0.01';
/** Days of a multi-day forecast: 1 unless the buyer asks for more, at most 7. */
export const forecastDays = (query: URLSearchParams) => Math.min(7, Math.max(1, Math.floor(Number(query.get('days') ?? 1)) || 1));

/**
 * The paid route table of the four example sellers: given to the middleware and to syncEndpoints alike.
 * `/forecast` is priced per request: $0.01 a day, `?days=1` to `?days=7` (registered as at most $0.07).
 */
export const WEATHER_ROUTES = {
  'GET /weather': { price: WEATHER_PRICE, description: 'Current weather for a city' },
  'GET /forecast': {
    price: ({ query }: { query: URLSearchParams }) => `$${(0.01 * forecastDays(query)).toFixed(2)}`,
    maxPrice: '$0.07',
    description: 'Forecast for 1 to 7 days (?days=N): $0.01 a day',
  },
} as const;
export const CITIES = ['Lisbon', 'Nairobi', 'Oslo', 'Lima', 'Osaka'];

export function forecastFor(city: string) {
  // Deterministic, so a buyer can see that repeated paid calls return real content, not a cache.
  const seed = [...city].reduce((sum, char) => sum + char.charCodeAt(0), 0);
  return { city, temperatureC: 5 + (seed % 25), conditions: ['sunny', 'cloudy', 'rain', 'wind'][seed % 4]!, observedAt: new Date().toISOString() };
}

/** `days` forecasts from today, for /forecast. */
export function multiDayForecast(city: string, days: number) {
  const today = forecastFor(city);
  return { city, days: Array.from({ length: days }, (_, i) => ({ day: i, temperatureC: today.temperatureC + (i % 3) - 1, conditions: today.conditions })) };
}
