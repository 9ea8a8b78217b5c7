import { createWalletClient, encodeFunctionData, http, nonceManager, type Account, type Address, type Chain, type Hex, type Transport, type WalletClient } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import type Router from '@koa/router';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { authenticatedRouter, identityIdOf, principalOf, requireScope } from '../platform/auth/authenticate.js';
import { parseInput } from '../platform/validate.js';
import { AppError } from '../platform/errors.js';
import { findNetwork, formatUsdc } from 'agentgate-x402-wire';
import { usdcAmount } from '../buyer/amounts.js';
import { anyNetworkName } from '../platform/network-name.js';
import { address } from '@solana/kit';
import type { SolanaChain } from '../chain/solana/solana-chain.js';
import { devMintTransaction } from './solana/dev-solana.js';
import type { Operation } from '../openapi/operations.js';
import { toolDefiner, type ToolDefinition } from '../platform/mcp-tool.js';
import { balanceOf, usdcAbi } from '../chain/usdc.js';
import type { ChainService } from '../chain/chain-service.js';
import type { Settler } from '../settlement/settler.js';
import { devTokenAbi } from '../wallet/smart-account-abi.js';

/**
 * Dev-mode test USDC. A faucet key that is a minter of the token (the dev chain's deployer is) mints;
 * another transfers from its own balance. Minting first matters in `agentgate dev`: the faucet key is
 * also the relayer, the escrow operator whose own USDC funds auth-capture refunds, and a faucet that
 * paid from that balance would empty it. Never mounted in production mode.
 */
export class DevFaucet {
  private readonly wallet: WalletClient<Transport, Chain, Account>;

  /**
   * `relayer`: when the faucet key is also a relayer of the pool (agentgate dev uses account 0 for both),
   * its transactions go through the relayer's lane, so the two never pick the same nonce.
   */
  constructor(private readonly chain: ChainService, faucetKey: Hex, private readonly relayer?: Pick<Settler, 'sendTransaction'>) {
    const account = privateKeyToAccount(faucetKey, { nonceManager });
    this.wallet = createWalletClient({ chain: chain.publicClient.chain, transport: http(chain.rpcUrl, { batch: false }), account, pollingInterval: 100 });
  }

  async fund(to: Address, amount: bigint): Promise<Hex> {
    const { publicClient, usdc } = this.chain;
    const self = this.wallet.account.address;
    const [minter, held] = await Promise.all([
      publicClient.readContract({ address: usdc.address, abi: devTokenAbi, functionName: 'isMinter', args: [self] }),
      balanceOf({ client: publicClient, token: usdc.address, account: self }),
    ]);
    if (!minter && held < amount) throw new AppError(503, 'faucet_empty', `the faucet ${self} holds ${formatUsdc(held)} USDC and cannot mint; ${formatUsdc(amount)} were asked`);
    const data = minter
      ? encodeFunctionData({ abi: devTokenAbi, functionName: 'mint', args: [to, amount] })
      : encodeFunctionData({ abi: usdcAbi, functionName: 'transfer', args: [to, amount] });
    let hash: Hex;
    try {
      if (this.relayer) {
        const receipt = await this.relayer.sendTransaction({ to: usdc.address, data }, { faucet: to });
        if (receipt.status !== 'success') throw new AppError(503, 'faucet_empty', `the faucet transaction ${receipt.transactionHash} reverted`);
        return receipt.transactionHash;
      }
      hash = await this.wallet.sendTransaction({ to: usdc.address, data, account: this.wallet.account, chain: this.wallet.chain });
    } catch (err) {
      if (err instanceof AppError) throw err;
      throw new AppError(503, 'faucet_empty', `the faucet could not pay: ${(err as { shortMessage?: string }).shortMessage ?? (err as Error).message}`.slice(0, 300));
    }
    const receipt = await publicClient.waitForTransactionReceipt({ hash, timeout: 60_000 });
    if (receipt.status !== 'success') throw new AppError(503, 'faucet_empty', `the faucet transaction ${hash} reverted`);
    return hash;
  }
}

/** Largest single faucet payment: enough for many paid calls, small enough that a few requests cannot drain a faucet. */
const MAX_FAUCET_ATOMIC = 1_000n * 1_000_000n;
export const faucetBody = z.object({
  amountUsdc: usdcAmount.refine((a) => a > 0n && a <= MAX_FAUCET_ATOMIC, 'must be more than 0 and at most 1000'),
  /** The dev chain to fund the wallet on (v1 name or CAIP-2 id); unset: the default network. */
  network: anyNetworkName.optional(),
}).strict();

/**
 * The local Solana's faucet: dev USDC minted into the identity's Solana wallet by the dev mint authority
 * (dev-solana.ts), which only the local Solana honours.
 */
