// History filed by the hour (platform/history-buckets.ts): a seller's payments, its webhook deliveries
// and an org's activity log, as a seller's code and the console read them. The API's pages walk hours and
// days newest first and show every record once, those an older version wrote without their hour
// included; the console's totals and counts come from a closed day's written groups, written once and
// only when none of the day's records can change any more. Against a real backend on FerretDB; the
// records are written as the service writes them (their hour listed first).
import { randomBytes } from 'node:crypto';
import mongoose from 'mongoose';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { dayGroupsRound, HistoryBuckets, hourOf } from '../../server/platform/history-buckets.js';
import type { PaymentDoc } from '../../server/payments/models.js';
import type { DeliveryDoc } from '../../server/webhooks/models.js';
import { deliveriesScope } from '../../server/webhooks/delivery-log.js';
import { activityScope } from '../../server/platform/activity-log.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ TRUST_PROXY: 'true' });
}, 120_000);
afterAll(async () => {
  await server?.close();
});

const hex = (bytes: number) => `0x${randomBytes(bytes).toString('hex')}`;

/** A payment as a claim writes it (its hour listed first), or, `undated`, as a version before hours did. */
async function write(orgId: string, at: string, options: { id?: string; status?: PaymentDoc['status']; amount?: string; undated?: boolean } = {}): Promise<PaymentDoc> {
  const createdAt = new Date(at);
  const payer = hex(20);
  const nonce = hex(32);
  const amount = options.amount ?? '10000';
  const doc = {
    _id: options.id ?? `pay_hist${randomBytes(6).toString('hex')}`, orgId, direction: 'in', endpointId: null, network: 'base-sepolia', chainId: 84532, asset: hex(20),
    payerAddress: payer, recipientAddress: hex(20), amountUsdcRaw: amount, resourceUrl: 'https://api.example.com/history', x402Version: 2,
    authorizationKey: `84532:history:${payer}:${nonce}`, authorizationNonce: nonce,
    authorization: { from: payer, to: payer, value: amount, validAfter: '0', validBefore: '1893456000', nonce }, signature: hex(65),
    status: options.status ?? 'settled', createdAt, ...(options.undated ? {} : { hour: hourOf(createdAt) }),
  } as PaymentDoc;
  if (!options.undated) await server.app.payments.records.noteHour(doc);
  await server.app.payments.records.payments.create(doc);
  return doc;
}

const newestFirst = (docs: PaymentDoc[]) => [...docs].sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime() || (a._id < b._id ? 1 : -1)).map((d) => d._id);

