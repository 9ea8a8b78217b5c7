/** The toy domain both example sellers serve. */
export const WEATHER_PRICE = '$0.01';
/** The paid route table of both example sellers: given to the middleware and to syncEndpoints alike. */
export const WEATHER_ROUTES = { 'GET /weather': { price: WEATHER_PRICE, description: 'Current weather for a city' } } as const;
export const CITIES = ['Lisbon', 'Nairobi', 'Oslo', 'Lima', 'Osaka'];

export function forecastFor(city: string) {
  // Deterministic, so a buyer can see that repeated paid calls return real content, not a cache.
  const seed = [...city].reduce((sum, char) => sum + char.charCodeAt(0), 0);
  return { city, temperatureC: 5 + (seed % 25), conditions: ['sunny', 'cloudy', 'rain', 'wind'][seed % 4]!, observedAt: new Date().toISOString() };
}
