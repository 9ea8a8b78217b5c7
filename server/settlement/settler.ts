import { encodeFunctionData, multicall3Abi, parseEventLogs, type Address, type Hex, type TransactionReceipt } from 'viem';
import { authorizationState, transferWithAuthorizationArgs, usdcAbi, type Authorization } from '../chain/usdc.js';
import type { ChainService } from '../chain/chain-service.js';
import type { Logger } from '../platform/logger.js';
import { outsideRequest } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';
import type { BlockClock } from './block-clock.js';
import { RelayerUnavailableError, shortReason, type RelayerLane, type SentTx, type TxRequest } from './relayer-lane.js';
import { findSettlementTx } from '../chain/authorization-events.js';

/**
 * How settlement ended for one authorization:
 * - settled: the transfer is on chain in `txHash` (alone or inside a batch);
 * - failed: it did not move money and never will through this send (`reason` as the exact scheme names it);
 * - unconfirmed: it may yet be mined; the record stays open and reconciliation asks the chain later;
 * - unavailable: nothing was sent, because this process holds no relayer that can send it (none held, or
 *   out of gas): another process's relayer may (desk.ts), or the buyer may present the payment again.
 */
export type SettleOutcome =
  | { ok: true; txHash: Hex; batchSize: number }
  | { ok: false; reason: string; message: string; txHash?: Hex; unconfirmed?: true; unavailable?: true };

export interface SettlementRequest {
  authorization: Authorization; signature: Hex; paymentId?: string;
  /** ERC-8021 attribution appended to the transaction's calldata: a transaction carries one, so a batch holds requests of one suffix. */
  dataSuffix?: Hex;
}

/** The lanes a settler may use: the process's leased share of the pool (RelayerPool), or a fixed list in tests. */
export interface LaneSource {
  /** Lanes that take new work (not being handed over). */
  lanes(): RelayerLane[];
  /** Every lane held, those being handed over included (they finish what this process has queued if no other lane can). */
  allLanes(): RelayerLane[];
  /** Why no lane can send, for the refusal's message. */
  why?(): string;
  /** Re-reads the gas of lanes found starved (a relayer funded a moment ago sends the next transaction). */
  recheckStarved?(): Promise<void>;
}

export interface SettlerOptions {
  /** Most authorizations in one transaction; 1 turns batching off. */
  maxBatch: number;
  multicall: Address;
  /** On a chain with a block cadence, a batch leaves this long before the next block is due. */
  sendMarginMs: number;
  /** A transfer whose window closes within this many seconds is not sent again after a replacement. */
  validityMarginSeconds: number;
}

/** Gas per transfer inside a batch, generous for ERC-1271 smart-account checks; unused gas is not charged. */
export const GAS_PER_TRANSFER = 200_000n;
export const GAS_BASE = 60_000n;
/** How often one authorization is put back in the queue (its transaction replaced or reverted whole) before we stop. */
const MAX_ATTEMPTS = 3;
/** How far back the AuthorizationUsed event of a transfer settled elsewhere is searched (Base: ~3 hours). */
const EVENT_LOOKBACK_BLOCKS = 5_000n;

interface Waiting { request: SettlementRequest; resolve: (outcome: SettleOutcome) => void; attempts: number; queuedAt: number }

/**
 * Settles authorizations on chain in as few transactions as the chain's rhythm allows.
 *
 * On a chain that mines on a timer (Base, anvil --block-time), every request that arrives during a block
 * joins the transaction that leaves just before that block closes (`sendMarginMs` before the clock's
 * estimate), so a request waits for the next block and no longer: a full batch leaves at once, and a
 * request that arrives after the cut-off leaves at once too (it may still make the block). On a chain
 * that mines each transaction on arrival there is nothing to wait for: requests of the same tick share a
 * transaction, and requests that find every lane's pipeline full wait and go together.
 *
 * Batches are Multicall3 `aggregate3` calls with `allowFailure`, so a bad authorization fails only
 * itself; which transfers went through is read from the token's AuthorizationUsed events. A transaction
 * replaced by another sender puts its authorizations back in the queue after checking the chain, and one
 * authorization already used elsewhere (reconciliation got there first) is reported settled by that
 * transaction.
 */
