import type { Address, Hex, PrivateKeyAccount, TransactionReceipt } from 'viem';
import type { ChainService } from '../chain/chain-service.js';

/** How long fee estimates are reused: a block or so on Base; a stale one is refreshed on the node's refusal. */
const FEE_TTL_MS = 2_000;
const RECEIPT_TIMEOUT_MS = 120_000;

/**
 * One relayer account that sends settlement transactions back to back, without waiting for the
 * previous one to be mined (pipelining). Nonces come from viem's nonce manager for the account, shared
 * with every other sender of the same account in this process (wallet deployments): it hands out
 * consecutive nonces to concurrent sends and never goes below the node's pending count or its own last
 * nonce plus one. Transactions are signed here with a
 * fixed gas limit and cached fees, so a send is one RPC call. A nonce or fee refusal re-reads the state
 * and tries again; a transaction that never shows up is left to reconciliation, which asks the chain.
 */
export class RelayerLane {
  /** Transactions sent and not yet mined (or given up on). */
  inFlight = 0;
  private fees?: { at: number; maxFeePerGas: bigint; maxPriorityFeePerGas: bigint };

  constructor(readonly account: PrivateKeyAccount, private readonly chain: ChainService) {}

  get address(): Address {
    return this.account.address;
  }

  /** Signs and sends one transaction; resolves with its hash once the node accepted it. */
  async send(tx: { to: Address; data: Hex; gas: bigint }): Promise<Hex> {
    const { publicClient, chainId } = this.chain;
    let lastError: unknown;
    for (let attempt = 0; attempt < 3; attempt++) {
      const fees = await this.currentFees(attempt > 0 && isFeeRefusal(lastError));
      const nonce = await this.account.nonceManager!.consume({ address: this.address, chainId, client: publicClient });
      const serialized = await this.account.signTransaction({ type: 'eip1559', chainId, to: tx.to, data: tx.data, gas: tx.gas, nonce, ...fees });
      try {
        return await publicClient.sendRawTransaction({ serializedTransaction: serialized });
      } catch (err) {
        lastError = err;
        // Whatever went wrong, count again from the node. A nonce the node never took would otherwise stay a
        // gap that holds every later transaction of this account unmined; after the reset the next send
        // takes the node's pending count, which is that gap.
        this.account.nonceManager!.reset({ address: this.address, chainId });
        if (!isNonceRefusal(err) && !isFeeRefusal(err)) throw err;
      }
    }
    throw lastError;
  }

  /** The receipt, taken at once when the chain mined on submission (anvil, some sequencers), else polled. */
  async receipt(hash: Hex): Promise<TransactionReceipt> {
    const { publicClient } = this.chain;
    return await publicClient.getTransactionReceipt({ hash }).catch(() => undefined)
      ?? await publicClient.waitForTransactionReceipt({ hash, timeout: RECEIPT_TIMEOUT_MS, pollingInterval: 100 });
  }

  private async currentFees(refresh: boolean) {
    if (!refresh && this.fees && Date.now() - this.fees.at < FEE_TTL_MS) return { maxFeePerGas: this.fees.maxFeePerGas, maxPriorityFeePerGas: this.fees.maxPriorityFeePerGas };
    const block = await this.chain.publicClient.getBlock({ blockTag: 'latest' });
    const priority = await this.chain.publicClient.estimateMaxPriorityFeePerGas().catch(() => 1_000_000n);
    // Twice the base fee stays valid through several full blocks of base-fee increases (12.5% each).
    const base = block.baseFeePerGas ?? 1_000_000_000n;
    this.fees = { at: Date.now(), maxFeePerGas: base * 2n + priority, maxPriorityFeePerGas: priority };
    return { maxFeePerGas: this.fees.maxFeePerGas, maxPriorityFeePerGas: this.fees.maxPriorityFeePerGas };
  }
}

const messageOf = (err: unknown) => `${(err as { details?: string }).details ?? ''} ${(err as Error)?.message ?? ''}`.toLowerCase();
const isNonceRefusal = (err: unknown) => /nonce too low|nonce too high|already known|replacement transaction underpriced|nonce has already been used/.test(messageOf(err));
const isFeeRefusal = (err: unknown) => /max fee per gas less than block base fee|fee cap less than block base fee|transaction underpriced/.test(messageOf(err));

/**
 * A send whose fate we cannot know (the connection broke or timed out after the node may have taken
 * it), as opposed to a refusal the node answered. The first is left to reconciliation, never marked failed.
 */
export function isAmbiguousSendError(err: unknown): boolean {
  const name = (err as Error)?.name ?? '';
  return name === 'TimeoutError' || name === 'HttpRequestError' || /timed out|socket hang up|econnreset|fetch failed/.test(messageOf(err));
}
