import { encodeFunctionData, multicall3Abi, parseEventLogs, type Address, type Hex, type TransactionReceipt } from 'viem';
import { transferWithAuthorizationArgs, usdcAbi, type Authorization } from '../chain/usdc.js';
import type { ChainService } from '../chain/chain-service.js';
import { isAmbiguousSendError, RelayerLane } from './relayer.js';

/**
 * How settlement ended for one authorization:
 * - settled: the transfer is on chain in `txHash` (alone or inside a batch);
 * - failed: it did not move money and never will through this send (`reason` as the exact scheme names it);
 * - unconfirmed: it may yet be mined; the record stays open and reconciliation asks the chain later.
 */
export type SettleOutcome =
  | { ok: true; txHash: Hex; batchSize: number }
  | { ok: false; reason: string; message: string; txHash?: Hex; unconfirmed?: true };

export interface SettlementRequest { authorization: Authorization; signature: Hex }

export interface SettlerOptions {
  /** Most authorizations in one transaction; 1 turns batching off. */
  maxBatch: number;
  /** Transactions in flight per relayer account before new requests wait (and so batch). */
  pipelineDepth: number;
  multicall: Address;
}

/** Gas per transfer inside a batch, generous for ERC-1271 smart-account checks; unused gas is not charged. */
const GAS_PER_TRANSFER = 200_000n;
const GAS_BASE = 60_000n;

interface Waiting { request: SettlementRequest; resolve: (outcome: SettleOutcome) => void }

/**
 * Settles authorizations on chain with as few transactions as the load allows. A request that finds a
 * relayer with room is sent at once, alone, so a quiet server adds no latency. Requests that arrive
 * while every relayer has `pipelineDepth` transactions in flight wait, and the next free slot takes all
 * of them in one Multicall3 `aggregate3` with `allowFailure`, so a bad authorization fails only itself.
 * Which transfers of a batch went through is read from the token's AuthorizationUsed events in the
 * receipt; a failed one is simulated alone to name its reason.
 */
export class Settler {
  private readonly queue: Waiting[] = [];
  /** Runs after the node accepted a transaction and before its outcome is known (tests stop here, as a crash would). */
  readonly onSubmitted: Array<(txHash: Hex, size: number) => Promise<void>> = [];

  constructor(private readonly chain: ChainService, private readonly lanes: RelayerLane[], private readonly options: SettlerOptions) {
    if (lanes.length === 0) throw new Error('the settler needs at least one relayer account');
  }

  /** Requests waiting for a relayer slot. */
  get waiting(): number {
    return this.queue.length;
  }

  settle(request: SettlementRequest): Promise<SettleOutcome> {
    return new Promise((resolve) => {
      this.queue.push({ request, resolve });
      this.pump();
    });
  }

  private pump(): void {
    while (this.queue.length > 0) {
      const lane = this.lanes.reduce((best, l) => (l.inFlight < best.inFlight ? l : best));
      if (lane.inFlight >= this.options.pipelineDepth) return; // the next finished transaction pumps again
      const batch = this.queue.splice(0, this.options.maxBatch);
      lane.inFlight++;
      void this.sendBatch(lane, batch)
        .catch((err) => {
          // sendBatch answers every refusal before submission itself; what escapes may have happened after
          // the node took the transaction, so the records stay open and reconciliation asks the chain.
          const message = `settlement outcome unknown: ${shortReason(err)}`;
          for (const item of batch) item.resolve({ ok: false, reason: 'settle_unconfirmed', message, unconfirmed: true });
        })
        .finally(() => {
          lane.inFlight--;
          this.pump();
        });
    }
  }