describe('a seller\'s payments, filed by the hour', () => {
  it('pages through every payment once, newest first, across hours, days, a shared millisecond and undated payments', async () => {
    const org = await signUp(server);
    const other = await signUp(server);
    const docs: PaymentDoc[] = [];
    // Three hours of one day, one hour of the next, two payments in one millisecond (ordered by id).
    for (const at of ['2026-02-10T08:15:00Z', '2026-02-10T08:45:00Z', '2026-02-10T09:00:00Z', '2026-02-10T23:59:59.999Z', '2026-02-11T00:00:00Z', '2026-02-11T00:30:00Z']) {
      docs.push(await write(org.org_id, at));
    }
    docs.push(await write(org.org_id, '2026-02-11T07:00:00.000Z', { id: 'pay_hist_same_a' }));
    docs.push(await write(org.org_id, '2026-02-11T07:00:00.000Z', { id: 'pay_hist_same_b' }));
    // Written by a version before payments carried their hour: found by the start-up scan.
    for (const at of ['2026-01-05T10:00:00Z', '2026-01-05T11:00:00Z', '2026-01-04T09:00:00Z']) docs.push(await write(org.org_id, at, { undated: true }));
    expect(await server.app.payments.records.markUndated()).toBeGreaterThanOrEqual(1);
    // Another seller's payments in the same hours are never shown.
    await write(other.org_id, '2026-02-10T08:30:00Z');

    const seen: string[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const res = await server.request('GET', `/v0/payments?limit=3${token ? `&pageToken=${token}` : ''}`, { key: org.platform_key });
      expect(res.status).toBe(200);
      seen.push(...(res.body.payments as Array<{ id: string }>).map((p) => p.id));
      token = res.body.nextPageToken;
      pages++;
    } while (token && pages < 20);
    expect(seen).toEqual(newestFirst(docs));
    expect(pages).toBe(4);
  });

  it('a page shows a payment another process filed under a day this process\'s list of days lacked', async () => {
    const org = await signUp(server);
    const older = await write(org.org_id, '2026-05-01T10:00:00Z');
    const page = async () => ((await server.request('GET', '/v0/payments?limit=10', { key: org.platform_key })).body.payments as Array<{ id: string }>).map((p) => p.id);
    expect(await page()).toEqual([older._id]);
    // Another process (its own connection, so its own buckets) files today's first payment of the seller.
    const other = await mongoose.createConnection(server.config.MONGODB_URI, { dbName: server.app.db.name }).asPromise();
    try {
      const now = new Date();
      await HistoryBuckets.for(other).note(`payments|${org.org_id}`, now);
      // The record as that process's claim writes it (not noted by this process's buckets).
      const today = await write(org.org_id, now.toISOString(), { undated: true });
      await server.app.payments.records.payments.updateOne({ _id: today._id }, { $set: { hour: hourOf(now) } });
      expect(await page()).toEqual([today._id, older._id]);
    } finally {
      await other.close();
    }
  });

  it('writes a closed day\'s totals once, never while one of its payments is open, and counts today live', async () => {
    const org = await signUp(server);
    const orgId = org.org_id;
    await write(orgId, '2026-03-01T10:00:00Z', { amount: '10000' });
    await write(orgId, '2026-03-01T11:00:00Z', { amount: '20000', status: 'failed' });
    await write(orgId, '2026-03-02T10:00:00Z', { amount: '30000' });
    const held = await write(orgId, '2026-03-02T12:00:00Z', { amount: '40000', status: 'held' });
    const today = await write(orgId, new Date().toISOString(), { amount: '50000' });
    const written = async () => (await server.app.payments.totals.days.written.find({ scope: `payments|${orgId}` }).lean()).map((d) => d.day).sort();

    const first = await server.app.payments.totals.of(orgId, {}, []);
    expect({ count: first.totals.count, settled: first.totals.settled, failed: first.totals.failed, volume: first.totals.volumeAtomic }).toEqual({ count: 5, settled: 3, failed: 1, volume: 90000n });
    // 2026-03-01 is closed and final; 2026-03-02 holds an open payment; today is not closed.
    expect(await written()).toEqual(['2026-03-01']);

    // The held payment is captured: the day's groups are now final, read live once more and written.
    await server.app.payments.records.payments.updateOne({ _id: held._id }, { $set: { status: 'settled' } });
    const second = await server.app.payments.totals.of(orgId, {}, []);
    expect({ settled: second.totals.settled, volume: second.totals.volumeAtomic }).toEqual({ settled: 4, volume: 130000n });
    expect(await written()).toEqual(['2026-03-01', '2026-03-02']);

    // Today's payments count as they change; a closed day's written groups are what is read.
    await server.app.payments.records.payments.updateOne({ _id: today._id }, { $set: { status: 'failed' } });
    const third = await server.app.payments.totals.of(orgId, {}, []);
    expect({ settled: third.totals.settled, failed: third.totals.failed }).toEqual({ settled: 3, failed: 2 });
    const march = await server.app.payments.totals.of(orgId, { from: new Date('2026-03-02T00:00:00Z'), until: new Date('2026-03-03T00:00:00Z') }, [{ from: new Date('2026-03-02T00:00:00Z'), until: new Date('2026-03-03T00:00:00Z') }]);
    expect({ count: march.totals.count, volume: march.volume[0]!.volumeAtomic, settledInChart: march.volume[0]!.count }).toEqual({ count: 2, volume: 70000n, settledInChart: 2 });
  });
});

/** A seller's webhook delivery as the enqueue writes it (its hour listed first), or undated. */
async function deliver(orgId: string, at: string, status: DeliveryDoc['status'], options: { lastError?: string; undated?: boolean } = {}): Promise<DeliveryDoc> {
  const createdAt = new Date(at);
  const id = `whd_hist${randomBytes(6).toString('hex')}`;
  const doc = {
    _id: id, eventId: `evt_${id}`, event: 'payment.received', orgId, endpointId: 'we_history', paymentId: `pay_${id}`, body: '{}', status,
    attempts: [], attemptCount: status === 'pending' && !options.lastError ? 0 : 1, round: 0, lastError: options.lastError ?? null,
    nextAttemptAt: status === 'pending' ? new Date(Date.now() + 3_600_000) : null, createdAt, updatedAt: createdAt,
    ...(options.undated ? {} : { hour: hourOf(createdAt) }),
  } as DeliveryDoc;
  if (!options.undated) await HistoryBuckets.for(server.app.db).note(deliveriesScope(orgId), createdAt);
  await server.app.webhooks.deliveries.create(doc);
  return doc;
}

