import { AuthCaptureEvmScheme } from '@x402/evm/auth-capture/client';
import { parseUnits, type Address } from 'viem';
import type { PrivateKeyAccount } from 'viem/accounts';
import { AUTH_CAPTURE_ESCROW_ADDRESS } from '../../server/payments/schemes/auth-capture/evm/chain.js';
import { DEV_USDC_NAME, DEV_USDC_VERSION } from '../../server/dev/chain/dev-chain.js';
import { fundedBuyer, sendUsdc, testChain } from './chain.js';
import type { TestServer } from './server.js';

/** The backend's auth-capture operator, as GET /v0/x402/supported names it. */
export async function authCaptureOperator(server: TestServer): Promise<Address> {
  return (await server.request('GET', '/v0/x402/supported')).body.kinds.find((k: any) => k.scheme === 'auth-capture').extra.captureAuthorizer as Address;
}

/** The backend's auth-capture operator, funded with `usdc` for refunds. */
export async function fundedOperator(server: TestServer, usdc = '10'): Promise<Address> {
  const operator = await authCaptureOperator(server);
  await sendUsdc(operator, parseUnits(usdc, 6));
  return operator;
}

/**
 * A payment the official auth-capture client signed, authorized through the facilitator's /settle for
 * `seller`'s payTo and `resource`: held in the escrow, not captured yet. `buyer`: a fresh funded one if not given.
 */
export async function heldPayment(server: TestServer, seller: { sellerKey: string; payTo: Address }, options: { amount?: bigint; resource?: string; operator: Address; buyer?: PrivateKeyAccount }): Promise<{ id: string; buyer: PrivateKeyAccount }> {
  const buyer = options.buyer ?? await fundedBuyer('5');
  const now = Math.floor(Date.now() / 1000);
  const reqs = {
    scheme: 'auth-capture', network: 'eip155:84532', amount: String(options.amount ?? 1_000_000n), asset: testChain().usdc, payTo: seller.payTo, maxTimeoutSeconds: 120,
    extra: { name: DEV_USDC_NAME, version: DEV_USDC_VERSION, authCaptureEscrow: AUTH_CAPTURE_ESCROW_ADDRESS, captureAuthorizer: options.operator, captureDeadline: now + 3600, refundDeadline: now + 86_400, minFeeBps: 0, maxFeeBps: 0, feeRecipient: '0x0000000000000000000000000000000000000000' },
  };
  const { payload } = await new AuthCaptureEvmScheme(buyer).createPaymentPayload(2, reqs as never);
  const settled = await server.request('POST', '/v0/x402/settle', { key: seller.sellerKey, body: { x402Version: 2, paymentPayload: { x402Version: 2, resource: { url: options.resource ?? 'https://shop.example/escrowed' }, accepted: reqs, payload }, paymentRequirements: reqs } });
  if (!settled.body?.success) throw new Error(`authorize: ${settled.status} ${settled.text}`);
  return { id: settled.body.extensions.authCapture.paymentId as string, buyer };
}

/** A payment held as `heldPayment` holds it, then captured through its hold: a captured (refundable) payment. */
export async function capturedPayment(server: TestServer, seller: { sellerKey: string; payTo: Address }, options: { amount?: bigint; resource?: string; operator: Address }): Promise<{ id: string; buyer: PrivateKeyAccount }> {
  const held = await heldPayment(server, seller, options);
  const captured = await server.request('POST', `/v0/payments/holds/${held.id}/capture`, { key: seller.sellerKey, body: {} });
  if (captured.status !== 200) throw new Error(`capture: ${captured.status} ${captured.text}`);
  return held;
}