async function fundOnSolana(app: AppContext, owner: { orgId: string; identityId: string }, amount: bigint, chain: SolanaChain) {
  const wallets = app.wallets.solana!;
  const wallet = await wallets.forIdentity(owner);
  const { value: lifetime } = await chain.rpc.getLatestBlockhash().send();
  const wire = await devMintTransaction(chain.usdcMint, address(wallet.address), amount, lifetime);
  let txHash: string;
  try {
    txHash = await chain.rpc.sendTransaction(wire as never, { encoding: 'base64' }).send();
  } catch (err) {
    throw new AppError(503, 'faucet_unavailable', `The dev faucet cannot mint on ${chain.network}: ${(err as Error).message} (it mints only on the local Solana of agentgate dev)`);
  }
  await app.logs.record({ ...owner, action: 'wallet.faucet', category: 'wallet', description: `Dev faucet sent ${formatUsdc(amount)} USDC to ${wallet.address} on ${chain.network}`, targetType: 'wallet', targetId: wallet._id, metadata: { txHash, network: chain.caip2 } });
  return { txHash, amountUsdc: formatUsdc(amount), network: chain.caip2, wallet: await app.wallets.view(owner) };
}

/** One faucet per app and network, shared by the route and the tool, so both send from one nonce sequence. */
const faucets = new WeakMap<AppContext, Map<string, DevFaucet>>();

/**
 * Sends `amount` test USDC to the identity's wallet on `network` (unset: the default one): what
 * POST /v0/dev/faucet and the tool wallet_faucet both run.
 */
export async function fundFromFaucet(app: AppContext, owner: { orgId: string; identityId: string }, amount: bigint, network?: string) {
  const solana = network === undefined ? undefined : app.wallets.solana?.on(network);
  if (solana) return fundOnSolana(app, owner, amount, solana);
  const caip2 = network === undefined ? app.wallets.requireChain().caip2 : findNetwork(network)?.caip2;
  const wallets = caip2 ? app.wallets.on(caip2) : undefined;
  if (!wallets) throw new AppError(404, 'network_not_found', `this server's wallets do not pay on ${network}; they pay on ${app.wallets.everywhere.map((w) => w.requireChain().network).join(', ')}`);
  const chain = wallets.requireChain();
  if (!app.config.FAUCET_PRIVATE_KEY) throw new AppError(503, 'faucet_unavailable', 'The dev faucet has no key (FAUCET_PRIVATE_KEY)');
  const byNetwork = faucets.get(app) ?? new Map<string, DevFaucet>();
  faucets.set(app, byNetwork);
  let faucet = byNetwork.get(chain.caip2);
  if (!faucet) {
    const key = app.config.FAUCET_PRIVATE_KEY as `0x${string}`;
    const isRelayer = chain.relayerAccounts.some((a) => a.address === privateKeyToAccount(key).address);
    const relayer = app.settlements.find((engine) => engine.chain.chainId === chain.chainId)?.settler;
    faucet = new DevFaucet(chain, key, isRelayer ? relayer : undefined);
    byNetwork.set(chain.caip2, faucet);
  }
  const wallet = await wallets.forIdentity(owner);
  const txHash = await faucet.fund(wallet.address as Address, amount);
  await app.logs.record({ ...owner, action: 'wallet.faucet', category: 'wallet', description: `Dev faucet sent ${formatUsdc(amount)} USDC to ${wallet.address} on ${chain.network}`, targetType: 'wallet', targetId: wallet._id, metadata: { txHash, network: chain.caip2 } });
  return { txHash, amountUsdc: formatUsdc(amount), network: chain.caip2, wallet: await app.wallets.view(owner) };
}

/** POST /v0/dev/faucet: test USDC into the calling identity's wallet. Mounted by `agentgate dev` and the tests only. */
export function faucetRoutes(app: AppContext): Router {
  const router = authenticatedRouter(app);
  router.post('/v0/dev/faucet', requireScope('wallet:read'), async (ctx) => {
    const { amountUsdc, network } = parseInput(faucetBody, ctx.request.body, 'body');
    ctx.body = await fundFromFaucet(app, { orgId: principalOf(ctx).orgId, identityId: identityIdOf(ctx) }, amountUsdc, network);
  });
  return router;
}

/** The faucet as an MCP tool, served only where the route is (the dev extension), with its schema and scope. */
export const faucetTool: ToolDefinition<AppContext> = toolDefiner<AppContext>()({
  name: 'wallet_faucet',
  title: 'Dev faucet: test USDC',
  description: 'Dev servers only: sends amountUsdc (a decimal string, at most "1000") test USDC to this identity\'s wallet on `network` (a dev chain by name or CAIP-2 id; unset: the default one) and returns the transaction and the wallet. Same as POST /v0/dev/faucet.',
  scope: 'wallet:read',
  input: faucetBody,
  run: (app, principal, input) => fundFromFaucet(app, { orgId: principal.orgId, identityId: principal.identityId }, input.amountUsdc, input.network),
});

export const faucetOperation: Operation = {
  method: 'post', path: '/v0/dev/faucet', tag: 'Wallet', summary: 'Test USDC into the wallet (agentgate dev only)', auth: ['identity'], scopes: ['wallet:read'],
  body: faucetBody, ok: { status: 200, description: 'The transfer and the wallet' }, also: { 404: 'The wallets do not pay on that network', 503: 'The faucet is empty' },
};