describe('a seller\'s webhook deliveries, filed by the hour', () => {
  it('pages through every delivery once and counts each state by day; a retry by hand makes its day count live again', async () => {
    const org = await signUp(server);
    const orgId = org.org_id;
    const docs = [
      await deliver(orgId, '2026-04-01T09:00:00Z', 'delivered'),
      await deliver(orgId, '2026-04-01T10:00:00Z', 'failed', { lastError: 'receiver answered 500' }),
      await deliver(orgId, '2026-04-02T09:00:00Z', 'delivered'),
      await deliver(orgId, '2026-04-02T11:00:00Z', 'pending', { lastError: 'receiver answered 503' }),
      await deliver(orgId, new Date().toISOString(), 'pending'),
      await deliver(orgId, '2026-03-30T08:00:00Z', 'delivered', { undated: true }),
    ];
    expect(await server.app.webhooks.markUndated()).toBeGreaterThanOrEqual(1);

    const seen: string[] = [];
    let token: string | undefined;
    do {
      const res = await server.request('GET', `/v0/webhooks/deliveries?limit=2${token ? `&pageToken=${token}` : ''}`, { key: org.platform_key });
      expect(res.status).toBe(200);
      seen.push(...(res.body.deliveries as Array<{ id: string }>).map((d) => d.id));
      token = res.body.nextPageToken;
    } while (token && seen.length < 20);
    expect(seen).toEqual([...docs].sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime()).map((d) => d._id));

    const written = async () => (await server.app.webhooks.deliveries.db.collection('history_day_groups').find({ scope: deliveriesScope(orgId) }).toArray()).map((d) => d.day).sort();
    expect(await server.app.webhooks.countByState(orgId, {})).toEqual({ pending: 1, failing: 1, failed: 1, delivered: 3 });
    // 2026-04-01 is closed with none pending; 2026-04-02 has a failing delivery; today is open.
    expect(await written()).toEqual(['2026-04-01']);
    expect(await server.app.webhooks.countByState(orgId, { from: new Date('2026-04-01T00:00:00Z'), until: new Date('2026-04-02T00:00:00Z') })).toEqual({ pending: 0, failing: 0, failed: 1, delivered: 1 });

    // The failed one is retried by hand: pending again, so its day's written counts are forgotten.
    const retried = await server.request('POST', `/v0/webhooks/deliveries/${docs[1]!._id}/retry`, { key: org.platform_key });
    expect(retried.status).toBe(202);
    expect(await written()).toEqual([]);
    // Its new round runs (its endpoint is gone, so it ends failed again): the day counts what the record says.
    const until = Date.now() + 20_000;
    while ((await server.app.webhooks.deliveries.findById(docs[1]!._id).lean())?.round !== 1 || (await server.app.webhooks.deliveries.findById(docs[1]!._id).lean())?.status === 'pending') {
      if (Date.now() > until) throw new Error('the retried delivery\'s new round did not finish');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const now = (await server.app.webhooks.deliveries.findById(docs[1]!._id).lean())!;
    const after = await server.app.webhooks.countByState(orgId, { from: new Date('2026-04-01T00:00:00Z'), until: new Date('2026-04-02T00:00:00Z') });
    expect(after).toEqual({ pending: 0, failing: 0, failed: now.status === 'failed' ? 1 : 0, delivered: now.status === 'delivered' ? 2 : 1 });
  });
});

