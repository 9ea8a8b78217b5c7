/**
 * The queries that run on every paid call, every background round and every page of history, each
 * answered from an index, so that a year of records costs them nothing. Two checks per query, neither
 * timed:
 * - the collection declares the index the query relies on (what MongoDB, in production, walks);
 * - the engine's plan for it uses an index and scans no collection (MongoDB: IXSCAN, no COLLSCAN;
 *   FerretDB, the embedded engine: PostgreSQL's plan has an index scan and no sequential scan).
 * A change that drops an index, or turns a lookup into a range FerretDB cannot serve, fails here. Each
 * collection holds 600 other documents, enough for either planner to prefer the index.
 */
import type { Document } from 'mongodb';
import { createContext, type AppContext } from '../../server/context.js';
import { testConfig } from '../support/server.js';

let app: AppContext;
beforeAll(async () => {
  app = await createContext(await testConfig());
});
afterAll(async () => {
  await app.db.dropDatabase().catch(() => {});
  await app.close();
});

interface HotQuery {
  what: string;
  model: string;
  filter: Document;
  sort?: Document;
  /** The index the query relies on: its key, in order. */
  index: Document;
  /** Another document of the collection (i: 0..599), never matching `filter`. */
  other: (i: number) => Document;
}

const day = (n: number) => new Date(Date.UTC(2026, 0, 1) + n * 86_400_000);

