import { canonicalizePath } from '../../middleware/canonical-path.js';
import { Paywall } from '../../middleware/paywall.js';
import { compileRoute, InvalidRoutePatternError, RouteTable } from '../../middleware/routes.js';
import { anvilSettings, FakeFacilitator, request } from './fixtures.js';

describe('canonicalizePath', () => {
  test.each([
    ['/weather', '/weather'],
    ['/Weather/', '/Weather'],
    ['/weather?x=1', '/weather'],
    ['/weather#frag', '/weather'],
    ['/weather#a?b', '/weather'],
    ['//weather//today/', '/weather/today'],
    ['/%77eather', '/weather'],
    ['/caf%C3%A9', '/café'],
    ['/', '/'],
    ['///', '/'],
    ['/?', '/'],
    ['http://evil.example/weather?x', '/weather'],
    ['HTTPS://h:8080', '/'],
    ['/.well-known/x', '/.well-known/x'],
    ['/a..b/c.', '/a..b/c.'],
  ])('%s -> %s', (target, path) => {
    const result = canonicalizePath(target);
    expect(result).toEqual({ ok: true, path, key: path.toLowerCase() });
  });

  test.each([
    ['weather', 'invalid_request_target'],
    ['*', 'invalid_request_target'],
    ['/weather%2f', 'encoded_separator'],
    ['/weather%2Fx', 'encoded_separator'],
    ['/x%5cweather', 'encoded_separator'],
    ['/weather%00', 'encoded_separator'],
    ['/weather\\', 'backslash'],
    ['\\weather', 'invalid_request_target'],
    ['/x\\..\\weather', 'backslash'],
    ['/weather%', 'malformed_percent_encoding'],
    ['/weather%zz', 'malformed_percent_encoding'],
    ['/weather%C3', 'malformed_percent_encoding'],
    ['/weather%FF', 'malformed_percent_encoding'],
    ['/weather%252F', 'double_encoding'],
    ['/%2577eather', 'double_encoding'],
    ['/./weather', 'dot_segment'],
    ['/x/../weather', 'dot_segment'],
    ['/weather/.', 'dot_segment'],
    ['/weather/..', 'dot_segment'],
    ['/%2e%2e/weather', 'dot_segment'],
    ['/%2E/weather', 'dot_segment'],
    ['/weather/%2e', 'dot_segment'],
    ['/weather x', 'invalid_character'],
    ['/weather\t', 'invalid_character'],
    ['/weather\u00a0', 'invalid_character'],
    ['/weather\ufeff', 'invalid_character'],
    ['/wéather', 'invalid_character'],
    ['/weather%0a', 'invalid_character'],
    ['/weather%7F', 'invalid_character'],
  ])('%j is refused: %s', (target, reason) => {
    expect(canonicalizePath(target)).toEqual({ ok: false, reason });
  });
});

