import { canonicalLoopback, loopbackSpellings } from 'agentgate-x402-wire';

// The rule the backend applies in dev mode and syncEndpoints applies when matching the backend's list.
describe('loopback spellings', () => {
  test.each([
    ['http://127.0.0.1:5055/weather', ['http://localhost:5055/weather', 'http://127.0.0.1:5055/weather', 'http://[::1]:5055/weather']],
    ['http://LOCALHOST:5055/a/b', ['http://localhost:5055/a/b', 'http://127.0.0.1:5055/a/b', 'http://[::1]:5055/a/b']],
    ['https://[::1]/x', ['https://localhost/x', 'https://127.0.0.1/x', 'https://[::1]/x']],
    ['http://localhost:4021', ['http://localhost:4021', 'http://127.0.0.1:4021', 'http://[::1]:4021']],
  ])('%s has every loopback spelling, port and path kept', (url, spellings) => {
    expect(loopbackSpellings(url)).toEqual(spellings);
    expect(canonicalLoopback(url)).toBe(spellings[0]);
  });

  test.each([
    'https://api.example.com/weather',
    'http://127.0.0.2:5055/weather',
    'http://localhost.example.com/weather',
    'http://user@localhost:5055/weather',
    'mcp://tool/forecast',
    'not a url',
  ])('%s is its only spelling', (url) => {
    expect(loopbackSpellings(url)).toEqual([url]);
  });
});
