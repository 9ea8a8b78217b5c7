import { createBackendClient, type BackendClientOptions } from './backend-client.js';
import { Paywall, type PaywallOptions } from './paywall.js';

export type BackendPaywallOptions = BackendClientOptions & Omit<PaywallOptions, 'facilitator' | 'settings'>;

/**
 * The usual production wiring for adapters: one settings fetch at start-up (never per request), then a
 * Paywall whose facilitator is the backend. Rejects if the backend is unreachable or the key is wrong,
 * so a misconfigured seller fails at boot rather than on the first buyer.
 */
export async function createBackendPaywall(options: BackendPaywallOptions): Promise<Paywall> {
  const { backendUrl, apiKey, fetch, transport, timeoutMs, ...paywallOptions } = options;
  const backend = createBackendClient({ backendUrl, apiKey, fetch, transport, timeoutMs });
  const settings = await backend.fetchSellerSettings();
  return new Paywall({ ...paywallOptions, facilitator: backend, settings });
}
