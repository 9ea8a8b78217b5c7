// What an ops person works with in the console, over plain HTTP against a real backend, chain, FerretDB
// and webhook receiver: totals, the volume chart, search, numbered pages and the CSV export checked
// against a known set of payments; the webhooks page by state; "retry now" (also clicked several times
// at once); deleting an endpoint and revoking a key behind a confirmation; one-time secrets with a copy
// button; the payment page's dates, endpoint link and decoded JWS; activity pages; the favicon.
import { randomBytes } from 'node:crypto';
import { getAddress } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { pay, sellerWithWebhook, waitForDelivery } from '../webhooks/seller.js';
import { startReceiver } from '../webhooks/receiver.js';
import { consoleGet, consolePost, signIn, type SignedIn } from './http-client.js';
import { startStorefront } from '../support/storefront.js';
import { HistoryBuckets, hourOf } from '../../server/platform/history-buckets.js';
import { deliveriesScope } from '../../server/webhooks/delivery-log.js';
import { activityScope } from '../../server/platform/activity-log.js';

let server: TestServer;
const receivers: Array<Awaited<ReturnType<typeof startReceiver>>> = [];
/** A webhook URL that resolves (registration checks it) for tests that never pay. */
let quietHook: string;

beforeAll(async () => {
  // A failed attempt's retry is a minute away: "failing" stays failing unless someone retries now.
  server = await startTestServer({ TRUST_PROXY: 'true', WEBHOOK_RETRY_BASE_MS: '60000' });
  const quiet = await startReceiver([], 200);
  receivers.push(quiet);
  quietHook = quiet.url;
}, 120_000);
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await server?.close();
});

const hex = (bytes: number) => `0x${randomBytes(bytes).toString('hex')}`;
const address = () => privateKeyToAccount(generatePrivateKey()).address;
const rowsIn = (page: string) => [...page.matchAll(/<tr data-payment-id="([^"]+)"/g)].map((m) => m[1]!);
const totalIn = (page: string, name: string) => new RegExp(`data-total="${name}">([^<]+)<`).exec(page)?.[1]?.trim();

