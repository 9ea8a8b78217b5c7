// One payment of each kind for a seller, made as buyers and sellers make them: the official @x402/evm
// clients sign, and the seller's facilitator client settles through agentgate's /v0/x402/settle (exact by
// EIP-3009 and by Permit2, upto); auth-capture comes from test/support/auth-capture.ts, channel calls from
// the official batch-settlement client paying a route of our Express middleware.
import express from 'express';
import { decodePaymentResponseHeader } from '@x402/core/http';
import { toClientEvmSigner } from '@x402/evm';
import { ExactEvmScheme } from '@x402/evm/exact/client';
import { UptoEvmScheme } from '@x402/evm/upto/client';
import type { Address, Hex } from 'viem';
import type { PrivateKeyAccount } from 'viem/accounts';
import { paymentMiddleware as expressPayments } from '../../adapters/express.js';
import { DEV_USDC_NAME, DEV_USDC_VERSION } from '../../server/dev/chain/dev-chain.js';
import { fundedBuyer, permit2ApprovedBuyer, testChain } from '../support/chain.js';
import { vouchersOnceCaptured } from '../support/channel-captures.js';
import { officialChannelClient } from '../support/official-channel-client.js';
import type { TestServer } from '../support/server.js';
import { serve, type RunningApp } from '../interop/seller.js';

const NETWORK = 'eip155:84532';

export interface SchemeSeller { sellerKey: string; payTo: Address }

const requirements = (seller: SchemeSeller, scheme: 'exact' | 'upto', amount: bigint, extra: Record<string, unknown> = {}) => ({
  scheme, network: NETWORK, amount: String(amount), asset: testChain().usdc, payTo: seller.payTo, maxTimeoutSeconds: 120,
  extra: { name: DEV_USDC_NAME, version: DEV_USDC_VERSION, ...extra },
});

/** POST /v0/x402/settle as the seller's facilitator client sends it; answers the payment's id (found by its transaction). */
async function settle(server: TestServer, seller: SchemeSeller, accepted: Record<string, unknown>, payload: unknown, settleAs: Record<string, unknown> = accepted): Promise<string> {
  const body = { x402Version: 2, paymentPayload: { x402Version: 2, resource: { url: `https://shop.example/${String(accepted.scheme)}` }, accepted, payload }, paymentRequirements: settleAs };
  const settled = await server.request('POST', '/v0/x402/settle', { key: seller.sellerKey, body });
  if (!settled.body?.success) throw new Error(`settle: ${settled.status} ${settled.text}`);
  const list = await server.request('GET', '/v0/payments?limit=100', { key: seller.sellerKey });
  const payment = (list.body.payments as Array<{ id: string; txHash: string | null }>).find((p) => p.txHash === settled.body.transaction);
  if (!payment) throw new Error(`no payment with the transaction ${settled.body.transaction}`);
  return payment.id;
}

/** exact, signed by the official client: EIP-3009 (validAfter "0", as every v2 client signs it) or through Permit2. */
export async function exactPayment(server: TestServer, seller: SchemeSeller, via: 'eip3009' | 'permit2'): Promise<string> {
  const buyer: PrivateKeyAccount = via === 'permit2' ? await permit2ApprovedBuyer() : await fundedBuyer('1');
  const accepted = requirements(seller, 'exact', 10_000n, via === 'permit2' ? { assetTransferMethod: 'permit2' } : {});
  const { payload } = await new ExactEvmScheme(toClientEvmSigner(buyer, testChain().publicClient as never)).createPaymentPayload(2, accepted as never);
  return settle(server, seller, accepted, payload);
}

/** upto: the buyer signs for at most `max`, the seller settles `charge` (the amount its request used). */
export async function uptoPayment(server: TestServer, seller: SchemeSeller, max: bigint, charge: bigint): Promise<string> {
  const buyer = await permit2ApprovedBuyer();
  const facilitatorAddress = (await server.request('GET', '/v0/x402/supported')).body.kinds.find((k: any) => k.scheme === 'upto').extra.facilitatorAddress as Address;
  const accepted = requirements(seller, 'upto', max, { facilitatorAddress });
  const { payload } = await new UptoEvmScheme(toClientEvmSigner(buyer, testChain().publicClient as never)).createPaymentPayload(2, accepted as never);
  return settle(server, seller, accepted, payload, { ...accepted, amount: String(charge) });
}

/**
 * A shop selling GET /weather by batch-settlement through our Express middleware, and one official buyer
 * who pays it `calls` times on one channel; answers the channel's id once its vouchers are captured.
 */
export async function channelWithCalls(server: TestServer, seller: SchemeSeller & { platformKey: string }, calls: number): Promise<{ shop: RunningApp; channelId: Hex }> {
  const app = express();
  app.use(expressPayments({ backendUrl: server.url, apiKey: seller.sellerKey, routes: { 'GET /weather': { price: '$0.001', scheme: 'batch-settlement', description: 'Weather, per call' } } }));
  app.get('/weather', (_req, res) => { res.json({ weather: 'sunny' }); });
  const shop = await serve(app);
  try {
    const registered = await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url: `${shop.url}/weather`, priceUsdc: '0.001' } });
    if (registered.status !== 201) throw new Error(`endpoint: ${registered.status} ${registered.text}`);
    const paying = officialChannelClient(await fundedBuyer('1')).paying;
    let channelId: Hex | undefined;
    for (let i = 0; i < calls; i++) {
      const res = await paying(`${shop.url}/weather`);
      if (res.status !== 200) throw new Error(`channel call: ${res.status} ${await res.text()}`);
      channelId ??= (decodePaymentResponseHeader(res.headers.get('payment-response')!).extra as any).channelState.channelId;
    }
    await vouchersOnceCaptured(server.app.db, channelId!);
    return { shop, channelId: channelId! };
  } catch (err) {
    await shop.close(); // else its listening socket keeps jest from exiting
    throw err;
  }
}