describe('an org\'s activity log, filed by the hour', () => {
  it('pages through every entry once with a page token, and the console counts them by day', async () => {
    const org = await signUp(server);
    const orgId = org.org_id;
    const entry = (at: Date, i: number, undated = false) => ({
      _id: `log_hist${i.toString().padStart(3, '0')}${randomBytes(3).toString('hex')}`, orgId, action: 'test.history', category: 'test', severity: 'info', status: 'success',
      description: `entry ${i}`, metadata: {}, createdAt: at, ...(undated ? {} : { hour: hourOf(at) }),
    });
    const dated = ['2026-06-01T08:00:00Z', '2026-06-01T08:00:00Z', '2026-06-01T09:30:00Z', '2026-06-02T23:59:00Z', '2026-06-03T00:01:00Z'].map((at, i) => entry(new Date(at), i));
    for (const e of dated) await HistoryBuckets.for(server.app.db).note(activityScope(orgId), e.createdAt);
    await server.app.db.collection('activity_logs').insertMany([...dated, entry(new Date('2026-05-01T10:00:00Z'), 9, true)] as never[]);
    expect(await server.app.logs.markUndated()).toBeGreaterThanOrEqual(1);

    const seen: string[] = [];
    let token: string | undefined;
    do {
      const res = await server.request('GET', `/v0/logs?limit=2${token ? `&pageToken=${token}` : ''}`, { key: org.platform_key });
      expect(res.status).toBe(200);
      seen.push(...(res.body.logs as Array<{ id: string }>).map((l) => l.id));
      token = res.body.nextPageToken;
    } while (token && seen.length < 50);
    const all = await server.app.db.collection('activity_logs').find({ orgId }).toArray();
    expect(seen).toEqual(all.sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime() || (a._id < b._id ? 1 : -1)).map((e) => e._id));
    expect((await server.request('GET', '/v0/logs?pageToken=not-a-token!', { key: org.platform_key })).status).toBe(400);

    const { total, entries } = await server.app.logs.page(orgId, 0, 3);
    expect(total).toBe(all.length);
    expect(entries.map((e) => e._id)).toEqual(seen.slice(0, 3));
    // The closed days' counts are written (2026-06-01 to 03); today's (the sign-up's entries) is not.
    const written = (await server.app.db.collection('history_day_groups').find({ scope: activityScope(orgId) }).toArray()).map((d) => d.day).sort();
    expect(written).toEqual(['2026-06-01', '2026-06-02', '2026-06-03']);
  });
});

describe('the day groups round', () => {
  it('writes the last closed days\' groups of every org with records in them, once across processes, and leaves a day with an open record for later', async () => {
    const [a, b, c] = [await signUp(server), await signUp(server), await signUp(server)];
    // The round at 2026-07-03T10:00Z writes 2026-07-02 and 2026-07-01; 2026-06-30 is older than a round looks.
    await write(a.org_id, '2026-07-02T08:00:00Z', { amount: '10000' });
    await write(a.org_id, '2026-07-02T21:00:00Z', { amount: '20000' });
    await write(a.org_id, '2026-06-30T12:00:00Z', { amount: '70000' });
    await write(b.org_id, '2026-07-01T09:00:00Z', { amount: '30000', status: 'failed' });
    await deliver(b.org_id, '2026-07-01T09:00:05Z', 'delivered');
    await write(c.org_id, '2026-07-02T10:00:00Z', { amount: '40000', status: 'held' });
    await deliver(c.org_id, '2026-07-02T10:00:05Z', 'pending', { lastError: 'receiver answered 503' });
    const written = async (orgId: string) => (await server.app.db.collection('history_day_groups').find({ scope: { $in: [`payments|${orgId}`, deliveriesScope(orgId)] } }).toArray()).map((d) => `${d.scope.split('|')[0]} ${d.day}`).sort();
    const groups = [server.app.payments.totals.days, server.app.webhooks.dayGroups, server.app.logs.days];
    const history = HistoryBuckets.for(server.app.db);

    const now = new Date('2026-07-03T10:00:00Z');
    const round = await dayGroupsRound(groups, history, now);
    expect(round).toBeDefined();
    expect(await written(a.org_id)).toEqual(['payments 2026-07-02']);
    expect(await written(b.org_id)).toEqual(['deliveries 2026-07-01', 'payments 2026-07-01']);
    // c's held payment and pending delivery can still change: their day is left to a later round or view.
    expect(await written(c.org_id)).toEqual([]);
    expect(round!.find((r) => r.kind === 'payments' && r.day === '2026-07-02')!.open).toBeGreaterThanOrEqual(1);
    const aGroups = (await server.app.db.collection('history_day_groups').findOne({ _id: `payments|${a.org_id}|2026-07-02` as never }))!.groups;
    expect(aGroups).toEqual(expect.arrayContaining([expect.objectContaining({ status: 'settled', amount: '10000', n: 1 }), expect.objectContaining({ status: 'settled', amount: '20000', n: 1 })]));

    // Another process's round in the same hour finds it taken and does nothing.
    expect(await dayGroupsRound(groups, history, new Date('2026-07-03T10:59:00Z'))).toBeUndefined();

    // c's payment is captured and its delivery goes: the next hour's round writes its day.
    await server.app.payments.records.payments.updateOne({ orgId: c.org_id, status: 'held' }, { $set: { status: 'settled' } });
    await server.app.webhooks.deliveries.updateOne({ orgId: c.org_id, status: 'pending' }, { $set: { status: 'delivered', lastError: null } });
    const next = await dayGroupsRound(groups, history, new Date('2026-07-03T11:00:00Z'));
    expect(next!.filter((r) => r.kind !== 'activity').map((r) => r.written).reduce((x, y) => x + y)).toBe(2);
    expect(await written(c.org_id)).toEqual(['deliveries 2026-07-02', 'payments 2026-07-02']);
    // The console reads what the rounds wrote.
    const totals = await server.app.payments.totals.of(a.org_id, {}, []);
    expect({ count: totals.totals.count, volume: totals.totals.volumeAtomic }).toEqual({ count: 3, volume: 100000n });
  });
});