/** Polls `check` until it returns something truthy, or fails with what it saw last. */
async function eventually<T>(check: () => Promise<T | undefined | false>, what: string, timeoutMs = 20_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('payments: totals, chart, search, pages and CSV against a known set', () => {
  let org: Awaited<ReturnType<typeof signUp>>;
  let session: SignedIn;
  const payerA = address();
  const ids: string[] = [];
  let txOfFirst = '';
  let injectedId = '';

  beforeAll(async () => {
    org = await signUp(server);
    session = await signIn(server, org.platform_key);
    // 31 payments over three days in March 2026, written as settlement records them (the totals must come
    // from the database, so the fixture is the database): 3 x 0.01 settled and 1 x 0.25 failed on the
    // 1st, 20 x 0.25 settled on the 2nd, 5 x 1.234567 settled (payer A) and 2 x 0.01 failed on the 4th.
    const specs: Array<{ day: string; n: number; amount: string; status: 'settled' | 'failed'; payer?: string; resource?: string; reason?: string }> = [
      { day: '2026-03-01', n: 3, amount: '10000', status: 'settled' },
      { day: '2026-03-01', n: 1, amount: '250000', status: 'failed', reason: 'transfer reverted, "insufficient funds"' },
      { day: '2026-03-02', n: 20, amount: '250000', status: 'settled' },
      { day: '2026-03-04', n: 5, amount: '1234567', status: 'settled', payer: payerA },
      { day: '2026-03-04', n: 1, amount: '10000', status: 'failed', resource: '=HYPERLINK("http://evil.example","click")' },
      { day: '2026-03-04', n: 1, amount: '10000', status: 'failed', resource: '@SUM(1+1)' },
    ];
    const docs = specs.flatMap((spec) => Array.from({ length: spec.n }, (_, i) => {
      const payer = spec.payer ?? address();
      const nonce = hex(32);
      const id = `pay_seed${ids.length.toString().padStart(3, '0')}${randomBytes(4).toString('hex')}`;
      ids.push(id);
      const createdAt = new Date(`${spec.day}T${String(8 + (i % 12)).padStart(2, '0')}:${String(i % 60).padStart(2, '0')}:00.000Z`);
      return {
        _id: id, orgId: org.org_id, direction: 'in', endpointId: null, network: 'base-sepolia', chainId: 84532, asset: getAddress(hex(20)),
        payerAddress: payer, recipientAddress: address(), amountUsdcRaw: spec.amount, resourceUrl: spec.resource ?? `https://api.example.com/seeded/${spec.day}`,
        x402Version: 1, authorizationKey: `84532:seed:${payer}:${nonce}`.toLowerCase(), authorizationNonce: nonce,
        authorization: { from: payer, to: payer, value: spec.amount, validAfter: '0', validBefore: '1893456000', nonce }, signature: hex(65),
        status: spec.status, createdAt, hour: hourOf(createdAt), ...(spec.status === 'settled' ? { txHash: hex(32), settledAt: createdAt } : { failureReason: spec.reason ?? 'transfer reverted' }),
      };
    }));
    // Filed as a claim files them: the hour listed first, then the record.
    for (const doc of docs) await server.app.payments.records.noteHour(doc);
    await server.app.payments.records.payments.insertMany(docs);
    txOfFirst = (docs[0] as { txHash?: string }).txHash!;
    injectedId = docs.find((d) => d.resourceUrl.startsWith('=HYPERLINK'))!._id;
  });

  it('totals the filtered range in the database: count, settled volume, failed', async () => {
    const all = await consoleGet(server, '/console/payments', session.cookie);
    expect(all.status).toBe(200);
    expect(totalIn(all.text, 'count')).toBe('31');
    // 3 x 0.01 + 20 x 0.25 + 5 x 1.234567 (failed payments moved no money)
    expect(totalIn(all.text, 'volume')).toBe('11.202835');
    expect(totalIn(all.text, 'settled')).toBe('28');
    expect(totalIn(all.text, 'failed')).toBe('3');
    const secondDay = await consoleGet(server, '/console/payments?from=2026-03-02&to=2026-03-02', session.cookie);
    expect([totalIn(secondDay.text, 'count'), totalIn(secondDay.text, 'volume'), totalIn(secondDay.text, 'failed')]).toEqual(['20', '5', '0']);
    const failed = await consoleGet(server, '/console/payments?status=failed', session.cookie);
    expect([totalIn(failed.text, 'count'), totalIn(failed.text, 'failed')]).toEqual(['3', '3']);
    expect(totalIn(failed.text, 'volume')).toBe('0');
  });

  it('draws settled volume per day for the range as an inline SVG, with each day titled', async () => {
    const res = await consoleGet(server, '/console/payments?from=2026-03-01&to=2026-03-05', session.cookie);
    const bars = [...res.text.matchAll(/<rect class="chart-bar"[^>]*data-day="([^"]+)" data-volume="([^"]+)"><title>([^<]+)<\/title>/g)].map((m) => [m[1], m[2]]);
    expect(bars).toEqual([['2026-03-01', '0.03'], ['2026-03-02', '5'], ['2026-03-03', '0'], ['2026-03-04', '6.172835'], ['2026-03-05', '0']]);
    expect(res.text).toContain('<title>2026-03-02: 5 USDC, 20 payments</title>');
    // Nothing from elsewhere: the page loads only the console's own assets.
    expect(res.text).not.toMatch(/<script[^>]+src="(?!\/console\/assets\/)/);
    // Without a range the chart covers the last 30 days.
    const plain = await consoleGet(server, '/console/payments', session.cookie);
    expect(/<figure class="chart" data-buckets="(\d+)"/.exec(plain.text)?.[1]).toBe('30');
    // A long range puts several days in a bar (at most 62 bars).
    const year = await consoleGet(server, '/console/payments?from=2025-03-01&to=2026-03-05', session.cookie);
    expect(Number(/data-buckets="(\d+)"/.exec(year.text)?.[1])).toBeLessThanOrEqual(62);
    expect(year.text).toContain('Settled volume per 6 days');
    // Each payment in the bar of its day: March 1st closes one bar, the 2nd opens the last (cut at the range's end).
    expect(year.text).toContain('<title>2026-02-24 – 2026-03-01: 0.03 USDC, 3 payments</title>');
    expect(year.text).toContain('<title>2026-03-02 – 2026-03-05: 11.172835 USDC, 25 payments</title>');
    expect(year.text).toContain('11.202835 USDC in all');
  });

  it('says "showing 1–25 of 31" and pages through every payment once', async () => {
    const first = await consoleGet(server, '/console/payments', session.cookie);
    expect(first.text).toMatch(/Showing <strong>1–25<\/strong> of <strong>31<\/strong> payments/);
    expect(first.text).toContain('href="/console/payments?page=2"');
    const second = await consoleGet(server, '/console/payments?page=2', session.cookie);
    expect(second.text).toMatch(/Showing <strong>26–31<\/strong> of <strong>31<\/strong>/);
    expect(second.text).toContain('rel="prev"');
    expect((await consoleGet(server, '/console/payments?page=9', session.cookie)).text).toContain('Page 9 is past the end: there are <strong>31</strong> payments (2 pages).');
    const seen = [...rowsIn(first.text), ...rowsIn(second.text)];
    expect(seen).toHaveLength(31);
    expect(new Set(seen)).toEqual(new Set(ids));
    // Filters stay in the page links.
    const filtered = await consoleGet(server, '/console/payments?status=settled&from=2026-03-01', session.cookie);
    expect(filtered.text).toContain('href="/console/payments?status=settled&#38;from=2026-03-01&#38;page=2"');
  });

  it('searches by payment id, by transaction hash (any case) and by payer address', async () => {
    const byId = await consoleGet(server, `/console/payments?q=${ids[5]}`, session.cookie);
    expect(rowsIn(byId.text)).toEqual([ids[5]]);
    const byTx = await consoleGet(server, `/console/payments?q=${txOfFirst.toUpperCase().replace('0X', '0x')}`, session.cookie);
    expect(rowsIn(byTx.text)).toEqual([ids[0]]);
    const byPayer = await consoleGet(server, `/console/payments?q=${payerA.toLowerCase()}`, session.cookie);
    expect(rowsIn(byPayer.text)).toHaveLength(5);
    expect(totalIn(byPayer.text, 'volume')).toBe('6.172835');
    // Another org's payment id finds nothing here.
    const other = await signUp(server);
    const otherSession = await signIn(server, other.platform_key);
    expect(rowsIn((await consoleGet(server, `/console/payments?q=${ids[5]}`, otherSession.cookie)).text)).toEqual([]);
  });

  it('exports the filtered payments as CSV: streamed, an attachment, formulas neutralised', async () => {
    const res = await fetch(`${server.url}/console/payments.csv`, { headers: { cookie: session.cookie } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(res.headers.get('content-disposition')).toMatch(/^attachment; filename="payments-\d{4}-\d{2}-\d{2}\.csv"$/);
    const lines = (await res.text()).split('\r\n').filter(Boolean);
    expect(lines[0]).toBe('payment_id,created_at,status,amount_usdc,amount_atomic,payer,recipient,resource,endpoint_id,network,tx_hash,settled_at,failure_reason,webhook');
    expect(lines).toHaveLength(32);
    expect(new Set(lines.slice(1).map((l) => l.split(',')[0]))).toEqual(new Set(ids));
    const injected = lines.find((l) => l.startsWith(`${injectedId},`))!;
    expect(injected).toContain(`"'=HYPERLINK(""http://evil.example"",""click"")"`);
    expect(lines.some((l) => l.includes(",'@SUM(1+1),"))).toBe(true);
    expect(lines.some((l) => l.includes('"transfer reverted, ""insufficient funds"""'))).toBe(true);
    // The same filters as the page.
    const failed = await (await fetch(`${server.url}/console/payments.csv?status=failed&from=2026-03-04`, { headers: { cookie: session.cookie } })).text();
    expect(failed.split('\r\n').filter(Boolean)).toHaveLength(3);
    expect(failed).not.toContain(',settled,');
    // The page links to the export with its filters.
    expect((await consoleGet(server, '/console/payments?status=failed', session.cookie)).text).toContain('href="/console/payments.csv?status=failed"');
    // Signed out: no file.
    expect((await consoleGet(server, '/console/payments.csv')).status).toBe(303);
  });

  it('shows a bad filter on the form itself, with the values as typed, instead of an error page', async () => {
    const res = await consoleGet(server, '/console/payments?from=2026-03-05&to=2026-03-01&status=failed', session.cookie);
    expect(res.status).toBe(400);
    expect(res.text).toContain('<h1>Payments</h1>');
    expect(res.text).toMatch(/id="f-to" name="to" value="2026-03-01"[^>]*aria-invalid="true" aria-describedby="err-to"/);
    expect(res.text).toContain('<p class="field-error" id="err-to">must not be before &#34;From&#34;</p>');
    expect(res.text).toContain('<option value="failed" selected>');
    expect(rowsIn(res.text)).toEqual([]);
  });

  it('pages the activity log beyond its newest entries', async () => {
    const at = (i: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, i));
    const entries = Array.from({ length: 120 }, (_, i) => ({ _id: `log_seed${i.toString().padStart(4, '0')}`, orgId: org.org_id, action: 'test.seeded', category: 'test', severity: 'info', status: 'success', description: `seeded ${i}`, metadata: {}, createdAt: at(i), hour: hourOf(at(i)) }));
    // Filed as the log files them: the hour listed first, then the entries.
    await HistoryBuckets.for(server.app.db).note(activityScope(org.org_id), at(0));
    await server.app.db.collection('activity_logs').insertMany(entries as never[]);
    const first = await consoleGet(server, '/console/activity', session.cookie);
    const total = Number(/of <strong>(\d+)<\/strong> entries/.exec(first.text)?.[1]);
    expect(total).toBeGreaterThanOrEqual(120);
    expect(first.text).toContain('href="/console/activity?page=3"');
    const last = await consoleGet(server, `/console/activity?page=${Math.ceil(total / 50)}`, session.cookie);
    // The oldest entry is on the last page.
    expect(last.text).toContain('seeded 0<');
    expect(first.text).not.toContain('seeded 0<');
  });

  it('lists deliveries by state (pending, failing, failed, delivered) with counts per state', async () => {
    const now = new Date();
    const base = { event: 'payment.received', orgId: org.org_id, endpointId: 'ep_gone', body: '{}', attempts: [], round: 0, createdAt: now, hour: hourOf(now), updatedAt: now };
    // Filed as the enqueue files them: the hour listed first, then the deliveries.
    await HistoryBuckets.for(server.app.db).note(deliveriesScope(org.org_id), now);
    await server.app.webhooks.deliveries.insertMany([
      { ...base, _id: 'whd_seedpending', eventId: 'evt_seed1', paymentId: ids[0], status: 'pending', attemptCount: 0, nextAttemptAt: now },
      { ...base, _id: 'whd_seedfailing', eventId: 'evt_seed2', paymentId: ids[1], status: 'pending', attemptCount: 1, lastError: 'receiver answered 500', nextAttemptAt: new Date(now.getTime() + 3_600_000) },
      { ...base, _id: 'whd_seedfailed', eventId: 'evt_seed3', paymentId: ids[2], status: 'failed', attemptCount: 6, lastError: 'receiver answered 500', failedAt: now },
      { ...base, _id: 'whd_seeddelivered', eventId: 'evt_seed4', paymentId: ids[3], status: 'delivered', attemptCount: 1, deliveredAt: now },
    ] as never[]);
    const all = await consoleGet(server, '/console/webhooks', session.cookie);
    expect(all.status).toBe(200);
    for (const [state, n] of [['pending', 1], ['failing', 1], ['failed', 1], ['delivered', 1]] as const) {
      expect(all.text).toContain(`data-state-count="${state}">${n}<`);
      const only = await consoleGet(server, `/console/webhooks?state=${state}`, session.cookie);
      expect([...only.text.matchAll(/data-state="([a-z]+)"/g)].map((m) => m[1])).toEqual([state]);
    }
    expect(all.text).toMatch(/Showing <strong>1–4<\/strong> of <strong>4<\/strong> deliveries/);
    // The platform key may retry any of them; the pending and failing ones say "Retry now".
    expect(all.text).toContain('action="/console/deliveries/whd_seedfailing/retry"');
    const byPayment = await consoleGet(server, `/console/webhooks?payment=${ids[2]}`, session.cookie);
    expect([...byPayment.text.matchAll(/data-delivery-id="([^"]+)"/g)].map((m) => m[1])).toEqual(['whd_seedfailed']);
    await server.app.webhooks.deliveries.deleteMany({ _id: { $in: ['whd_seedpending', 'whd_seedfailing', 'whd_seedfailed', 'whd_seeddelivered'] } });
  });
});

describe('webhooks: the state column and "retry now"', () => {
  it('a failing delivery (next attempt a minute away) is sent at once by "retry now", once, however many clicks', async () => {
    const receiver = await startReceiver([500], 200);
    receivers.push(receiver);
    const seller = await sellerWithWebhook(server, receiver.url);
    const session = await signIn(server, seller.platformKey);
    const paymentId = await pay(server, seller);
    const failing = await waitForDelivery(server, seller, paymentId, (d) => d.status === 'pending' && d.attemptCount === 1);
    expect(Date.parse(failing.nextAttemptAt) - Date.now()).toBeGreaterThan(30_000);

    // The payments list and the webhooks page both say "failing".
    const list = await consoleGet(server, '/console/payments', session.cookie);
    const row = new RegExp(`<tr data-payment-id="${paymentId}">[\\s\\S]*?</tr>`).exec(list.text)![0];
    expect(row).toMatch(/<td data-label="Webhook" data-webhook>.*badge-warn">failing</);
    const webhooks = await consoleGet(server, '/console/webhooks?state=failing', session.cookie);
    expect(webhooks.text).toContain(`data-delivery-id="${failing.id}" data-state="failing"`);
    const detail = await consoleGet(server, `/console/payments/${paymentId}`, session.cookie);
    expect(detail.text).toContain('>Retry now</button>');

    // Four clicks at once (two tabs, a double click), each posting the form as the page has it: four early
    // jobs for the same attempt.
    const form = new RegExp(`action="/console/deliveries/${failing.id}/retry"[^]*?name="back" value="([^"]*)"><input type="hidden" name="round" value="(\\d+)"><input type="hidden" name="attempt" value="(\\d+)">`).exec(webhooks.text)!;
    const back = form[1]!.replace(/&#38;/g, '&');
    expect([back, form[2], form[3]]).toEqual(['/console/webhooks?state=failing', '0', '1']);
    const clicks = await Promise.all(Array.from({ length: 4 }, () => consolePost(server, `/console/deliveries/${failing.id}/retry`, { _csrf: session.csrf, back, round: form[2]!, attempt: form[3]! }, { cookie: session.cookie })));
    expect(clicks.map((c) => [c.status, c.location])).toEqual(Array(4).fill([303, back]));
    const delivered = await waitForDelivery(server, seller, paymentId, (d) => d.status === 'delivered', 20_000);
    expect(delivered.attempts.map((a: any) => a.statusCode)).toEqual([500, 200]);
    // Every early job has run (finished jobs are removed; the one scheduled a minute ahead for the same
    // attempt is left, and will find it made): one request per attempt.
    const jobs = server.app.db.collection('jobs');
    await eventually(async () => {
      const left = await jobs.find({ 'data.deliveryId': failing.id }).toArray();
      return left.every((j) => !j.lockedAt && j.nextRunAt && j.nextRunAt.getTime() > Date.now() + 30_000);
    }, 'the early jobs to finish');
    expect(receiver.received).toHaveLength(2);
    const retried = await server.app.db.collection('activity_logs').find({ orgId: seller.orgId, action: 'webhooks.retried' }).toArray();
    // (A click that landed after the attempt was made did nothing: at most four, at least one.)
    expect(retried.length).toBeGreaterThanOrEqual(1);
    expect(new Set(retried.map((e) => e.description))).toEqual(new Set([`payment.received delivery for ${paymentId}: next attempt (#2) sent now by hand`]));
    // A click from a page shown before the delivery moved on sends nothing again (no new round).
    const stale = await consolePost(server, `/console/deliveries/${failing.id}/retry`, { _csrf: session.csrf, back, round: '0', attempt: '1' }, { cookie: session.cookie });
    expect(stale.status).toBe(303);
    expect((await server.app.webhooks.deliveries.findById(failing.id).lean())!.round).toBe(0);
    expect(receiver.received).toHaveLength(2);
  }, 60_000);

  it('a failed delivery starts one new round, however many processes or clicks retry it at once', async () => {
    // The new round's attempt is held open until every retry has answered: a retry that came after the
    // round had delivered would rightly start another round (a delivered delivery may be sent again).
    const receiver = await startReceiver([400, 'hang'], 200);
    receivers.push(receiver);
    const seller = await sellerWithWebhook(server, receiver.url);
    const session = await signIn(server, seller.platformKey);
    const paymentId = await pay(server, seller);
    const failed = await waitForDelivery(server, seller, paymentId, (d) => d.status === 'failed');
    expect((await consoleGet(server, `/console/webhooks?state=failed`, session.cookie)).text).toContain(`data-delivery-id="${failed.id}"`);
    // Through the service, as several processes would: one inserts the round's claim, the rest are refused
    // (or, once the round has started, hurry its first attempt, which the attempt claim keeps to one).
    const outcomes = await Promise.allSettled(Array.from({ length: 6 }, () => server.app.webhooks.retryNow(seller.orgId, failed.id)));
    expect(outcomes.some((o) => o.status === 'fulfilled')).toBe(true);
    for (const o of outcomes) if (o.status === 'rejected') expect((o.reason as { status?: number }).status).toBe(409);
    await receiver.next(2);
    receiver.release(200);
    const delivered = await waitForDelivery(server, seller, paymentId, (d) => d.status === 'delivered', 20_000);
    expect(delivered.attempts.map((a: any) => a.statusCode)).toEqual([400, 200]);
    const doc = await server.app.webhooks.deliveries.findById(failed.id).lean();
    expect(doc!.round).toBe(1);
    await eventually(async () => {
      const open = await server.app.db.collection('jobs').countDocuments({ 'data.deliveryId': failed.id, lockedAt: { $ne: null } });
      const queued = await server.app.db.collection('jobs').countDocuments({ 'data.deliveryId': failed.id, nextRunAt: { $ne: null } });
      return open === 0 && queued === 0;
    }, 'the retry jobs to finish');
    expect(receiver.received).toHaveLength(2);
    // Delivered: the console offers to send it again (a new round), through the form.
    const page = await consoleGet(server, `/console/payments/${paymentId}`, session.cookie);
    expect(page.text).toContain('>Send again</button>');
  }, 60_000);

  it('refuses a retry form whose return address is not a console page', async () => {
    const receiver = await startReceiver([400], 200);
    receivers.push(receiver);
    const seller = await sellerWithWebhook(server, receiver.url);
    const session = await signIn(server, seller.platformKey);
    const paymentId = await pay(server, seller);
    const failed = await waitForDelivery(server, seller, paymentId, (d) => d.status === 'failed');
    for (const back of ['https://evil.example/', '//evil.example/console/webhooks', '/console/webhooks\r\nx: y']) {
      const res = await consolePost(server, `/console/deliveries/${failed.id}/retry`, { _csrf: session.csrf, back }, { cookie: session.cookie });
      expect([back, res.status]).toEqual([back, 400]);
    }
    expect((await server.app.webhooks.deliveries.findById(failed.id).lean())!.round).toBe(0);
  }, 60_000);
});

describe('endpoints and keys', () => {
  it('deletes an endpoint after a confirmation page; its payments stay', async () => {
    const seller = await sellerWithWebhook(server, quietHook);
    const session = await signIn(server, seller.platformKey);
    const list = await consoleGet(server, '/console/endpoints', session.cookie);
    expect(list.text).toContain(`href="/console/endpoints/${seller.endpointId}/delete"`);
    // The list links to the confirmation; nothing on it deletes by itself.
    expect(list.text).not.toContain(`action="/console/endpoints/${seller.endpointId}/delete"`);
    const confirm = await consoleGet(server, `/console/endpoints/${seller.endpointId}/delete`, session.cookie);
    expect(confirm.status).toBe(200);
    expect(confirm.text).toContain('Delete this endpoint?');
    expect(confirm.text).toContain(seller.resource);
    expect(confirm.text).toContain(`action="/console/endpoints/${seller.endpointId}/delete"`);
    const forged = await consolePost(server, `/console/endpoints/${seller.endpointId}/delete`, {}, { cookie: session.cookie });
    expect(forged.status).toBe(403);
    const done = await consolePost(server, `/console/endpoints/${seller.endpointId}/delete`, { _csrf: session.csrf }, { cookie: session.cookie });
    expect([done.status, done.location]).toEqual([303, '/console/endpoints?deleted=1']);
    expect((await server.request('GET', `/v0/payments/endpoints/${seller.endpointId}`, { key: seller.platformKey })).status).toBe(404);
    const after = await consoleGet(server, '/console/endpoints?deleted=1', session.cookie);
    expect(after.text).toContain('Endpoint deleted.');
    expect(after.text).not.toContain(seller.resource);
    expect((await consolePost(server, `/console/endpoints/${seller.endpointId}/delete`, { _csrf: session.csrf }, { cookie: session.cookie })).status).toBe(404);
    // Another org cannot reach it (the same 404 as a missing one).
    const otherSeller = await sellerWithWebhook(server, quietHook);
    expect((await consoleGet(server, `/console/endpoints/${otherSeller.endpointId}/delete`, session.cookie)).status).toBe(404);
    expect((await consolePost(server, `/console/endpoints/${otherSeller.endpointId}/delete`, { _csrf: session.csrf }, { cookie: session.cookie })).status).toBe(404);
    expect((await server.request('GET', `/v0/payments/endpoints/${otherSeller.endpointId}`, { key: otherSeller.platformKey })).status).toBe(200);
  });

  it('asks before revoking a seller key, and shows a new key whole with a copy button', async () => {
    const org = await signUp(server);
    const session = await signIn(server, org.platform_key);
    const created = await consolePost(server, '/console/seller-keys', { name: 'to revoke', _csrf: session.csrf }, { cookie: session.cookie });
    expect(created.status).toBe(201);
    const rawKey = /<code id="secret" class="secret" data-secret>(loid-[A-Za-z0-9_-]{43})<\/code>/.exec(created.text)?.[1];
    expect(rawKey).toBeDefined();
    expect(created.text).toContain('data-copy="secret"');
    const keys = await consoleGet(server, '/console/seller-keys', session.cookie);
    const keyId = /href="\/console\/seller-keys\/([^/]+)\/revoke"/.exec(keys.text)?.[1];
    expect(keyId).toBeDefined();
    expect(keys.text).not.toContain(`action="/console/seller-keys/${keyId}/revoke"`);
    const confirm = await consoleGet(server, `/console/seller-keys/${keyId}/revoke`, session.cookie);
    expect(confirm.text).toContain('Revoke this seller key?');
    expect(confirm.text).toContain(`action="/console/seller-keys/${keyId}/revoke"`);
    // Still live until the confirmation is posted.
    expect((await server.request('GET', '/v0/payments/seller-keys', { key: org.platform_key })).body.keys[0].revokedAt ?? null).toBeNull();
    const revoked = await consolePost(server, `/console/seller-keys/${keyId}/revoke`, { _csrf: session.csrf }, { cookie: session.cookie });
    expect(revoked.status).toBe(303);
    expect((await server.request('GET', '/v0/payments/seller-keys', { key: org.platform_key })).body.keys[0].revokedAt).toEqual(expect.any(String));
    expect((await consoleGet(server, `/console/seller-keys/${keyId}/revoke`, session.cookie)).status).toBe(404);
  });

  it('shows a new webhook secret whole, with a copy button', async () => {
    const org = await signUp(server);
    const session = await signIn(server, org.platform_key);
    // The org sells /copy from its storefront; the form registers it (the backend checks the storefront's 402).
    expect((await server.request('PUT', '/v0/payments/acceptance', { key: org.platform_key, body: { enabled: true, payTo: privateKeyToAccount(generatePrivateKey()).address } })).status).toBe(200);
    const sellerKey = (await server.request('POST', '/v0/payments/seller-keys', { key: org.platform_key, body: {} })).body.apiKey;
    const shop = await startStorefront(server.url, sellerKey, { 'GET /copy': { price: '$0.02' } });
    const res = await consolePost(server, '/console/endpoints', { url: shop.resource('/copy'), priceUsdc: '0.02', webhookUrl: quietHook, _csrf: session.csrf }, { cookie: session.cookie });
    expect([res.status, res.status === 201 ? '' : res.text]).toEqual([201, '']);
    const secret = /<code id="secret" class="secret" data-secret>([^<]+)<\/code>/.exec(res.text)?.[1];
    expect(secret).toMatch(/^whsec_[A-Za-z0-9_-]{20,}$/);
    expect(res.text).toContain('data-copy="secret"');
    expect(res.text).not.toContain('readonly');
  });
});

describe('a payment page', () => {
  it('shows valid after / before as dates, the endpoint as a link and the JWS decoded', async () => {
    const receiver = await startReceiver([], 200);
    receivers.push(receiver);
    const seller = await sellerWithWebhook(server, receiver.url);
    const session = await signIn(server, seller.platformKey);
    const paymentId = await pay(server, seller);
    const payment = (await server.request('GET', `/v0/payments/${paymentId}`, { key: seller.sellerKey })).body;
    const res = await consoleGet(server, `/console/payments/${paymentId}`, session.cookie);
    expect(res.status).toBe(200);
    // The record is written just after the payment's answer: read it once that write is done.
    await server.app.payments.records.recordsWritten();
    const stored = await server.app.payments.records.payments.findById(paymentId).lean();
    const validBefore = new Date(Number(stored!.authorization.validBefore) * 1000).toISOString();
    expect(res.text).toContain(`<time datetime="${validBefore}" title="unix ${stored!.authorization.validBefore}">${validBefore.slice(0, 10)} ${validBefore.slice(11, 19)} UTC</time>`);
    expect(res.text).not.toContain('(unix seconds)');
    expect(res.text).toContain(`<a href="/console/endpoints#${seller.endpointId}" class="break">${seller.resource}</a>`);
    expect(res.text).toContain('aria-label="JWS header"');
    expect(res.text).toMatch(/aria-label="JWS header">\{\n {2}&#34;alg&#34;: &#34;EdDSA&#34;/);
    const claims = /aria-label="JWS claims">([\s\S]*?)<\/pre>/.exec(res.text)?.[1];
    expect(claims).toContain(`&#34;resourceUrl&#34;: &#34;${seller.resource}&#34;`);
    expect(payment.offerReceipt?.signature ?? stored!.offerReceipt!.signature).toBeDefined();
    expect(res.text).toContain(stored!.offerReceipt!.signature);
  }, 60_000);
});

it('serves a favicon that every page names', async () => {
  const org = await signUp(server);
  const session = await signIn(server, org.platform_key);
  const icon = await consoleGet(server, '/console/assets/favicon.svg');
  expect(icon.status).toBe(200);
  expect(icon.headers.get('content-type')).toBe('image/svg+xml');
  expect(icon.text).toMatch(/^<svg /);
  for (const path of ['/console/sign-in', '/console/payments', '/console/webhooks', '/console/endpoints', '/console/activity']) {
    expect((await consoleGet(server, path, path.endsWith('sign-in') ? undefined : session.cookie)).text).toContain('<link rel="icon" href="/console/assets/favicon.svg" type="image/svg+xml">');
  }
});

it('a seller-key session reads the new pages and the export but gets no retry or delete control', async () => {
  const receiver = await startReceiver([500], 200);
  receivers.push(receiver);
  const seller = await sellerWithWebhook(server, receiver.url);
  const paymentId = await pay(server, seller);
  const failing = await waitForDelivery(server, seller, paymentId, (d) => d.status === 'pending' && d.attemptCount === 1);
  const session = await signIn(server, seller.sellerKey);
  const webhooks = await consoleGet(server, '/console/webhooks', session.cookie);
  expect(webhooks.text).toContain(`data-delivery-id="${failing.id}"`);
  expect(webhooks.text).not.toContain('/retry"');
  expect((await consoleGet(server, `/console/payments/${paymentId}`, session.cookie)).text).not.toContain('Retry now');
  const csv = await fetch(`${server.url}/console/payments.csv`, { headers: { cookie: session.cookie } });
  expect(csv.status).toBe(200);
  expect(await csv.text()).toContain(paymentId);
  const retry = await consolePost(server, `/console/deliveries/${failing.id}/retry`, { _csrf: session.csrf }, { cookie: session.cookie });
  expect(retry.status).toBe(403);
  expect((await server.app.webhooks.deliveries.findById(failing.id).lean())!.attemptCount).toBe(1);
  expect(receiver.received).toHaveLength(1);
  const del = await consolePost(server, `/console/endpoints/${seller.endpointId}/delete`, { _csrf: session.csrf }, { cookie: session.cookie });
  expect(del.status).toBe(403);
  expect((await server.request('GET', `/v0/payments/endpoints/${seller.endpointId}`, { key: seller.platformKey })).status).toBe(200);
}, 60_000);
