import type { Connection } from 'mongoose';
import { isDuplicateKey } from './errors.js';

/**
 * Runs `work` once per database, for data written before a release needed it (an upgrade's backfill): a
 * marker, inserted when the work is done, skips it afterwards. Two processes starting together may both
 * run it, so `work` must be safe to repeat.
 */
export async function runOnce(db: Connection, name: string, work: () => Promise<void>): Promise<void> {
  const markers = db.collection<{ _id: string; at: Date }>('upgrades_done');
  if (await markers.findOne({ _id: name }, { projection: { _id: 1 } })) return;
  await work();
  await markers.insertOne({ _id: name, at: new Date() }).catch((err) => { if (!isDuplicateKey(err)) throw err; });
}