export class Settler {
  private readonly queue: Waiting[] = [];
  private pumpQueued = false;
  private wakeUp: { at: number; timer: NodeJS.Timeout } | undefined;
  /** Runs after the node accepted a transaction and before its outcome is known (tests stop here, as a crash would). */
  readonly onSubmitted: Array<(txHash: Hex, size: number) => Promise<void>> = [];

  constructor(
    private readonly chain: ChainService,
    private readonly relayers: LaneSource,
    private readonly clock: BlockClock,
    private readonly options: SettlerOptions,
    private readonly log: Logger,
    private readonly metrics: Metrics,
  ) {
    // A new head frees pipelines and may bring new leases or a refilled relayer: look at the queue again.
    clock.onBlock(() => this.schedulePump());
  }

  /** Requests waiting for a transaction. */
  get waiting(): number {
    return this.queue.length;
  }

  /** Whether this process can send settlements now (it holds a lease on a relayer with gas). */
  available(): boolean {
    return this.relayers.lanes().some((l) => l.state === 'active' && l.canSendNow());
  }

  /** The queued request that has waited longest, in ms (0: none waiting). */
  oldestWaitingMs(): number {
    return this.queue.length ? Date.now() - this.queue[0]!.queuedAt : 0;
  }

  /** The chain's block interval in ms, or 0 if it has no cadence the clock knows. */
  blockIntervalMs(): number {
    return this.clock.intervalMs ?? 0;
  }

  /**
   * When the next batches leave (ms since epoch): the main one and the late one of the next block, on a
   * chain whose cadence and phase the clock knows; empty otherwise (requests leave at once). Work that
   * comes from another process (sender.ts) is read just before these.
   */
  cutoffs(): number[] {
    const next = this.clock.nextBlock();
    if (!next) return [];
    return [next.at - this.options.sendMarginMs, next.at - this.options.sendMarginMs / 4];
  }

  /** Whether there is settlement work under way (the block clock polls faster while there is). */
  busy(): boolean {
    return this.queue.length > 0 || this.relayers.allLanes().some((l) => l.inFlight > 0);
  }

  settle(request: SettlementRequest): Promise<SettleOutcome> {
    return new Promise((resolve) => {
      this.queue.push({ request, resolve, attempts: 0, queuedAt: Date.now() });
      this.schedulePump();
    });
  }

  /**
   * Sends any other transaction from a relayer of this process (wallet deployments, cancellations) and
   * waits for it to be mined. Shares the lane's nonce sequence with settlements.
   */
  async sendTransaction(tx: Omit<TxRequest, 'gas'> & { gas?: bigint }, label: Record<string, unknown> = {}): Promise<TransactionReceipt> {
    const lane = await this.laneToSend();
    const gas = tx.gas ?? (await this.chain.publicClient.estimateGas({ account: lane.address, to: tx.to, data: tx.data, value: tx.value })) * 12n / 10n;
    const sent = await lane.submit({ ...tx, gas }, label);
    const fate = await sent.fate;
    if (fate.kind === 'mined') return fate.receipt;
    throw new Error(fate.kind === 'replaced' ? `transaction ${sent.hash} was replaced by another` : `transaction ${sent.hash}: ${fate.reason}`);
  }

  /**
   * Sends one transaction, never batched, from the least busy relayer of this process (a Permit2 exact
   * settlement: any sender may call the exact proxy). Resolves once a node took it; its fate follows.
   */
  async submit(tx: TxRequest, label: Record<string, unknown> = {}): Promise<SentTx> {
    const sent = await (await this.laneToSend()).submit(tx, label);
    this.metrics.batchSize.observe(1);
    return sent;
  }

  /** The least busy lane that can send now; with none, starved lanes are asked again once (one funded since may send). */
  private async laneToSend(): Promise<RelayerLane> {
    const pick = () => this.relayers.lanes().filter((l) => l.state === 'active' && l.canSendNow()).sort((a, b) => a.inFlight - b.inFlight)[0];
    let lane = pick();
    if (!lane) {
      await this.relayers.recheckStarved?.();
      lane = pick();
    }
    if (!lane) throw new RelayerUnavailableError(`no relayer account of this process can send now${this.relayers.why?.() ? `: ${this.relayers.why()}` : ''}`);
    return lane;
  }

