import { addressKey } from '../../server/screening/sources.js';
import type { TestServer } from '../support/server.js';

/** The org's activity-log entry of a screening refusal of `address`, once it is written (entries are batched). */
export async function screeningRefusalLogged(server: TestServer, key: string, address: string) {
  for (let i = 0; i < 50; i++) {
    const logs = await server.request('GET', '/v0/logs?limit=100', { key });
    const entry = logs.body.logs.find((l: { action: string; metadata?: { address?: string } }) => l.action === 'payments.screening_refused' && addressKey(l.metadata?.address ?? '') === addressKey(address));
    if (entry) return entry;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no screening refusal of ${address} in the activity log`);
}
