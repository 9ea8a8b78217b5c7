import ical from 'node-ical';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';

let server: TestServer;
beforeAll(async () => { server = await startTestServer({ TRUST_PROXY: 'true' }); });
afterAll(async () => { await server.close(); });

const create = (key: string, body: unknown) => server.request('POST', '/v0/calendar', { key, body });

describe('calendar events', () => {
  it('creates, reads, updates and deletes an event', async () => {
    const agent = await signUp(server);
    const key = agent.identity.rawKey;
    const created = await create(key, { title: 'Sync with Bob', description: 'agenda: invoices', startAt: '2031-03-10T09:00:00+01:00', endAt: '2031-03-10T09:30:00+01:00', location: 'Room 4', metadata: { ref: 7 } });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      eventId: expect.stringMatching(/^evt_[a-z0-9]{24}$/), title: 'Sync with Bob', description: 'agenda: invoices',
      startAt: '2031-03-10T08:00:00.000Z', endAt: '2031-03-10T08:30:00.000Z', isAllDay: false, location: 'Room 4', metadata: { ref: 7 },
      createdAt: expect.any(String), updatedAt: expect.any(String),
    });
    const id = created.body.eventId;
    expect((await server.request('GET', `/v0/calendar/${id}`, { key })).body).toEqual(created.body);

    const moved = await server.request('PATCH', `/v0/calendar/${id}`, { key, body: { endAt: '2031-03-10T10:00:00Z', title: 'Longer sync' } });
    expect(moved.status).toBe(200);
    expect(moved.body).toMatchObject({ title: 'Longer sync', startAt: '2031-03-10T08:00:00.000Z', endAt: '2031-03-10T10:00:00.000Z', location: 'Room 4' });
    const backwards = await server.request('PATCH', `/v0/calendar/${id}`, { key, body: { startAt: '2031-03-10T11:00:00Z' } });
    expect(backwards.status).toBe(400);
    expect(backwards.body.message).toBe('body.endAt: must be after startAt');

    const allDay = await server.request('PATCH', `/v0/calendar/${id}`, { key, body: { isAllDay: true, startAt: '2031-03-11' } });
    expect(allDay.body).toMatchObject({ isAllDay: true, startAt: '2031-03-11', endAt: '2031-03-12' });

    expect((await server.request('DELETE', `/v0/calendar/${id}`, { key })).body).toEqual({ eventId: id, deleted: true });
    expect((await server.request('GET', `/v0/calendar/${id}`, { key })).status).toBe(404);
    const logs = await server.request('GET', '/v0/logs', { key });
    expect(logs.body.logs.filter((l: any) => l.category === 'calendar').map((l: any) => l.action))
      .toEqual(['calendar.event_deleted', 'calendar.event_updated', 'calendar.event_updated', 'calendar.event_created']);
  });

  it('handles all-day events (dates, end exclusive, one day by default)', async () => {
    const agent = await signUp(server);
    const key = agent.identity.rawKey;
    const one = await create(key, { title: 'Holiday', startAt: '2031-05-01', isAllDay: true });
    expect(one.body).toMatchObject({ startAt: '2031-05-01', endAt: '2031-05-02', isAllDay: true });
    const three = await create(key, { title: 'Conference', startAt: '2031-05-04', endAt: '2031-05-07', isAllDay: true });
    expect(three.body).toMatchObject({ startAt: '2031-05-04', endAt: '2031-05-07' });
  });

  it('validates times and names the field', async () => {
    const agent = await signUp(server);
    const key = agent.identity.rawKey;
    const cases: Array<[unknown, string]> = [
      [{ title: 'x', startAt: '2031-01-01T10:00:00Z', endAt: '2031-01-01T09:00:00Z' }, 'body.endAt: must be after startAt'],
      [{ title: 'x', startAt: '2031-01-01T10:00:00Z', endAt: '2031-01-01T10:00:00Z' }, 'body.endAt: must be after startAt'],
      [{ title: 'x', startAt: '2031-01-03', endAt: '2031-01-02', isAllDay: true }, 'body.endAt: must be after startAt'],
      [{ title: 'x', startAt: '2031-01-01T10:00:00Z' }, 'body.endAt: is required for a timed event'],
      [{ title: 'x', startAt: '2031-01-01', endAt: '2031-01-02' }, 'body.startAt: a timed event takes a date-time with offset; set isAllDay for a whole day'],
      [{ title: 'x', startAt: '2031-01-01T10:00:00Z', isAllDay: true }, 'body.startAt: an all-day event takes a date (YYYY-MM-DD)'],
    ];
    for (const [body, message] of cases) {
      const res = await create(key, body);
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ error: 'validation_error', message, status: 400 });
    }
    for (const body of [{ startAt: '2031-01-01T10:00:00Z', endAt: '2031-01-01T11:00:00Z' }, { title: 'x', startAt: 'tomorrow', endAt: '2031-01-01T11:00:00Z' }, { title: 'x', startAt: '2031-01-01T10:00:00', endAt: '2031-01-01T11:00:00Z' }]) {
      const res = await create(key, body);
      expect(res.status).toBe(400);
      expect(res.body.message).toMatch(/^body\.(title|startAt)/);
    }
    const badRange = await server.request('GET', '/v0/calendar?from=2031-02-01&to=2031-01-01', { key });
    expect(badRange.status).toBe(400);
    expect(badRange.body.message).toMatch(/^query\.to/);
    expect((await server.request('GET', '/v0/calendar/evt_nope', { key })).status).toBe(400);
  });

  it('lists events overlapping a range, earliest first, up to limit', async () => {
    const agent = await signUp(server);
    const key = agent.identity.rawKey;
    const make = async (title: string, startAt: string, endAt: string, isAllDay = false) => (await create(key, { title, startAt, endAt, isAllDay })).body.eventId;
    await make('before', '2031-06-01T08:00:00Z', '2031-06-01T09:00:00Z');
    await make('ends-at-from', '2031-06-01T09:00:00Z', '2031-06-01T10:00:00Z');
    await make('straddles-from', '2031-06-01T09:30:00Z', '2031-06-01T10:30:00Z');
    await make('inside', '2031-06-01T12:00:00Z', '2031-06-01T13:00:00Z');
    await make('covers-all', '2031-05-31', '2031-06-03', true);
    await make('straddles-to', '2031-06-01T17:30:00Z', '2031-06-01T18:30:00Z');
    await make('starts-at-to', '2031-06-01T18:00:00Z', '2031-06-01T19:00:00Z');
    await make('after', '2031-06-02T08:00:00Z', '2031-06-02T09:00:00Z');
    const titles = async (query: string) => {
      const res = await server.request('GET', `/v0/calendar${query}`, { key });
      expect(res.status).toBe(200);
      expect(res.body.count).toBe(res.body.events.length);
      return res.body.events.map((e: any) => e.title);
    };
    expect(await titles('?from=2031-06-01T10:00:00Z&to=2031-06-01T18:00:00Z')).toEqual(['covers-all', 'straddles-from', 'inside', 'straddles-to']);
    expect(await titles('?from=2031-06-02&to=2031-06-03')).toEqual(['covers-all', 'after']);
    expect(await titles('?to=2031-06-01T09:00:00Z')).toEqual(['covers-all', 'before']);
    expect(await titles('?from=2031-06-02T08:30:00Z')).toEqual(['covers-all', 'after']);
    expect(await titles('?limit=3')).toEqual(['covers-all', 'before', 'ends-at-from']);
    expect(await titles('')).toHaveLength(8);
  });

  it('needs calendar scopes, hides other identities’ events', async () => {
    const a = await signUp(server);
    const b = await signUp(server);
    const id = (await create(a.identity.rawKey, { title: 'private', startAt: '2031-01-01T10:00:00Z', endAt: '2031-01-01T11:00:00Z' })).body.eventId;
    for (const [method, body] of [['GET', undefined], ['PATCH', { title: 'mine now' }], ['DELETE', undefined]] as const) {
      const res = await server.request(method, `/v0/calendar/${id}`, { key: b.identity.rawKey, body });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ error: 'not_found', message: 'Event not found', status: 404 });
    }
    expect((await server.request('GET', '/v0/calendar', { key: b.identity.rawKey })).body.count).toBe(0);
    expect((await server.request('GET', '/v0/calendar', { key: a.platform_key })).status).toBe(403);

    await server.request('PATCH', `/v0/platform/identities/${a.identity.identityId}`, { key: a.platform_key, body: { removeScopes: ['calendar:write'] } });
    const write = await create(a.identity.rawKey, { title: 'x', startAt: '2031-01-01T10:00:00Z', endAt: '2031-01-01T11:00:00Z' });
    expect(write.status).toBe(403);
    expect(write.body.requiredScope).toBe('calendar:write');
    expect((await server.request('POST', '/v0/calendar/public', { key: a.identity.rawKey, body: { enabled: true } })).status).toBe(403);
    expect((await server.request('GET', '/v0/calendar', { key: a.identity.rawKey })).status).toBe(200);
    await server.request('PATCH', `/v0/platform/identities/${a.identity.identityId}`, { key: a.platform_key, body: { removeScopes: ['calendar:read'] } });
    expect((await server.request('GET', `/v0/calendar/${id}`, { key: a.identity.rawKey })).body.requiredScope).toBe('calendar:read');
  });
});

