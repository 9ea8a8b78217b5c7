/**
 * Pays an x402 URL from a dev account with an official client, and prints what came back.
 *   npm run example:buyer                      # pays the Express example
 *   npm run example:buyer -- <url>             # any URL (e.g. http://127.0.0.1:5055/weather): asks it first
 *                                              # and pays with the protocol version its 402 offers
 *                                              # (x402 v1 with x402-fetch when offered, else v2)
 *   npm run example:buyer -- <url> --v1|--v2   # that version, without asking (v2: @x402/fetch + @x402/evm)
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

/**
 * What an unpaid request to `url` offers: the x402 versions its 402 answer can be paid with (v1: a JSON
 * body with `x402Version: 1` and `accepts`; v2: a PAYMENT-REQUIRED header with `x402Version: 2`), or
 * the answer itself when it is not a 402. x402-fetch (v1) reads only the body, and crashed inside
 * (`reading 'map'`) on a v2-only seller's 402.
 */
export async function offeredVersions(url: string, init?: RequestInit): Promise<{ versions: Array<1 | 2>; status: number; response?: PaidResponse }> {
  const response = await fetch(url, init);
  if (response.status !== 402) return { versions: [], status: response.status, response: await read(response, 'x-payment-response') };
  const versions: Array<1 | 2> = [];
  const body = await response.json().catch(() => undefined) as { x402Version?: unknown; accepts?: unknown } | undefined;
  if (body?.x402Version === 1 && Array.isArray(body.accepts) && body.accepts.length > 0) versions.push(1);
  const header = response.headers.get('payment-required');
  try {
    if (header && JSON.parse(Buffer.from(header, 'base64').toString('utf8')).x402Version === 2) versions.push(2);
  } catch {
    // not a v2 offer
  }
  return { versions, status: 402 };
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

// Run as a program (not when a test imports it): an async main, since the module itself is also a library.
if (isMain(import.meta.url)) void (async () => {
  const args = process.argv.slice(2);
  const dev = loadDevSeller();
  const url = args.find((a) => !a.startsWith('--')) ?? process.env.PAY_URL ?? dev.endpoints?.express;
  if (!url) {
    console.error('usage: npm run example:buyer -- <url> [--v1 | --v2]   (no URL given and none in the dev file)');
    process.exit(1);
  }
  if (!URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol)) {
    console.error(`not an http(s) URL: ${url} (e.g. http://localhost:4021/weather)`);
    process.exit(1);
  }
  const key = required(dev, 'buyerPrivateKey', 'BUYER_PRIVATE_KEY') as Hex;
  try {
    let version: 1 | 2 | undefined = args.includes('--v2') ? 2 : args.includes('--v1') ? 1 : undefined;
    if (version === undefined) {
      const offer = await offeredVersions(url);
      if (offer.response) {
        console.log(`${url} answered ${offer.status} without asking for a payment`);
        console.log(JSON.stringify(offer.response, null, 2));
        process.exit(offer.status < 400 ? 0 : 1);
      }
      version = offer.versions[0];
      if (version === undefined) {
        console.error(`${url} answered 402 without an x402 v1 or v2 offer this buyer reads; try --v1 or --v2`);
        process.exit(1);
      }
    }
    const result = version === 2
      ? await payWithV2(url, key, { chainId: required(dev, 'chainId', 'CHAIN_ID'), address: required(dev, 'usdcAddress', 'USDC_ADDRESS') })
      : await payWithV1(url, key);
    console.log(`x402 v${version} buyer ${privateKeyToAccount(key).address} -> ${url}`);
    console.log(JSON.stringify(result, null, 2));
    process.exitCode = result.status === 200 ? 0 : 1;
  } catch (error) {
    // A seller that is not running (or a mistyped port) is the usual first failure: say that, not a stack.
    if (!(error instanceof TypeError && error.message === 'fetch failed')) throw error;
    const code = (error.cause as { code?: string } | undefined)?.code;
    console.error(`could not reach ${url}${code ? ` (${code})` : ''}: is the seller running? (npm run example:express-seller, or the port you started it on)`);
    process.exit(1);
  }
})();