  /**
   * Sends one transaction from the relayer account `address` and no other: the x402 upto proxy lets only
   * the facilitator the buyer named in the permit settle it, so these never join a batch. Resolves once a
   * node took it; its fate follows. Throws RelayerUnavailableError when this process cannot send from it.
   */
  async submitFrom(address: Address, tx: TxRequest, label: Record<string, unknown> = {}): Promise<SentTx> {
    // A lane being handed over still sends what was given to it before.
    const lane = this.relayers.allLanes().find((l) => l.address.toLowerCase() === address.toLowerCase() && l.state === 'active' && l.canSendNow());
    if (!lane) throw new RelayerUnavailableError(`relayer ${address} is not leased by this process or cannot send now: ${this.relayers.why?.() || 'leased elsewhere or out of gas'}`);
    const sent = await lane.submit(tx, label);
    this.metrics.batchSize.observe(1);
    return sent;
  }

  /** Whether the relayer `address`, leased by this process, has nothing of a previous holder still waiting (relayer-lane.ts). */
  async previousHolderSettled(address: Address): Promise<boolean> {
    const lane = this.relayers.allLanes().find((l) => l.address.toLowerCase() === address.toLowerCase() && l.state === 'active' && l.canSendNow());
    if (!lane) throw new RelayerUnavailableError(`relayer ${address} is not leased by this process or cannot send now: ${this.relayers.why?.() || 'leased elsewhere or out of gas'}`);
    return lane.previousHolderSettled();
  }

  /** Looks at the queue again (a lane was taken, renewed or funded). */
  wake(): void {
    this.schedulePump();
  }

  private schedulePump(): void {
    if (this.pumpQueued) return;
    this.pumpQueued = true;
    // Requests that arrive in the same tick share the transaction.
    setImmediate(() => {
      this.pumpQueued = false;
      outsideRequest(() => this.pump());
    });
  }

  /** The lanes new batches go to: those taking work, or, when none is, those being handed over (to finish the queue). */
  private sendingLanes(): RelayerLane[] {
    const lanes = this.relayers.lanes();
    return lanes.length ? lanes : this.relayers.allLanes().filter((l) => l.state !== 'stopped');
  }

  private pump(): void {
    while (this.queue.length > 0) {
      const lanes = this.sendingLanes();
      if (!lanes.some((l) => l.state === 'active' || l.state === 'starting')) {
        // No lane held, or every one out of gas: nothing will leave this process. The work goes back to
        // whoever gave it (desk.ts hands it to another process's relayer, or the buyer is told to retry).
        const message = `no relayer account of this process can send now: ${this.relayers.why?.() || 'all leased elsewhere or out of gas'}`;
        for (const item of this.queue.splice(0)) item.resolve({ ok: false, reason: 'relayer_unavailable', message, unavailable: true });
        return;
      }
      // A lane whose lease renewal is late (a slow database) waits: the lease, once renewed, lets it send again.
      const ready = lanes.filter((l) => l.canTakeWork());
      if (ready.length === 0) return; // a transaction resolving, the next head, or a renewed lease pumps again
      if (this.queue.length < this.options.maxBatch) {
        const at = this.sendTime();
        if (at !== undefined) { this.wakeAt(at); return; }
      }
      const lane = ready.reduce((best, l) => (l.inFlight < best.inFlight ? l : best));
      const release = lane.reserve();
      const batch = this.takeBatch();
      // The reservation holds the lane's pipeline slot until the transaction is sent (from then on it is
      // counted as in flight); held until the batch's fate, it counted every transaction twice and halved
      // the pipeline: two small batches sent at once by a process that just started filled it.
      void this.sendBatch(lane, batch, () => { release(); this.schedulePump(); })
        .catch((err) => {
          // Anything that escapes may have happened after the node took the transaction: the records stay
          // open and reconciliation asks the chain.
          const message = `settlement outcome unknown: ${shortReason(err)}`;
          for (const item of batch) item.resolve({ ok: false, reason: 'settle_unconfirmed', message, unconfirmed: true });
        })
        .finally(() => {
          release();
          this.schedulePump();
        });
    }
  }

