import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { utcDay } from '../../server/buyer/mandate-service.js';
import { inDays } from './support.js';

let server: TestServer;
beforeAll(async () => { server = await startTestServer({ TRUST_PROXY: 'true' }); });
afterAll(async () => { await server.close(); });

const create = (key: string, body: Record<string, unknown>) => server.request('POST', '/v0/payments/mandates', { key, body });
const valid = () => ({ maxPerCallUsdc: '0.05', dailyCapUsdc: '2.5', validUntil: inDays(7) });

describe('mandate routes', () => {
  it('creates, lists, gets and revokes a mandate with exact decimal amounts', async () => {
    const agent = await signUp(server);
    const key = agent.identity.rawKey;
    const validUntil = inDays(7);
    const res = await create(key, { maxPerCallUsdc: '0.05', dailyCapUsdc: '2.500000', validUntil, allowedHosts: ['API.example.com', '*.example.org'] });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      mandateId: expect.stringMatching(/^mdt_[a-z0-9]+$/), status: 'active', maxPerCallUsdc: '0.05', dailyCapUsdc: '2.5', validUntil,
      allowedHosts: ['api.example.com', '*.example.org'], spentTodayUsdc: '0', remainingTodayUsdc: '2.5', totalSpentUsdc: '0', callCount: 0,
      createdAt: expect.any(String), lastUsedAt: null, revokedAt: null,
    });
    const id = res.body.mandateId;
    const list = await server.request('GET', '/v0/payments/mandates', { key });
    expect(list.body).toEqual({ mandates: [res.body], count: 1 });
    expect((await server.request('GET', `/v0/payments/mandates/${id}`, { key })).body).toEqual(res.body);

    const revoked = await server.request('DELETE', `/v0/payments/mandates/${id}`, { key });
    expect(revoked.status).toBe(200);
    expect(revoked.body).toMatchObject({ mandateId: id, status: 'revoked', revokedAt: expect.any(String) });
    const again = await server.request('DELETE', `/v0/payments/mandates/${id}`, { key });
    expect(again.body.revokedAt).toBe(revoked.body.revokedAt);
  });

  it('refuses floats, more than 6 decimals, a per-call limit above the daily cap and a past validUntil, naming the field', async () => {
    const agent = await signUp(server);
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ ...valid(), maxPerCallUsdc: 0.05 }, 'body.maxPerCallUsdc'],
      [{ ...valid(), dailyCapUsdc: '1.0000001' }, 'body.dailyCapUsdc'],
      [{ ...valid(), dailyCapUsdc: '0' }, 'body.dailyCapUsdc'],
      [{ ...valid(), dailyCapUsdc: '2000000' }, 'body.dailyCapUsdc'],
      [{ ...valid(), maxPerCallUsdc: '3' }, 'body.maxPerCallUsdc'],
      [{ ...valid(), validUntil: new Date(Date.now() - 60_000).toISOString() }, 'body.validUntil'],
      [{ ...valid(), validUntil: 'tomorrow' }, 'body.validUntil'],
      [{ ...valid(), allowedHosts: ['http://x.example/'] }, 'body.allowedHosts.0'],
      [{ ...valid(), extra: true }, 'body'],
    ];
    for (const [body, field] of cases) {
      const res = await create(agent.identity.rawKey, body);
      expect({ field, status: res.status, named: res.body.message.startsWith(field) }).toEqual({ field, status: 400, named: true });
    }
  });

  it('keeps mandates per identity (404 for another identity’s) and enforces scopes', async () => {
    const agent = await signUp(server);
    const other = await signUp(server);
    const mine = await create(agent.identity.rawKey, valid());
    expect((await server.request('GET', `/v0/payments/mandates/${mine.body.mandateId}`, { key: other.identity.rawKey })).status).toBe(404);
    expect((await server.request('DELETE', `/v0/payments/mandates/${mine.body.mandateId}`, { key: other.identity.rawKey })).status).toBe(404);
    expect((await server.request('GET', '/v0/payments/mandates', { key: other.identity.rawKey })).body).toEqual({ mandates: [], count: 0 });
    expect((await create(agent.platform_key, valid())).status).toBe(403);
    await server.request('PATCH', `/v0/platform/identities/${agent.identity.identityId}`, { key: agent.platform_key, body: { removeScopes: ['payments:spend'] } });
    expect((await create(agent.identity.rawKey, valid())).status).toBe(403);
    expect((await server.request('GET', '/v0/payments/mandates', { key: agent.identity.rawKey })).status).toBe(200);
    expect((await server.request('DELETE', `/v0/payments/mandates/${mine.body.mandateId}`, { key: agent.identity.rawKey })).status).toBe(403);
  });
});

