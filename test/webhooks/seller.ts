import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import type { Address } from 'viem';
import type { TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { fundedBuyer, paymentHeaderV1, signAuthorization } from '../support/chain.js';
import { openStorefront } from '../support/storefront.js';

export interface WebhookSeller {
  platformKey: string;
  sellerKey: string;
  orgId: string;
  payTo: Address;
  endpointId: string;
  resource: string;
  webhookSecret: string;
}

/**
 * A seller with payments on, a seller key, and one endpoint ($0.01, its storefront's `GET /hooked`) whose
 * webhook goes to `webhookUrl`.
 */
export async function sellerWithWebhook(server: TestServer, webhookUrl: string): Promise<WebhookSeller> {
  const agent = await signUp(server);
  const payTo = privateKeyToAccount(generatePrivateKey()).address;
  const key = agent.platform_key;
  const acceptance = await server.request('PUT', '/v0/payments/acceptance', { key, body: { enabled: true, payTo } });
  if (acceptance.status !== 200) throw new Error(`acceptance: ${acceptance.text}`);
  const sellerKey = (await server.request('POST', '/v0/payments/seller-keys', { key, body: {} })).body.apiKey as string;
  const shop = await openStorefront(server, { platformKey: key, sellerKey }, { 'GET /hooked': { price: '$0.01', endpoint: { webhookUrl } } });
  const endpoint = shop.endpoint('/hooked');
  return { platformKey: key, sellerKey, orgId: agent.org_id, payTo, endpointId: endpoint.id, resource: shop.resource('/hooked'), webhookSecret: endpoint.webhookSecret! };
}

/** Settles one real payment for the seller's endpoint; returns the payment id. */
export async function pay(server: TestServer, seller: WebhookSeller): Promise<string> {
  const buyer = await fundedBuyer('1');
  const header = paymentHeaderV1(await signAuthorization(buyer, { to: seller.payTo, value: 10_000n }));
  const res = await server.request('POST', '/v0/payments/redeem', { key: seller.sellerKey, body: { paymentHeader: header, resource: seller.resource, amount: '0.01' } });
  if (res.status !== 200) throw new Error(`redeem: ${res.status} ${res.text}`);
  return res.body.paymentId;
}

/** Polls the delivery log until `done` holds for the payment's delivery. */
export async function waitForDelivery(server: TestServer, seller: WebhookSeller, paymentId: string, done: (d: any) => boolean, timeoutMs = 30_000): Promise<any> {
  const until = Date.now() + timeoutMs;
  let last: any;
  while (Date.now() < until) {
    const list = await server.request('GET', `/v0/webhooks/deliveries?endpointId=${seller.endpointId}&limit=100`, { key: seller.sellerKey });
    last = list.body.deliveries.find((d: any) => d.paymentId === paymentId);
    if (last && done(last)) return last;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`delivery for ${paymentId} did not reach the expected state: ${JSON.stringify(last)}`);
}