  /** The next batch: the oldest request and those after it with the same ERC-8021 suffix, in queue order. */
  private takeBatch(): Waiting[] {
    const queue = this.queue;
    const suffix = queue[0]!.request.dataSuffix;
    const batch: Waiting[] = [];
    // One pass and one splice (this runs for every transaction): the requests passed over move up, in
    // order, to the head of the queue, and the slots the batch took are removed at once.
    let kept = 0;
    let end = 0;
    for (; end < queue.length && batch.length < this.options.maxBatch; end++) {
      const waiting = queue[end]!;
      if (waiting.request.dataSuffix === suffix) batch.push(waiting);
      else queue[kept++] = waiting;
    }
    queue.splice(kept, end - kept);
    return batch;
  }

  /**
   * When the batch collecting now should leave; undefined: now. Per block there is a main batch, leaving
   * `sendMarginMs` before the block is due, and one late batch for what arrived after it, leaving at a
   * quarter of the margin: a late request still makes the block, and a block carries at most two of our
   * transactions (plus full batches). What arrives after the late batch waits for the next block.
   */
  private sendTime(): number | undefined {
    const next = this.clock.nextBlock();
    if (!next) return undefined; // no cadence (a chain that mines on arrival): nothing to wait for
    const now = Date.now();
    const main = next.at - this.options.sendMarginMs;
    if (now < main) return main;
    const sent = this.sentFor.get(next.number) ?? 0;
    if (sent === 0) return this.markSent(next.number);
    const late = next.at - this.options.sendMarginMs / 4;
    if (sent === 1) return now < late ? late : this.markSent(next.number);
    return next.at + (this.clock.intervalMs ?? 0) - this.options.sendMarginMs;
  }

  /** Batches sent for each upcoming block (only the last few kept). */
  private readonly sentFor = new Map<bigint, number>();

  private markSent(block: bigint): undefined {
    this.sentFor.set(block, (this.sentFor.get(block) ?? 0) + 1);
    for (const key of this.sentFor.keys()) if (key < block - 4n) this.sentFor.delete(key);
    return undefined;
  }

  private wakeAt(at: number): void {
    if (this.wakeUp && this.wakeUp.at <= at) return;
    if (this.wakeUp) clearTimeout(this.wakeUp.timer);
    const timer = setTimeout(() => { this.wakeUp = undefined; this.schedulePump(); }, Math.max(0, at - Date.now()));
    timer.unref();
    this.wakeUp = { at, timer };
  }

  /** Sends one batch and resolves each of its requests with their outcome; `sentOrFailed` runs once the send itself is over. */
  private async sendBatch(lane: RelayerLane, batch: Waiting[], sentOrFailed: () => void): Promise<void> {
    const paymentIds = batch.map((w) => w.request.paymentId).filter(Boolean);
    let sent: SentTx;
    try {
      sent = await lane.submit(this.transactionFor(batch), { batchSize: batch.length, ...(paymentIds.length ? { paymentIds } : {}) });
    } catch (err) {
      sentOrFailed();
      if (err instanceof RelayerUnavailableError) {
        // This lane cannot send (out of gas, lease gone): another lane may; if none can, pump says so.
        this.queue.unshift(...batch);
        return;
      }
      // Refused before the chain saw it (or the chain could not be asked): nothing moved.
      this.log.error({ relayer: lane.address, err: shortReason(err), batchSize: batch.length }, 'settlement could not be sent');
      for (const item of batch) item.resolve({ ok: false, reason: 'relayer_unavailable', message: `the settlement could not be sent: ${shortReason(err)}`, unavailable: true });
      return;
    }
    this.metrics.batchSize.observe(batch.length);
    // Hooks (tests: a crash between sending and recording) run while the batch still holds its slot.
    for (const hook of this.onSubmitted) await hook(sent.hash, batch.length);
    sentOrFailed();

    const fate = await sent.fate;
    if (fate.kind === 'unknown') {
      const message = `the settlement transaction ${sent.hash} was not confirmed (${fate.reason})`;
      for (const item of batch) item.resolve({ ok: false, reason: 'settle_unconfirmed', message, txHash: sent.hash, unconfirmed: true });
      return;
    }
    if (fate.kind === 'replaced') {
      await Promise.all(batch.map((item) => this.afterLostTransaction(item, `its transaction ${sent.hash} was replaced`)));
      return;
    }
    const { receipt } = fate;
    const used = receipt.status === 'success' ? usedAuthorizations(receipt, this.chain.usdc.address) : new Set<string>();
    await Promise.all(batch.map(async (item) => {
      const { from, nonce } = item.request.authorization;
      if (used.has(authorizationId(from, nonce))) item.resolve({ ok: true, txHash: receipt.transactionHash, batchSize: batch.length });
      // A batch reverts whole only for want of gas (allowFailure keeps one transfer's revert its own): send
      // again. A lone transfer's revert is that transfer's: the token names why.
      else if (receipt.status !== 'success' && batch.length > 1) await this.afterLostTransaction(item, `its transaction ${receipt.transactionHash} reverted`);
      else {
        const why = await this.whyNotSettled(lane, item);
        item.resolve(why.ok ? why : { ...why, txHash: receipt.transactionHash });
      }
    }));
  }