const HOT: HotQuery[] = [
  {
    what: 'the sweep: vouchers accepted in a minute', model: 'ChannelVoucher', filter: { minute: 29_000_000 }, index: { minute: 1 },
    other: (i) => ({ _id: `0x${i}:000000000001`, channelId: `0x${i}`, minute: 28_000_000 + i, callId: `chc_${i}`, createdAt: day(i % 365) }),
  },
  {
    what: 'the sweep: captures written in a minute', model: 'ChannelCapture', filter: { minute: 29_000_000 }, index: { minute: 1 },
    other: (i) => ({ _id: `0x${i}:000000000001:t`, minute: 28_000_000 + i, createdAt: day(i % 365) }),
  },
  {
    what: 'the sweep: its work set on a chain', model: 'ChannelSweepWork', filter: { chainId: 1 }, index: { chainId: 1 },
    other: (i) => ({ _id: `0x${i}`, chainId: 1_000 + i, touchedAt: day(i % 365) }),
  },
  {
    what: 'a channel call\'s record by id', model: 'ChannelVoucher', filter: { callId: 'chc_wanted' }, index: { callId: 1 },
    other: (i) => ({ _id: `0x${i}:000000000002`, channelId: `0x${i}`, minute: 27_000_000 + i, callId: `chc_other_${i}`, createdAt: day(i % 365) }),
  },
  {
    what: 'a seller\'s channels, newest first', model: 'Channel', filter: { orgId: 'org_wanted' }, sort: { createdAt: -1, _id: -1 }, index: { orgId: 1, createdAt: -1, _id: -1 },
    other: (i) => ({ _id: `0x${i}`, orgId: `org_${i % 50}`, chainId: 84532, createdAt: day(i % 365) }),
  },
  {
    what: 'the claim webhooks\' outbox: recent successful claims', model: 'ChannelAction', filter: { status: 'succeeded', updatedAt: { $gte: day(400) } }, index: { status: 1, updatedAt: 1 },
    other: (i) => ({ _id: `act_${i}`, status: `status_${i % 7}`, updatedAt: day(i % 365) }),
  },
  {
    what: 'the payments page of a seller, newest first', model: 'Payment', filter: { orgId: 'org_wanted' }, sort: { createdAt: -1, _id: -1 }, index: { orgId: 1, createdAt: -1, _id: -1 },
    other: (i) => ({ _id: `pay_${i}`, orgId: `org_${i % 50}`, status: 'settled', chainId: 84532, createdAt: day(i % 365), settledAt: day(i % 365) }),
  },
  {
    what: 'a seller\'s payments of one hour (pages, totals, the CSV export)', model: 'Payment', filter: { orgId: 'org_wanted', hour: '2026-12-01T14' }, index: { orgId: 1, hour: 1 },
    other: (i) => ({ _id: `pay_h_${i}`, orgId: `org_${i % 50}`, status: 'settled', chainId: 84532, hour: day(i % 365).toISOString().slice(0, 13), createdAt: day(i % 365) }),
  },
  {
    what: 'the days of a seller\'s payments, and the hours of one day', model: 'HistoryBucket', filter: { of: 'payments|org_wanted' }, index: { of: 1 },
    other: (i) => ({ _id: `payments|org_${i}|2026-01-01`, of: `payments|org_${i}`, bucket: '2026-01-01' }),
  },
  {
    what: 'the written totals of a seller\'s closed days', model: 'HistoryDayGroups', filter: { scope: 'payments|org_wanted' }, index: { scope: 1 },
    other: (i) => ({ _id: `payments|org_${i}|2026-01-01`, scope: `payments|org_${i}`, day: '2026-01-01', groups: [] }),
  },
  {
    what: 'the day groups round: the scopes with records in one day', model: 'HistoryBucket', filter: { bucket: '2027-01-01' }, index: { bucket: 1 },
    other: (i) => ({ _id: `deliveries|org_${i}|${day(i % 365).toISOString().slice(0, 10)}`, of: `deliveries|org_${i}`, bucket: day(i % 365).toISOString().slice(0, 10) }),
  },
  {
    what: 'the day groups round: what one day has written', model: 'HistoryDayGroups', filter: { day: '2027-01-01' }, index: { day: 1 },
    other: (i) => ({ _id: `deliveries|org_${i}|${day(i % 365).toISOString().slice(0, 10)}`, scope: `deliveries|org_${i}`, day: day(i % 365).toISOString().slice(0, 10), groups: [] }),
  },
  {
    what: 'reconciliation: verified payments left open', model: 'Payment', filter: { status: 'verified', chainId: 84532, createdAt: { $lt: day(400) } }, sort: { createdAt: 1 }, index: { status: 1, createdAt: 1 },
    other: (i) => ({ _id: `pay_s_${i}`, orgId: `org_${i % 50}`, status: 'settled', chainId: 84532, createdAt: day(i % 365) }),
  },
  {
    what: 'the payment webhook outbox: entries still waiting', model: 'Payment', filter: { webhookUndispatched: true, settledAt: { $lt: day(400) } }, sort: { settledAt: 1 }, index: { webhookUndispatched: 1, settledAt: 1 },
    other: (i) => ({ _id: `pay_w_${i}`, orgId: `org_${i % 50}`, status: 'settled', webhookUndispatched: i % 2 === 0 ? null : false, createdAt: day(i % 365), settledAt: day(i % 365) }),
  },
  {
    what: 'a month of a seller\'s settlements (CSV export)', model: 'SettledPayment', filter: { orgId: 'org_wanted', settledAt: { $gte: day(10), $lt: day(40) } }, index: { orgId: 1, settledAt: 1 },
    other: (i) => ({ _id: `pay_${i}`, orgId: `org_${i % 50}`, settledAt: day(i % 365) }),
  },
  {
    what: 'a seller\'s webhook deliveries of one hour (the delivery log\'s pages and counts)', model: 'WebhookDelivery', filter: { orgId: 'org_wanted', hour: '2026-12-01T14' }, index: { orgId: 1, hour: 1 },
    other: (i) => ({ _id: `whd_h_${i}`, orgId: `org_${i % 50}`, hour: day(i % 365).toISOString().slice(0, 13), createdAt: day(i % 365) }),
  },
  {
    what: 'webhook deliveries of a seller, newest first', model: 'WebhookDelivery', filter: { orgId: 'org_wanted' }, sort: { createdAt: -1, _id: -1 }, index: { orgId: 1, createdAt: -1, _id: -1 },
    other: (i) => ({ _id: `whd_${i}`, orgId: `org_${i % 50}`, endpointId: `ep_${i % 20}`, status: 'delivered', createdAt: day(i % 365) }),
  },
  {
    what: 'the oldest due webhook delivery (/ready, /metrics; the stalled-delivery sweep)', model: 'WebhookDelivery', filter: { status: 'pending', nextAttemptAt: { $lte: day(400) } }, sort: { nextAttemptAt: 1 }, index: { status: 1, nextAttemptAt: 1 },
    other: (i) => ({ _id: `whd_d_${i}`, orgId: `org_${i % 50}`, status: i % 2 ? 'delivered' : 'failed', nextAttemptAt: day(i % 365), createdAt: day(i % 365) }),
  },
  {
    what: 'a mail list page: one 64-message bucket of an inbox', model: 'Message', filter: { listBucket: 'inb_wanted:0' }, index: { listBucket: 1 },
    other: (i) => ({ _id: `msg_${i}`, inboxId: `inb_${i % 10}`, listBucket: `inb_${i % 10}:${Math.floor(i / 64)}`, threadId: `thr_${i % 100}`, messageId: `<${i}@x>`, direction: 'inbound', sortKey: String(i), createdAt: day(i % 365) }),
  },
  {
    what: 'a mail thread\'s messages in order', model: 'Message', filter: { threadId: 'thr_wanted' }, sort: { createdAt: 1, _id: 1 }, index: { threadId: 1, createdAt: 1, _id: 1 },
    other: (i) => ({ _id: `msg_t_${i}`, inboxId: `inb_${i % 10}`, listBucket: `inb_${i % 10}:${100 + Math.floor(i / 64)}`, threadId: `thr_${i % 100}`, messageId: `<t${i}@x>`, direction: 'inbound', sortKey: String(i), createdAt: day(i % 365) }),
  },
  {
    what: 'mail events still to dispatch', model: 'MailEvent', filter: { undispatched: true, at: { $lt: day(400) } }, sort: { at: 1 }, index: { undispatched: 1, at: 1 },
    other: (i) => ({ _id: `evt_${i}`, identityId: `id_${i % 30}`, seq: i, at: day(i % 365) }),
  },
  {
    what: 'a seller\'s usage this month', model: 'UsageCount', filter: { orgId: 'org_wanted', month: '2026-11' }, index: { orgId: 1, month: 1 },
    other: (i) => ({ _id: `use_${i}`, orgId: `org_${i}`, month: `2026-${String((i % 12) + 1).padStart(2, '0')}` }),
  },
  {
    what: 'an org\'s activity log entries of one hour (its pages and count)', model: 'LogEntry', filter: { orgId: 'org_wanted', hour: '2026-12-01T14' }, index: { orgId: 1, hour: 1 },
    other: (i) => ({ _id: `log_h_${i}`, orgId: `org_${i % 50}`, hour: day(i % 365).toISOString().slice(0, 13), createdAt: day(i % 365) }),
  },
  {
    what: 'the activity log of an org, newest first', model: 'LogEntry', filter: { orgId: 'org_wanted' }, sort: { createdAt: -1, _id: -1 }, index: { orgId: 1, createdAt: -1, _id: -1 },
    other: (i) => ({ _id: `log_${i}`, orgId: `org_${i % 50}`, identityId: `id_${i % 30}`, createdAt: day(i % 365) }),
  },
];