describe('route patterns', () => {
  test('invalid patterns fail at construction with the pattern named', () => {
    for (const bad of ['weather', 'FETCH /x', 'GET /x extra', '/x/{opt}', '/x/(a)', '/x/../y', '/caf%C3%A9']) {
      expect(() => compileRoute(bad, 1)).toThrow(InvalidRoutePatternError);
    }
    expect(() => new RouteTable([['/a', 1], ['/A/', 2]])).toThrow(/duplicates/);
  });

  const table = new RouteTable<string>([
    ['/api/*', 'api-wildcard'],
    ['/api/free/*', 'api-free-wildcard'],
    ['GET /api/free/special', 'literal-get'],
    ['/api/free/special', 'literal-any'],
    ['POST /items/:id', 'post-item'],
    ['/items/:id/photos/*rest', 'photos'],
    ['/files/:from-:to', 'range'],
  ]);
  const winner = (method: string, path: string) => {
    const canonical = canonicalizePath(path);
    if (!canonical.ok) throw new Error(canonical.reason);
    const match = table.match(method, canonical.key);
    return match.kind === 'match' ? match.route.value : match.kind;
  };

  test.each([
    ['GET', '/api', 'api-wildcard'],
    ['GET', '/api/', 'api-wildcard'],
    ['GET', '/api/x/y/z', 'api-wildcard'],
    ['GET', '/apix', 'none'],
    ['GET', '/api/free', 'api-free-wildcard'],
    ['GET', '/api/free/other', 'api-free-wildcard'],
    ['GET', '/api/free/special', 'literal-get'],
    ['HEAD', '/api/free/special', 'literal-get'],
    ['POST', '/api/free/special', 'literal-any'],
    ['POST', '/items/42', 'post-item'],
    ['GET', '/items/42', 'none'],
    ['GET', '/items/42/photos', 'photos'],
    ['GET', '/items/42/photos/a/b', 'photos'],
    ['GET', '/ITEMS/42/PHOTOS/', 'photos'],
    ['GET', '/files/1-9', 'range'],
    ['GET', '/files/1-', 'none'],
  ])('%s %s -> %s', (method, path, expected) => {
    expect(winner(method, path)).toBe(expected);
  });
});

describe('path tricks never reach a protected handler unpaid', () => {
  const paywall = new Paywall({
    routes: {
      'GET /weather': { price: '$0.01' },
      '/api/*': { price: '$0.02' },
      'GET /city/:name': { price: '$0.03' },
    },
    facilitator: new FakeFacilitator(),
    settings: anvilSettings,
  });

  // Every spelling an attacker might try for a protected path: 402 (protected) or 400 (refused).
  test.each([
    '/weather',
    '/WEATHER',
    '/Weather/',
    '/weather/',
    '/weather//',
    '//weather',
    '/weather?x',
    '/weather?',
    '/weather#',
    '/weather#x',
    '/%77eather',
    '/%57EATHER',
    '/./weather',
    '/x/../weather',
    '/weather/.',
    '/weather/..',
    '/%2e/weather',
    '/weather%2f',
    '/weather%2F',
    '/weather%5c',
    '/weather\\',
    '/weather%00',
    '/weather%20',
    '/weather%09',
    '/weather ',
    '/weather\u00a0',
    '/weather\ufeff',
    '/weather;x',
    '/weather;',
    '/%ef%bd%97eather', // fullwidth "w"
    '/weather%E2%80%8B', // zero-width space: NFKC keeps it, so it is a distinct path unless trimmed
    'http://shop.example/weather',
    'https://other.example//weather/',
    '/api',
    '/API/',
    '/api/x',
    '/api//x',
    '/api/%2e%2e/x',
    '/api/x%2f..%2fy',
    '/city/paris',
    '/city/..',
    '/city/.',
    '/city/a%2Fb',
    '/city/%2e%2e',
    '/city/paris;x',
    '/CITY/Paris/',
  ])('GET %j', async (url) => {
    const outcome = await paywall.handle(request(url));
    expect(['payment-required', 'reject']).toContain(outcome.kind);
  });

  test.each(['/weatherx', '/weather/x', '/free', '/', '/cities', '/weather-report', '/apix'])(
    'GET %j is not protected and passes',
    async (url) => {
      expect(await paywall.handle(request(url))).toEqual({ kind: 'pass' });
    },
  );

  test('unprotected paths with odd spellings pass when no reading of them is protected', async () => {
    expect((await paywall.handle(request('/free;x'))).kind).toBe('pass');
    expect((await paywall.handle(request('/caf%C3%A9'))).kind).toBe('pass');
  });

  test('a protected GET route is protected for HEAD too, not for POST', async () => {
    expect((await paywall.handle(request('/weather', { method: 'HEAD' }))).kind).toBe('payment-required');
    expect((await paywall.handle(request('/weather', { method: 'POST' }))).kind).toBe('pass');
    expect((await paywall.handle(request('/api/x', { method: 'delete' }))).kind).toBe('payment-required');
  });
});
