/**
 * Pays a paid MCP tool (x402 over MCP) with the official MCP client and a local viem key, and prints the
 * tool's result and the settlement:
 *   npm run example:mcp-paid-tool                                   # the seller, on :4040
 *   npm run example:mcp-buyer                                       # calls forecast {city: "Oslo"}
 *   npm run example:mcp-buyer -- http://127.0.0.1:4040/mcp forecast '{"city":"Lima"}'
 * The buyer key is `buyerPrivateKey` from .agentgate/dev-seller.json (`npm run dev`) or BUYER_PRIVATE_KEY,
 * else dev account 1 (funded with test USDC on the dev chain).
 */
import { randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { getAddress, toHex, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { PAYMENT_META_KEY, PAYMENT_RESPONSE_META_KEY } from '../../adapters/mcp.js';
import { DEV_BUYERS } from '../../server/dev/chain/dev-accounts.js';
import { isMain, loadDevSeller } from '../dev-seller.js';

/** One entry of the tool's `accepts` (x402 v2 PaymentRequirements, exact scheme on an EVM chain). */
export interface Requirement {
  scheme: string;
  network: string;
  amount: string;
  asset: string;
  payTo: string;
  maxTimeoutSeconds: number;
  extra?: { name?: string; version?: string };
}
interface PaymentRequired { x402Version: number; error?: string; resource: unknown; accepts: Requirement[] }

export interface McpPaidCall {
  /** The tool's result: content, and `_meta["x402/payment-response"]` when it was paid. */
  result: { isError?: boolean; content: Array<{ type: string; text?: string }>; _meta?: Record<string, unknown> };
  /** What the tool asked for (undefined when the tool did not ask to be paid). */
  requirement?: Requirement;
  /** The settlement: success, transaction, network, payer (and the seller's offer-receipt). */
  settlement?: Record<string, unknown>;
}

/** Most the buyer pays for one call, in atomic USDC (0.10), unless told otherwise. */
const MAX_ATOMIC = 100_000n;

const transferWithAuthorization = {
  TransferWithAuthorization: [
    { name: 'from', type: 'address' }, { name: 'to', type: 'address' }, { name: 'value', type: 'uint256' },
    { name: 'validAfter', type: 'uint256' }, { name: 'validBefore', type: 'uint256' }, { name: 'nonce', type: 'bytes32' },
  ],
} as const;

/**
 * Calls `tool`; if it answers with a payment requirement, signs an EIP-3009 TransferWithAuthorization for
 * it and calls again with the PaymentPayload in `_meta["x402/payment"]`. Throws when the price is above
 * `maxAmountAtomic` or no requirement is payable (then nothing was signed).
 */
export async function payMcpTool(options: {
  url: string; tool: string; arguments?: Record<string, unknown>; privateKey: Hex; maxAmountAtomic?: bigint;
}): Promise<McpPaidCall> {
  const client = new Client({ name: 'agentgate-mcp-buyer', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(options.url)));
  try {
    const call = (meta?: Record<string, unknown>) =>
      client.callTool({ name: options.tool, arguments: options.arguments ?? {}, ...(meta ? { _meta: meta } : {}) }) as Promise<McpPaidCall['result'] & { structuredContent?: unknown }>;
    const first = await call();
    const required = first.isError ? paymentRequiredOf(first) : undefined;
    if (!required) return { result: first };

    const requirement = required.accepts.find((r) => r.scheme === 'exact' && /^eip155:\d+$/.test(r.network));
    if (!requirement) throw new Error(`no payable requirement (exact scheme on an eip155 chain) in ${JSON.stringify(required.accepts)}`);
    const max = options.maxAmountAtomic ?? MAX_ATOMIC;
    if (BigInt(requirement.amount) > max) throw new Error(`the tool costs ${requirement.amount} atomic USDC, more than the limit ${max}`);

    const payload = await signPayment(options.privateKey, requirement);
    const paid = await call({ [PAYMENT_META_KEY]: { x402Version: 2, resource: required.resource, accepted: requirement, payload } });
    const settlement = (paid._meta?.[PAYMENT_RESPONSE_META_KEY] ?? (paid.structuredContent as Record<string, unknown> | undefined)?.[PAYMENT_RESPONSE_META_KEY]) as Record<string, unknown> | undefined;
    return { result: paid, requirement, settlement };
  } finally {
    await client.close();
  }
}

/** The x402 PaymentRequired object of an unpaid call: `structuredContent`, or the same JSON as text. */
function paymentRequiredOf(result: McpPaidCall['result'] & { structuredContent?: unknown }): PaymentRequired | undefined {
  let body = result.structuredContent;
  if (!body) {
    try {
      body = JSON.parse(result.content[0]?.text ?? '');
    } catch {
      return undefined;
    }
  }
  const required = body as Partial<PaymentRequired>;
  return Array.isArray(required.accepts) && required.accepts.length > 0 ? (required as PaymentRequired) : undefined;
}

/** The exact-EVM payload: an EIP-3009 authorization for the requirement, signed for the token's EIP-712 domain. */
async function signPayment(privateKey: Hex, requirement: Requirement) {
  const account = privateKeyToAccount(privateKey);
  const now = BigInt(Math.floor(Date.now() / 1000));
  const authorization = {
    from: account.address,
    to: getAddress(requirement.payTo),
    value: BigInt(requirement.amount),
    // A little slack for clock skew before, the seller's timeout after.
    validAfter: now - 60n,
    validBefore: now + BigInt(requirement.maxTimeoutSeconds || 60),
    nonce: toHex(randomBytes(32)),
  };
  const signature = await account.signTypedData({
    domain: {
      name: requirement.extra?.name ?? 'USD Coin',
      version: requirement.extra?.version ?? '2',
      chainId: Number(requirement.network.split(':')[1]),
      verifyingContract: getAddress(requirement.asset) as Address,
    },
    types: transferWithAuthorization,
    primaryType: 'TransferWithAuthorization',
    message: authorization,
  });
  return {
    signature,
    authorization: {
      from: authorization.from, to: authorization.to, value: authorization.value.toString(),
      validAfter: authorization.validAfter.toString(), validBefore: authorization.validBefore.toString(), nonce: authorization.nonce,
    },
  };
}

// Run as a program (not when a test imports it): an async main, since the module itself is also a library.
if (isMain(import.meta.url)) void (async () => {
  const [url = process.env.MCP_URL ?? 'http://127.0.0.1:4040/mcp', tool = 'forecast', args = '{"city":"Oslo"}'] = process.argv.slice(2);
  const privateKey = (loadDevSeller().buyerPrivateKey ?? DEV_BUYERS[0]!.privateKey) as Hex;
  console.log(`MCP buyer ${privateKeyToAccount(privateKey).address} -> ${tool} at ${url}`);
  try {
    const paid = await payMcpTool({ url, tool, arguments: JSON.parse(args) as Record<string, unknown>, privateKey });
    console.log('result:', JSON.stringify(paid.result.content, null, 2));
    console.log('settlement:', JSON.stringify(paid.settlement ?? null, null, 2));
    process.exitCode = paid.result.isError ? 1 : 0;
  } catch (error) {
    // No server, a price over the limit, nothing payable: one line, not a stack trace.
    console.error(`could not pay ${tool} at ${url}: ${(error as Error).message} (is \`npm run example:mcp-paid-tool\` running?)`);
    process.exitCode = 1;
  }
})();