/** What is wrong with how the engine answers `query` (nothing: an index serves it). */
async function problemsOf(query: Pick<HotQuery, 'model' | 'filter' | 'sort' | 'index'>): Promise<string[]> {
  const collection = app.db.models[query.model]!.collection;
  const problems: string[] = [];
  const indexes = await collection.listIndexes().toArray();
  if (!indexes.some((ix) => JSON.stringify(ix.key) === JSON.stringify(query.index))) {
    problems.push(`${collection.collectionName} has no index ${JSON.stringify(query.index)} (it has ${indexes.map((ix) => JSON.stringify(ix.key)).join(', ')})`);
  }
  const cursor = collection.find(query.filter);
  const plan = await (query.sort ? cursor.sort(query.sort as never) : cursor).explain();
  const stages = stagesOf(plan);
  const scans = stages.filter((s) => s === 'COLLSCAN' || s === 'Seq Scan');
  const indexed = stages.filter((s) => s === 'IXSCAN' || s === 'IDHACK' || /Index (Only )?Scan/.test(s));
  if (scans.length || !indexed.length) problems.push(`${collection.collectionName} ${JSON.stringify(query.filter)}: plan ${stages.join(' > ') || '(none)'}`);
  return problems;
}

/** Every stage or node type named in a plan: MongoDB's `stage`s, PostgreSQL's `Node Type`s (FerretDB). */
function stagesOf(plan: unknown): string[] {
  const found: string[] = [];
  const walk = (node: unknown) => {
    if (Array.isArray(node)) node.forEach(walk);
    else if (node && typeof node === 'object') {
      for (const [key, value] of Object.entries(node)) {
        if ((key === 'stage' || key === 'Node Type') && typeof value === 'string') found.push(value);
        else walk(value);
      }
    }
  };
  walk((plan as { queryPlanner?: unknown }).queryPlanner ?? plan);
  return found;
}

describe('the hot queries of a year of history are answered from an index', () => {
  beforeAll(async () => {
    // Every model's indexes were made by createContext (server/platform/indexes.ts) before it returned.
    for (const query of HOT) {
      const collection = app.db.models[query.model]!.collection;
      await collection.insertMany(Array.from({ length: 600 }, (_, i) => query.other(i)) as never[]);
    }
  });

  it.each(HOT.map((q) => [q.what, q] as const))('%s', async (_what, query) => {
    expect(await problemsOf(query)).toEqual([]);
  });

  it('the guard itself fails for a query whose index is dropped, and for one on a field without an index', async () => {
    const model = 'ChannelSweepWork';
    const control = { model, filter: { chainId: 1 }, index: { chainId: 1 } };
    expect(await problemsOf(control)).toEqual([]);
    const collection = app.db.models[model]!.collection;
    await collection.dropIndex('chainId_1');
    try {
      expect((await problemsOf(control)).join('\n')).toMatch(/has no index \{"chainId":1\}/);
    } finally {
      await collection.createIndex({ chainId: 1 });
    }
    expect((await problemsOf({ model, filter: { touchedAt: day(3) }, index: { chainId: 1 } })).join('\n')).toMatch(/plan .*(COLLSCAN|Seq Scan)/);
  });
});