describe('public iCal feed', () => {
  it('serves RFC 5545 that a standard parser reads back identically; disabling kills the URL, re-enabling draws a new one', async () => {
    const agent = await signUp(server);
    const key = agent.identity.rawKey;
    const tricky = {
      title: 'Review; budget, Q3 \\ "final"',
      description: `Line one\nLine two, with commas; semicolons\\backslashes and a very long tail ${'x'.repeat(200)} ✓ ünïcödé`,
      location: 'Café "Le Coin", 3rd floor; room 2',
      startAt: '2031-07-01T13:15:00Z', endAt: '2031-07-01T14:45:00Z',
    };
    const timed = (await create(key, tricky)).body;
    const allDay = (await create(key, { title: 'Offsite', startAt: '2031-07-03', endAt: '2031-07-05', isAllDay: true })).body;

    expect((await server.request('GET', '/v0/calendar/public', { key })).body).toEqual({ enabled: false, url: null });
    const enabled = await server.request('POST', '/v0/calendar/public', { key, body: { enabled: true } });
    expect(enabled.status).toBe(200);
    expect(enabled.body.enabled).toBe(true);
    expect(enabled.body.url).toMatch(new RegExp(`^${server.config.BASE_URL}/v0/calendar/feed/[A-Za-z0-9_-]{43}\\.ics$`));
    expect((await server.request('POST', '/v0/calendar/public', { key, body: { enabled: true } })).body.url).toBe(enabled.body.url);
    expect((await server.request('GET', '/v0/calendar/public', { key })).body).toEqual(enabled.body);

    const feed = await fetch(enabled.body.url);
    expect(feed.status).toBe(200);
    expect(feed.headers.get('content-type')).toBe('text/calendar; charset=utf-8');
    const text = await feed.text();
    for (const line of text.split('\r\n')) expect(Buffer.byteLength(line)).toBeLessThanOrEqual(75);
    expect(text).toMatch(/^BEGIN:VCALENDAR\r\nVERSION:2\.0\r\n/);
    expect(text).toContain('SUMMARY:Review\\; budget\\, Q3 \\\\ "final"');

    const parsed = Object.values(ical.sync.parseICS(text)).filter((c: any) => c.type === 'VEVENT') as any[];
    expect(parsed).toHaveLength(2);
    const t = parsed.find((e) => e.uid.startsWith(timed.eventId))!;
    expect(t.uid).toBe(`${timed.eventId}@127.0.0.1`);
    expect(t.summary).toBe(tricky.title);
    expect(t.description).toBe(tricky.description);
    expect(t.location).toBe(tricky.location);
    expect(t.start.toISOString()).toBe('2031-07-01T13:15:00.000Z');
    expect(t.end.toISOString()).toBe('2031-07-01T14:45:00.000Z');
    expect(t.dtstamp.toISOString()).toBe(timed.updatedAt.replace(/\.\d{3}Z$/, '.000Z')); // iCal has whole seconds
    const d = parsed.find((e) => e.uid.startsWith(allDay.eventId))!;
    expect(d.datetype).toBe('date');
    expect(d.summary).toBe('Offsite');
    expect(`${d.start.getFullYear()}-${d.start.getMonth() + 1}-${d.start.getDate()}`).toBe('2031-7-3');
    expect(`${d.end.getFullYear()}-${d.end.getMonth() + 1}-${d.end.getDate()}`).toBe('2031-7-5');
    expect(text).toContain('DTSTART;VALUE=DATE:20310703');
    expect(text).toContain('DTEND;VALUE=DATE:20310705');

    const disabled = await server.request('POST', '/v0/calendar/public', { key, body: { enabled: false } });
    expect(disabled.body).toEqual({ enabled: false, url: null });
    const dead = await fetch(enabled.body.url);
    expect(dead.status).toBe(404);
    expect(await dead.json()).toEqual({ error: 'not_found', message: 'Calendar feed not found', status: 404 });
    const again = await server.request('POST', '/v0/calendar/public', { key, body: { enabled: true } });
    expect(again.body.url).not.toBe(enabled.body.url);
    expect((await fetch(again.body.url)).status).toBe(200);
    expect((await fetch(enabled.body.url)).status).toBe(404);

    // The database holds only a hash of the token and a sealed copy.
    const token = again.body.url.match(/feed\/(.+)\.ics$/)[1];
    const raw = JSON.stringify(await server.app.db.collection('calendar_feeds').find({}).toArray());
    expect(raw).not.toContain(token);
  });

  it('answers 404 for unknown tokens and for a revoked identity’s feed', async () => {
    const agent = await signUp(server);
    const created = await server.request('POST', '/v0/platform/identities', { key: agent.platform_key, body: {} });
    const url = (await server.request('POST', '/v0/calendar/public', { key: created.body.rawKey, body: { enabled: true } })).body.url;
    expect((await fetch(url)).status).toBe(200);
    await server.request('DELETE', `/v0/platform/identities/${created.body.identityId}`, { key: agent.platform_key });
    expect((await fetch(url)).status).toBe(404);
    for (const token of ['A'.repeat(43), 'short', '..%2F..%2Fetc']) expect((await fetch(`${server.url}/v0/calendar/feed/${token}.ics`)).status).toBe(404);
  });
});
