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
  /**
   * What the payer's address answers to ERC-1271 `isValidSignature(digest, signature)`, when asked:
   * `none` when nothing answers (no code: an EOA, or a wallet not deployed yet), else whether it returned
   * the magic value. USDC (FiatTokenV2_2) asks any payer with code, an EIP-7702-delegated EOA included, so
   * an ECDSA signature that recovers to the payer is not enough once the payer has code.
   */
  erc1271?: 'none' | 'valid' | 'invalid';
}

interface Ask { payer: Address; nonce: Hex; check?: { digest: Hex; signature: Hex } }

const ERC1271_MAGIC = '0x1626ba7e';
const erc1271Abi = [{ type: 'function', name: 'isValidSignature', stateMutability: 'view', inputs: [{ name: 'hash', type: 'bytes32' }, { name: 'signature', type: 'bytes' }], outputs: [{ name: '', type: 'bytes4' }] }] as const;
const erc1271Call = (check: { digest: Hex; signature: Hex }) => encodeFunctionData({ abi: erc1271Abi, functionName: 'isValidSignature', args: [check.digest, check.signature] });
/** A call's outcome read as an ERC-1271 answer: no return data is no code (a call to an EOA succeeds empty). */
const erc1271Answer = (success: boolean, returnData: Hex): 'none' | 'valid' | 'invalid' =>
  success && returnData === '0x' ? 'none' : success && returnData.slice(0, 10).toLowerCase() === ERC1271_MAGIC ? 'valid' : 'invalid';

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

  /** `check`: also ask the payer's ERC-1271 answer for this digest and signature (one more call in the same batch). */
  read(payer: Address, nonce: Hex, check?: { digest: Hex; signature: Hex }): Promise<PayerState> {
    return this.enqueue({ payer, nonce, ...(check ? { check } : {}) });
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
    const calls = asks.flatMap(({ payer, nonce, check }) => [
      { target: token, allowFailure: true, callData: encodeFunctionData({ abi: usdcAbi, functionName: 'authorizationState', args: [payer, nonce] }) },
      { target: token, allowFailure: true, callData: encodeFunctionData({ abi: usdcAbi, functionName: 'balanceOf', args: [payer] }) },
      ...(check ? [{ target: payer, allowFailure: true, callData: erc1271Call(check) }] : []),
    ]);
    const { data } = await this.chain.publicClient.call({ to: this.multicall, data: encodeFunctionData({ abi: multicall3Abi, functionName: 'aggregate3', args: [calls] }) });
    if (!data || data === '0x') throw new Error(`no Multicall3 at ${this.multicall}`);
    const results = decodeFunctionResult({ abi: multicall3Abi, functionName: 'aggregate3', data });
    let at = 0;
    return asks.map((ask) => {
      const [state, balance] = [results[at]!, results[at + 1]!];
      const signer = ask.check ? results[at + 2]! : undefined;
      at += ask.check ? 3 : 2;
      if (!state.success || !balance.success) return new Error('the token refused a read of the payer\'s state');
      return {
        used: decodeFunctionResult({ abi: usdcAbi, functionName: 'authorizationState', data: state.returnData }) as boolean,
        balance: decodeFunctionResult({ abi: usdcAbi, functionName: 'balanceOf', data: balance.returnData }) as bigint,
        ...(signer ? { erc1271: erc1271Answer(signer.success, signer.returnData) } : {}),
      };
    });
  }

  private async readAlone({ payer, nonce, check }: Ask): Promise<PayerState> {
    const client = this.chain.publicClient;
    const token = this.chain.usdc.address;
    const [used, balance, erc1271] = await Promise.all([
      authorizationState({ client, token, authorizer: payer, nonce }),
      balanceOf({ client, token, account: payer }),
      check ? askErc1271(this.chain, payer, check) : undefined,
    ]);
    return { used, balance, ...(erc1271 ? { erc1271 } : {}) };
  }
}

/** The payer's ERC-1271 answer, alone (no Multicall3): `none` when it has no code. */
export async function askErc1271(chain: ChainService, payer: Address, check: { digest: Hex; signature: Hex }): Promise<'none' | 'valid' | 'invalid'> {
  const code = await chain.publicClient.getCode({ address: payer });
  if (!code || code === '0x') return 'none';
  const answer = await chain.publicClient.call({ to: payer, data: erc1271Call(check) }).then((r) => ({ ok: true, data: r.data ?? '0x' as Hex }), (err: unknown) => {
    if (nodeFault(err)) throw err;
    return { ok: false, data: '0x' as Hex };
  });
  return answer.ok && answer.data !== '0x' ? erc1271Answer(true, answer.data) : 'invalid';
}
