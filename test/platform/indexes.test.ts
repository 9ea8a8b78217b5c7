/**
 * The indexes every process makes at its start (server/platform/indexes.ts), on the suite's database
 * engine: all the models declare are there after a start, a start where they all exist creates none, a
 * dropped one comes back, an index whose options changed fails the start rather than being kept, and a
 * model compiled after the start still gets its own.
 */
import mongoose, { type Connection } from 'mongoose';
import type { CommandStartedEvent } from 'mongodb';
import { createContext, type AppContext } from '../../server/context.js';
import { declaredIndexes, ensureIndexes } from '../../server/platform/indexes.js';
import { testConfig } from '../support/server.js';

let app: AppContext;
beforeAll(async () => {
  app = await createContext(await testConfig());
});
afterAll(async () => {
  await app.db.dropDatabase().catch(() => {});
  await app.close();
});

type SentIndex = { name: string; sparse?: boolean };

/** The createIndexes commands the connection sends while `run` runs: the collection and the indexes of each. */
async function createIndexesSent(db: Connection, run: () => Promise<unknown>): Promise<Array<{ collection: string; indexes: SentIndex[] }>> {
  const sent: Array<{ collection: string; indexes: SentIndex[] }> = [];
  const listener = (event: CommandStartedEvent) => {
    if (event.commandName === 'createIndexes') sent.push({ collection: event.command.createIndexes as string, indexes: (event.command.indexes as SentIndex[]).map(({ name, sparse }) => ({ name, ...(sparse ? { sparse } : {}) })) });
  };
  const client = db.getClient();
  client.on('commandStarted', listener);
  try {
    await run();
  } finally {
    client.off('commandStarted', listener);
  }
  return sent;
}

it('after a start, every index each schema declares exists, with its fields and uniqueness', async () => {
  const models = Object.values(app.db.models);
  expect(models.length).toBeGreaterThan(30);
  for (const model of models) {
    // Mongoose's own reading of the schema, not ours (declaredIndexes), so a declaration we dropped shows.
    const declared = model.schema.indexes();
    if (!declared.length) continue;
    const existing = (await model.collection.indexes()).map((ix) => ({ key: ix.key, unique: ix.unique ?? false }));
    for (const [key, options] of declared) expect({ model: model.modelName, index: existing.find((ix) => JSON.stringify(ix.key) === JSON.stringify(key)) }).toEqual({ model: model.modelName, index: { key, unique: options.unique ?? false } });
  }
});

it('a start where every index exists creates none; one dropped meanwhile is created again, alone, with its options', async () => {
  expect(await createIndexesSent(app.db, () => ensureIndexes(app.db))).toEqual([]);

  // A sparse one: MongoDB keeps the option (FerretDB lists it nowhere, so what is sent is what is checked).
  const payments = app.db.models.Payment!;
  await payments.collection.dropIndex('webhookUndispatched_1_settledAt_1');
  expect(await createIndexesSent(app.db, () => ensureIndexes(app.db))).toEqual([{ collection: payments.collection.collectionName, indexes: [{ name: 'webhookUndispatched_1_settledAt_1', sparse: true }] }]);
  expect((await payments.collection.indexes()).map((ix) => ix.name)).toContain('webhookUndispatched_1_settledAt_1');
});

it('an index whose options changed fails the start instead of being kept as it was', async () => {
  const conn = await mongoose.createConnection(app.config.MONGODB_URI, { dbName: app.db.name, autoIndex: false, autoCreate: false }).asPromise();
  try {
    // The same collection and index name as an existing non-unique index, declared unique by a new version.
    const schema = new mongoose.Schema({ orgId: String, createdAt: Date });
    const payments = app.db.models.Payment!;
    const existing = declaredIndexes(payments).find((ix) => !ix.unique)!;
    schema.index(existing.key, { unique: true, name: existing.name });
    conn.model('PaymentMadeUnique', schema, payments.collection.collectionName);
    await expect(ensureIndexes(conn)).rejects.toThrow(new RegExp(`index ${existing.name} of payments is .* in the database, and this version declares .*"unique":true.*: drop it`));
  } finally {
    await conn.close();
  }
});

it('a model compiled after the start gets its indexes', async () => {
  const schema = new mongoose.Schema({ thing: String });
  schema.index({ thing: 1 });
  const late = app.db.model('LateModelForIndexTest', schema, 'late_model_for_index_test');
  await late.init();
  expect((await late.collection.indexes()).map((ix) => ix.name)).toContain('thing_1');
});