  private transactionFor(batch: Waiting[]): TxRequest {
    const calls = batch.map((w) => transferCalldata(w.request));
    // Calldata after the arguments is ignored by the token and Multicall3: the attribution rides there.
    const suffix = batch[0]!.request.dataSuffix?.slice(2) ?? '';
    if (batch.length === 1) return { to: this.chain.usdc.address, data: `${calls[0]!}${suffix}`, gas: GAS_BASE + GAS_PER_TRANSFER };
    return {
      to: this.options.multicall,
      data: `${encodeFunctionData({ abi: multicall3Abi, functionName: 'aggregate3', args: [calls.map((callData) => ({ target: this.chain.usdc.address, allowFailure: true, callData }))] })}${suffix}`,
      gas: GAS_BASE + GAS_PER_TRANSFER * BigInt(batch.length),
    };
  }

  /**
   * The transaction carrying this authorization will not move it (replaced by another sender, or reverted
   * whole). The chain says whether it moved anyway (another transaction used it); if not, and there is
   * time left in its window, it goes back in the queue.
   */
  private async afterLostTransaction(item: Waiting, what: string): Promise<void> {
    const elsewhere = await this.settledElsewhere(item.request);
    if (elsewhere) { item.resolve(elsewhere); return; }
    const closesAt = Number(item.request.authorization.validBefore);
    if (closesAt <= Date.now() / 1000 + this.options.validityMarginSeconds) {
      item.resolve({ ok: false, reason: 'authorization_expired', message: `${what}, and the authorization expires before it could be sent again` });
      return;
    }
    if (++item.attempts >= MAX_ATTEMPTS) {
      item.resolve({ ok: false, reason: 'settle_unconfirmed', message: `${what}; given up after ${MAX_ATTEMPTS} sends, reconciliation will finish it`, unconfirmed: true });
      return;
    }
    this.log.warn({ paymentId: item.request.paymentId, attempt: item.attempts }, `settlement sent again: ${what}`);
    this.queue.unshift(item);
    this.schedulePump();
  }

  /** A used authorization's transaction, if it was used (by reconciliation, another process, a fee bump of ours). */
  private async settledElsewhere(request: SettlementRequest): Promise<SettleOutcome | undefined> {
    const { from, nonce } = request.authorization;
    const used = await authorizationState({ client: this.chain.publicClient, token: this.chain.usdc.address, authorizer: from, nonce });
    if (!used) return undefined;
    const head = this.clock.latest ?? await this.chain.publicClient.getBlockNumber();
    const txHash = await findSettlementTx(this.chain, from, nonce, head > EVENT_LOOKBACK_BLOCKS ? head - EVENT_LOOKBACK_BLOCKS : 0n);
    if (txHash) return { ok: true, txHash, batchSize: 1 };
    return { ok: false, reason: 'authorization_canceled', message: 'the payer canceled this authorization on chain' };
  }

  /** Replays one transfer as a call against the latest state: the token's revert message names the reason. */
  private async whyNotSettled(lane: RelayerLane, item: Waiting): Promise<SettleOutcome> {
    const elsewhere = await this.settledElsewhere(item.request);
    if (elsewhere) return elsewhere;
    try {
      await this.chain.publicClient.call({ account: lane.address, to: this.chain.usdc.address, data: transferCalldata(item.request) });
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

export { shortReason };