describe('the webhook column of a payments page or export', () => {
  it('reads the deliveries of the hours the payments settled in, one query per hour, and the rest by id', async () => {
    const org = await signUp(server);
    const settled = ['2026-08-01T10:05:00Z', '2026-08-01T10:10:00Z', '2026-08-01T10:20:00Z', '2026-08-01T12:01:00Z', '2026-08-01T12:30:00Z', '2026-08-01T12:59:00Z'];
    const statuses: DeliveryDoc['status'][] = ['delivered', 'failed', 'pending', 'delivered', 'delivered', 'failed'];
    const payments: Array<{ webhook: { deliveryId: string }; settledAt: Date; createdAt: Date }> = [];
    for (const [i, at] of settled.entries()) {
      const delivery = await deliver(org.org_id, new Date(Date.parse(at) + 1_000).toISOString(), statuses[i]!, statuses[i] === 'failed' ? { lastError: 'receiver answered 500' } : {});
      payments.push({ webhook: { deliveryId: delivery._id }, settledAt: new Date(at), createdAt: new Date(Date.parse(at) - 2_000) });
    }
    // Settled at the end of an hour, its delivery made in the next: found by id.
    const edge = await deliver(org.org_id, '2026-08-01T11:00:00.300Z', 'delivered');
    payments.push({ webhook: { deliveryId: edge._id }, settledAt: new Date('2026-08-01T10:59:59.900Z'), createdAt: new Date('2026-08-01T10:59:58Z') });
    // Another org's delivery named by a payment (never the case, but one org never reads another's).
    const foreign = await deliver((await signUp(server)).org_id, '2026-08-01T10:30:00Z', 'delivered');
    payments.push({ webhook: { deliveryId: foreign._id }, settledAt: new Date('2026-08-01T10:29:59Z'), createdAt: new Date('2026-08-01T10:29:58Z') });

    const finds: string[] = [];
    const count = (e: { commandName: string; command: Record<string, unknown> }) => { if (e.commandName === 'find' && e.command.find === 'webhook_deliveries') finds.push(JSON.stringify(e.command.filter)); };
    server.app.db.getClient().on('commandStarted', count);
    try {
      const read = server.app.webhooks.summaryReader(org.org_id);
      const summaries = await read(payments);
      expect(payments.slice(0, 7).map((p) => summaries.get(p.webhook.deliveryId)?.status)).toEqual([...statuses, 'delivered']);
      expect(summaries.has(foreign._id)).toBe(false);
      // The hours 10 and 12, then the edge's and the foreign delivery by id.
      expect(finds).toHaveLength(4);
      // The next batch of an export in the same hours reads none of them again.
      finds.length = 0;
      expect((await read(payments.slice(3, 6))).size).toBe(3);
      expect(finds).toHaveLength(0);
    } finally {
      server.app.db.getClient().off('commandStarted', count);
    }
  });
});
