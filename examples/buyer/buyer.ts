/**
 * Pays an x402 URL from a dev account with an official client, and prints what came back.
 *   npm run example:buyer                      # x402 v1 (x402-fetch), pays the Express example
 *   npm run example:buyer -- <url>             # x402 v1, any URL (e.g. http://127.0.0.1:5055/weather)
 *   npm run example:buyer -- <url> --v2        # x402 v2 (@x402/fetch + @x402/evm)
 * Reads the buyer key, token and chain from .agentgate/dev-seller.json (`npm run dev`), or the env.
 */
import { x402Client } from '@x402/core/client';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { wrapFetchWithPayment as wrapFetchV2 } from '@x402/fetch';
import type { Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { wrapFetchWithPayment as wrapFetchV1 } from 'x402-fetch';
import { isMain, loadDevSeller, required } from '../dev-seller.js';

export interface PaidResponse {
  status: number;
  body: unknown;
  /** The decoded X-Payment-Response (v1) or PAYMENT-RESPONSE (v2): transaction, network, payer. */
  settlement: Record<string, unknown> | undefined;
}

/** Most the buyer will pay for one request, in atomic USDC (0.10). */
const MAX_ATOMIC = 100_000n;

/** x402 v1: the client signs only for networks it knows by name; the dev chain poses as base-sepolia. */
export async function payWithV1(url: string, privateKey: Hex, init?: RequestInit): Promise<PaidResponse> {
  const pay = wrapFetchV1(fetch, privateKeyToAccount(privateKey), MAX_ATOMIC);
  return read(await pay(url, init), 'x-payment-response');
}

/** x402 v2: pays any eip155 chain, but only assets the buyer allows; our dev token is not a default one. */
export async function payWithV2(url: string, privateKey: Hex, token: { chainId: number; address: string }, init?: RequestInit): Promise<PaidResponse> {
  const client = registerExactEvmScheme(new x402Client(), { signer: privateKeyToAccount(privateKey) }).setSpendControls({
    allowedAssets: [{ network: `eip155:${token.chainId}`, asset: token.address, maxAmountPerPayment: MAX_ATOMIC.toString() }],
  });
  return read(await wrapFetchV2(fetch, client)(url, init), 'payment-response');
}

async function read(response: Response, settlementHeader: string): Promise<PaidResponse> {
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  const header = response.headers.get(settlementHeader);
  const settlement = header ? (JSON.parse(Buffer.from(header, 'base64').toString('utf8')) as Record<string, unknown>) : undefined;
  return { status: response.status, body, settlement };
}

if (isMain(import.meta.url)) {
  const args = process.argv.slice(2);
  const v2 = args.includes('--v2');
  const dev = loadDevSeller();
  const url = args.find((a) => !a.startsWith('--')) ?? process.env.PAY_URL ?? dev.endpoints?.express;
  if (!url) {
    console.error('usage: npm run example:buyer -- <url> [--v2]   (no URL given and none in the dev file)');
    process.exit(1);
  }
  const key = required(dev, 'buyerPrivateKey', 'BUYER_PRIVATE_KEY') as Hex;
  const result = v2
    ? await payWithV2(url, key, { chainId: required(dev, 'chainId', 'CHAIN_ID'), address: required(dev, 'usdcAddress', 'USDC_ADDRESS') })
    : await payWithV1(url, key);
  console.log(`${v2 ? 'x402 v2' : 'x402 v1'} buyer ${privateKeyToAccount(key).address} -> ${url}`);
  console.log(JSON.stringify(result, null, 2));
  process.exitCode = result.status === 200 ? 0 : 1;
}