  private async sendBatch(lane: RelayerLane, batch: Waiting[]): Promise<void> {
    const single = batch.length === 1;
    const calls = batch.map((w) => transferCalldata(w.request));
    const tx = single
      ? { to: this.chain.usdc.address, data: calls[0]!, gas: GAS_BASE + GAS_PER_TRANSFER }
      : {
          to: this.options.multicall,
          data: encodeFunctionData({ abi: multicall3Abi, functionName: 'aggregate3', args: [calls.map((callData) => ({ target: this.chain.usdc.address, allowFailure: true, callData }))] }),
          gas: GAS_BASE + GAS_PER_TRANSFER * BigInt(batch.length),
        };
    let txHash: Hex;
    try {
      txHash = await lane.send(tx);
    } catch (err) {
      const outcome: SettleOutcome = isAmbiguousSendError(err)
        ? { ok: false, reason: 'settle_unconfirmed', message: `the settlement may not have reached the chain: ${shortReason(err)}`, unconfirmed: true }
        : { ok: false, reason: 'settle_failed', message: `settlement was refused by the chain: ${shortReason(err)}` };
      for (const item of batch) item.resolve(outcome);
      return;
    }
    for (const hook of this.onSubmitted) await hook(txHash, batch.length);

    let receipt: TransactionReceipt;
    try {
      receipt = await lane.receipt(txHash);
    } catch (err) {
      for (const item of batch) item.resolve({ ok: false, reason: 'settle_unconfirmed', message: `the settlement transaction was not confirmed: ${shortReason(err)}`, txHash, unconfirmed: true });
      return;
    }
    const used = receipt.status === 'success' ? usedAuthorizations(receipt, this.chain.usdc.address) : new Set<string>();
    for (const item of batch) {
      const { from, nonce } = item.request.authorization;
      if (used.has(authorizationId(from, nonce))) {
        item.resolve({ ok: true, txHash, batchSize: batch.length });
      } else {
        item.resolve({ ...(await this.whyNotSettled(lane, item.request)), txHash });
      }
    }
  }

  /** Replays one transfer as a call against the latest state: the token's revert message names the reason. */
  private async whyNotSettled(lane: RelayerLane, request: SettlementRequest): Promise<{ ok: false; reason: string; message: string }> {
    try {
      await this.chain.publicClient.call({ account: lane.address, to: this.chain.usdc.address, data: transferCalldata(request) });
      return { ok: false, reason: 'settle_reverted', message: 'the transfer did not go through in its settlement transaction' };
    } catch (err) {
      const message = shortReason(err);
      return { ok: false, reason: reasonOfRevert(message), message: `the token refused the transfer: ${message}` };
    }
  }
}

function transferCalldata({ authorization, signature }: SettlementRequest): Hex {
  const call = transferWithAuthorizationArgs(authorization, signature);
  return call.form === 'vrs'
    ? encodeFunctionData({ abi: usdcAbi, functionName: 'transferWithAuthorization', args: call.args })
    : encodeFunctionData({ abi: usdcAbi, functionName: 'transferWithAuthorization', args: call.args });
}

const authorizationId = (authorizer: string, nonce: string) => `${authorizer}:${nonce}`.toLowerCase();

function usedAuthorizations(receipt: TransactionReceipt, token: Address): Set<string> {
  const logs = receipt.logs.filter((l) => l.address.toLowerCase() === token.toLowerCase());
  const events = parseEventLogs({ abi: usdcAbi, logs, eventName: 'AuthorizationUsed' });
  return new Set(events.map((e) => authorizationId((e.args as { authorizer: Address }).authorizer, (e.args as { nonce: Hex }).nonce)));
}

/**
 * Circle's FiatTokenV2_2 revert messages, word for word from its sources (v2/EIP3009.sol, v1/FiatTokenV1.sol,
 * v1/Blacklistable.sol, v1/Pausable.sol, util/ECRecover.sol), to our reason codes; facilitator-routes maps
 * those on to the exact scheme's. First match wins.
 */
const REVERT_REASONS: ReadonlyArray<readonly [string, string]> = [
  ['FiatTokenV2: authorization is used or canceled', 'nonce_already_used'],
  ['FiatTokenV2: invalid signature', 'invalid_signature'],
  // A malformed EOA signature (high s, bad v, wrong length) fails in ECRecover before the comparison.
  ['ECRecover: invalid signature', 'invalid_signature'],
  ['FiatTokenV2: authorization is expired', 'authorization_expired'],
  ['FiatTokenV2: authorization is not yet valid', 'authorization_not_yet_valid'],
  ['ERC20: transfer amount exceeds balance', 'insufficient_funds'],
  // The token says the same when the payee is blacklisted; a seller's payTo on Circle's list is the rarer case.
  ['Blacklistable: account is blacklisted', 'payer_blacklisted'],
  ['Pausable: paused', 'token_paused'],
  // Only receiveWithAuthorization says this, and we settle with transferWithAuthorization: our mistake, not the payer's.
  ['FiatTokenV2: caller must be the payee', 'settle_reverted'],
];

export function reasonOfRevert(message: string): string {
  const text = message.toLowerCase();
  return REVERT_REASONS.find(([revert]) => text.includes(revert.toLowerCase()))?.[1] ?? 'settle_reverted';
}

export function shortReason(err: unknown): string {
  const e = err as { shortMessage?: string; message?: string; details?: string };
  return (e.shortMessage && e.details ? `${e.shortMessage} ${e.details}` : e.shortMessage ?? e.message ?? String(err)).split('\n')[0]!.slice(0, 300);
}
