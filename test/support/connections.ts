import mongoose, { type Connection } from 'mongoose';
import { testDbName } from './server.js';

/**
 * `count` connections to one fresh test database, standing in for as many processes of a deployment:
 * opened before the file's tests, the database dropped and the connections closed after them.
 */
export function processConnections(count: number): () => Connection[] {
  const dbName = testDbName();
  let conns: Connection[] = [];
  beforeAll(async () => {
    conns = await Promise.all(Array.from({ length: count }, () => mongoose.createConnection(process.env.AGENTGATE_TEST_MONGODB_URI!, { dbName }).asPromise()));
  });
  afterAll(async () => {
    await conns[0]?.dropDatabase().catch(() => {});
    await Promise.all(conns.map((c) => c.close()));
  });
  return () => conns;
}