describe('reservations', () => {
  const url = new URL('https://api.example.com/paid');

  it('let exactly as many of 50 concurrent reservations through as the daily cap holds, and releases give it back', async () => {
    const agent = await signUp(server);
    const owner = { orgId: agent.org_id, identityId: agent.identity.identityId };
    const mandate = await create(agent.identity.rawKey, { validUntil: inDays(1), maxPerCallUsdc: '0.3', dailyCapUsdc: '2' });
    const outcomes = await Promise.all(Array.from({ length: 50 }, () => server.app.mandates.reserve(owner, url, 300_000n)));
    const granted = outcomes.filter((o) => o.ok);
    expect(granted).toHaveLength(6); // 6 × 0.3 = 1.8 <= 2 < 2.1
    expect(outcomes.filter((o) => !o.ok && o.code === 'mandate_daily_cap_exceeded')).toHaveLength(44);
    const view = async () => (await server.request('GET', `/v0/payments/mandates/${mandate.body.mandateId}`, { key: agent.identity.rawKey })).body;
    expect(await view()).toMatchObject({ spentTodayUsdc: '1.8', remainingTodayUsdc: '0.2', callCount: 0 });

    // A smaller amount still fits; releasing two reservations frees room for them again.
    expect((await server.app.mandates.reserve(owner, url, 200_000n)).ok).toBe(true);
    expect((await server.app.mandates.reserve(owner, url, 1n)).ok).toBe(false);
    await Promise.all(granted.slice(0, 2).map((o) => o.ok && server.app.mandates.release(o.reservation)));
    expect(await view()).toMatchObject({ spentTodayUsdc: '1.4', remainingTodayUsdc: '0.6' });
    const committed = granted[2]!;
    if (committed.ok) {
      await server.app.mandates.commit(committed.reservation);
      await server.app.mandates.commit(committed.reservation);
    }
    expect(await view()).toMatchObject({ totalSpentUsdc: '0.3', callCount: 1 });
  });

  it('start each UTC day at zero', async () => {
    const agent = await signUp(server);
    const owner = { orgId: agent.org_id, identityId: agent.identity.identityId };
    const mandate = await create(agent.identity.rawKey, { validUntil: inDays(1), maxPerCallUsdc: '1', dailyCapUsdc: '1' });
    const id = mandate.body.mandateId;
    // Yesterday's ledger is full…
    const yesterday = utcDay(new Date(Date.now() - 86_400_000));
    await server.app.db.collection('mandate_ledger').insertOne({ _id: `${id}:${yesterday}:1` as never, mandateId: id, day: yesterday, seq: 1, delta: 1_000_000, spentAfter: 1_000_000, reservationId: 'rsv_old', createdAt: new Date() });
    // …and today's is not.
    expect((await server.request('GET', `/v0/payments/mandates/${id}`, { key: agent.identity.rawKey })).body.spentTodayUsdc).toBe('0');
    expect((await server.app.mandates.reserve(owner, url, 1_000_000n)).ok).toBe(true);
    expect(await server.app.mandates.reserve(owner, url, 1n)).toMatchObject({ ok: false, code: 'mandate_daily_cap_exceeded' });
  });

  it('choose among several mandates by host, and name the reason when none fits', async () => {
    const agent = await signUp(server);
    const owner = { orgId: agent.org_id, identityId: agent.identity.identityId };
    await create(agent.identity.rawKey, { validUntil: inDays(1), maxPerCallUsdc: '0.01', dailyCapUsdc: '1', allowedHosts: ['*.example.com'] });
    const wide = await create(agent.identity.rawKey, { validUntil: inDays(1), maxPerCallUsdc: '0.5', dailyCapUsdc: '1', allowedHosts: ['other.example.net'] });
    expect(await server.app.mandates.reserve(owner, url, 20_000n)).toMatchObject({ ok: false, code: 'mandate_per_call_exceeded' });
    const onOther = await server.app.mandates.reserve(owner, new URL('https://other.example.net/x'), 20_000n);
    expect(onOther).toMatchObject({ ok: true, reservation: { mandateId: wide.body.mandateId } });
    expect(await server.app.mandates.reserve(owner, new URL('https://example.com.evil.io/'), 1n)).toMatchObject({ ok: false, code: 'mandate_host_not_allowed' });
  });
});
