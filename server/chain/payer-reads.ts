import { decodeFunctionResult, encodeFunctionData, multicall3Abi, type Address, type Hex } from 'viem';
import { Batcher, type BatchOptions, type Queued } from '../platform/batcher.js';
import { authorizationState, balanceOf, usdcAbi } from './usdc.js';
import type { ChainService } from './chain-service.js';
import { nodeFault } from './rpc-fault.js';

export interface PayerState {
  /** Whether the authorization's nonce is used or canceled (authorizationState). */
  used: boolean;
  /** The payer's USDC balance, atomic units. */
  balance: bigint;
}

interface Ask { payer: Address; nonce: Hex }

/**
 * The two chain reads verifying an exact payment needs (is the authorization still unused, does the
 * payer hold the amount), for every payment being verified at the same time, in one `eth_call` to
 * Multicall3's aggregate3: under load that is one RPC round trip for many payments instead of two each,
 * on our side and on the node's. Both reads of a payment come from the same block, which two separate
 * calls did not promise.
 *
 * A chain without Multicall3 at the configured address (the call returns no data) gets the two reads of
 * each payment as separate calls, from then on. A node fault fails every payment of the batch, as it
 * would have failed each alone (the caller answers 503).
 */
export class PayerReads extends Batcher<Ask, PayerState> {
  private multicallWorks = true;
  /** Told once, when the reads fall back to separate calls, and why (the operator's warning). */
  private readonly onFallback: ((reason: string) => void) | undefined;

  constructor(private readonly chain: ChainService, private readonly multicall: Address, options: BatchOptions & { onFallback?: (reason: string) => void } = {}) {
    super(options, { maxBatch: 100, maxInFlight: 4 });
    this.onFallback = options.onFallback;
  }

  read(payer: Address, nonce: Hex): Promise<PayerState> {
    return this.enqueue({ payer, nonce });
  }

  protected async send(batch: Array<Queued<Ask, PayerState>>): Promise<void> {
    this.options.onCommand?.(batch.length);
    if (this.multicallWorks) {
      const results = await this.aggregate(batch.map((item) => item.op)).catch((err: unknown) => {
        if (nodeFault(err)) throw err;
        // Not a node failure: most likely no Multicall3 on this chain. Read one by one from now on.
        this.multicallWorks = false;
        this.onFallback?.((err as Error).message?.split('\n')[0] ?? String(err));
        return undefined;
      });
      if (results) {
        batch.forEach((item, i) => {
          const result = results[i];
          if (result instanceof Error) item.reject(result);
          else item.resolve(result!);
        });
        return;
      }
    }
    await Promise.all(batch.map(async (item) => {
      try { item.resolve(await this.readAlone(item.op)); } catch (err) { item.reject(err); }
    }));
  }

  private async aggregate(asks: Ask[]): Promise<Array<PayerState | Error>> {
    const token = this.chain.usdc.address;
    const calls = asks.flatMap(({ payer, nonce }) => [
      { target: token, allowFailure: true, callData: encodeFunctionData({ abi: usdcAbi, functionName: 'authorizationState', args: [payer, nonce] }) },
      { target: token, allowFailure: true, callData: encodeFunctionData({ abi: usdcAbi, functionName: 'balanceOf', args: [payer] }) },
    ]);
    const { data } = await this.chain.publicClient.call({ to: this.multicall, data: encodeFunctionData({ abi: multicall3Abi, functionName: 'aggregate3', args: [calls] }) });
    if (!data || data === '0x') throw new Error(`no Multicall3 at ${this.multicall}`);
    const results = decodeFunctionResult({ abi: multicall3Abi, functionName: 'aggregate3', data });
    return asks.map((_, i) => {
      const [state, balance] = [results[2 * i]!, results[2 * i + 1]!];
      if (!state.success || !balance.success) return new Error('the token refused a read of the payer\'s state');
      return {
        used: decodeFunctionResult({ abi: usdcAbi, functionName: 'authorizationState', data: state.returnData }) as boolean,
        balance: decodeFunctionResult({ abi: usdcAbi, functionName: 'balanceOf', data: balance.returnData }) as bigint,
      };
    });
  }

  private async readAlone({ payer, nonce }: Ask): Promise<PayerState> {
    const client = this.chain.publicClient;
    const token = this.chain.usdc.address;
    const [used, balance] = await Promise.all([
      authorizationState({ client, token, authorizer: payer, nonce }),
      balanceOf({ client, token, account: payer }),
    ]);
    return { used, balance };
  }
}
