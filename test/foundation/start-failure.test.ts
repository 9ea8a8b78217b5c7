// A server start that fails part-way (here: its SMTP port in use) hands back what it took before it
// throws, above all its relayer lease, which another process needs to settle payments. Before, the failed
// start kept its relayers running (holding the lease, polling the chain), and `agentgate dev` flooded the
// terminal with chain warnings as it stopped the chain under them.
import { createServer } from 'node:net';
import { once } from 'node:events';
import { MongoClient } from 'mongodb';
import { startServer } from '../../server/server.js';
import { testConfig } from '../support/server.js';

test('an SMTP port in use: one message naming SMTP_PORT, and every relayer lease it took is released', async () => {
  const holder = createServer();
  holder.listen(0, '127.0.0.1');
  await once(holder, 'listening');
  const busy = (holder.address() as { port: number }).port;
  const config = await testConfig({ SMTP_PORT: String(busy) });
  try {
    await expect(startServer(config)).rejects.toThrow(`SMTP port ${busy} on 127.0.0.1 is already in use: set SMTP_PORT to another port`);
  } finally {
    await new Promise<void>((resolve) => holder.close(() => resolve()));
  }
  const client = await MongoClient.connect(config.MONGODB_URI);
  try {
    const db = client.db(config.MONGODB_DB);
    const leases = await db.collection('relayer_leases').find().toArray();
    expect(leases.length).toBeGreaterThan(0); // it did take one before the SMTP listener failed
    expect(leases.filter((lease) => !lease.releasedAt)).toEqual([]);
    await db.dropDatabase();
  } finally {
    await client.close();
  }
}, 60_000);
