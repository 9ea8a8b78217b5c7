/** The toy domain both example sellers serve. */
export const WEATHER_PRICE = '$0.01';
export const CITIES = ['Lisbon', 'Nairobi', 'Oslo', 'Lima', 'Osaka'];

export function forecastFor(city: string) {
  // Deterministic, so a buyer can see that repeated paid calls return real content, not a cache.
  const seed = [...city].reduce((sum, char) => sum + char.charCodeAt(0), 0);
  return { city, temperatureC: 5 + (seed % 25), conditions: ['sunny', 'cloudy', 'rain', 'wind'][seed % 4]!, observedAt: new Date().toISOString() };
}
