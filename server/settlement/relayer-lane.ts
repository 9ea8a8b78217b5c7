import { formatEther, keccak256, type Address, type Hex, type PrivateKeyAccount, type TransactionReceipt } from 'viem';
import type { ChainService } from '../chain/chain-service.js';
import { nodeFault } from '../chain/rpc-fault.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';
import type { BlockClock } from './block-clock.js';

/**
 * When a just-sent transaction's receipt is asked for, in ms after the send was answered (see checkNow):
 * often while the chain is not known to mine on a timer (the receipt is due within milliseconds, and the
 * buyer's answer waits for it), twice on a timed chain (enough to notice one that mines on arrival after
 * all, without paying a node for asks that cannot be answered before the next block).
 */
const RECEIPT_ASKS_MS = { untimed: [0, 2, 5, 10, 20, 40, 70], timed: [0, 70] };

export interface Fees { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }

/** What a sent transaction came to. */
export type TxFate =
  | { kind: 'mined'; receipt: TransactionReceipt }
  /** Its nonce was used by a transaction that is none of ours: nothing we signed for it will be mined. */
  | { kind: 'replaced' }
  /** The lane stopped (shutdown) before the fate was known; the chain still decides, reconciliation asks it. */
  | { kind: 'unknown'; reason: string };

export interface SentTx { hash: Hex; nonce: number; fate: Promise<TxFate> }

export interface TxRequest { to: Address; data: Hex; gas: bigint; value?: bigint }

/** The relayer cannot send at all right now (no gas, lease lost, stopped): nothing was sent. */
export class RelayerUnavailableError extends Error {
  override readonly name = 'RelayerUnavailableError';
}

/** The node refused the transaction for a reason of its own (not nonce, not fees, not gas): nothing was sent. */
export class SendRefusedError extends Error {
  override readonly name = 'SendRefusedError';
}

export interface LaneOptions {
  /** Transactions in flight before the lane takes no more work. */
  pipelineDepth: number;
  /** Blocks a transaction may wait unmined before its fee is bumped. */
  stuckBlocks: number;
  /**
   * Blocks a transaction's block must have on top of it, itself included, before it counts as mined (1:
   * its receipt is enough). Until then it stays in flight: a reorg that drops it finds it unmined, and it
   * is sent again.
   */
  confirmations?: number;
  /** Never offer more than this per gas (an operator's ceiling through a fee spike); undefined: no ceiling. */
  maxFeePerGas?: bigint;
  /** Gas of the largest transaction the lane sends: the lane is starved below enough for one at current fees. */
  reserveGas: bigint;
  /** Every transaction's gas limit, in percent of the one it was given (GAS_LIMIT_PERCENT; absent: 100). */
  gasLimitPercent?: number;
  /** Whether this process may send from the account now (its lease is valid). */
  mayRun: () => boolean;
  log: Logger;
  metrics: Metrics;
}

interface Pending {
  nonce: number;
  tx: TxRequest;
  sends: Array<{ hash: Hex; raw: Hex; fees: Fees }>;
  /** The head when it was last sent (or bumped): waiting is counted from here. */
  sentAt: bigint | undefined;
  /** Monitor rounds that found the nonce used and none of our hashes mined (one more is allowed for a lagging node). */
  consumedChecks: number;
  label: Record<string, unknown>;
  resolve: (fate: TxFate) => void;
}

type LaneState = 'starting' | 'active' | 'starved' | 'stopped';

const FEE_BUMP_NUM = 5n;
const FEE_BUMP_DEN = 4n; // +25%: above every client's replacement rule (geth 10%, anvil 10%)
const GAS_CANCEL = 21_000n;

/**
 * One relayer account, used by this process alone (it holds the account's lease). It keeps its own nonce
 * sequence, signs locally and sends serially (one RPC call per send), and follows every transaction to
 * its fate on each new block:
 * - mined: found by one of the hashes we signed for its nonce;
 * - replaced: its nonce was used by a transaction that is none of ours (another process sent from the
 *   account): the settler re-checks each authorization on chain instead of waiting for a receipt forever;
 * - stuck: unmined for `stuckBlocks` blocks: re-signed with the same nonce and a bumped fee; a transaction
 *   the node no longer knows (a send that timed out, a node that restarted) is broadcast again;
 * - a gap below our nonces (a previous holder's transaction that never mines) is filled with a cancel.
 */
export class RelayerLane {
  state: LaneState = 'starting';
  balance: bigint | undefined;
  private nextNonce: number | undefined;
  private readonly pending = new Map<number, Pending>();
  private sending: Promise<unknown> = Promise.resolve();
  private reservations = 0;
  private monitoring = false;
  /** The account's next nonce when this process took it: every lower nonce is a previous holder's, or mined. */
  private inheritedUntil = 0;
  /** Set once everything below `inheritedUntil` is mined or gone from the node: it stays so. */
  private inheritedSettled = false;
  /** The head at which the confirmed nonce last moved, for spotting a gap that does not fill. */
  private confirmed: { nonce: number; since: bigint } | undefined;
  private feeCache: { block: bigint | undefined; at: number; fees: Fees } | undefined;
  private readonly log: Logger;
  private readonly idle = new Set<() => void>();

  constructor(readonly account: PrivateKeyAccount, private readonly chain: ChainService, private readonly clock: BlockClock, private readonly options: LaneOptions) {
    this.log = options.log.child({ relayer: account.address });
  }

  get address(): Address {
    return this.account.address;
  }

  /** Transactions sent and not yet resolved. */
  get inFlight(): number {
    return this.pending.size;
  }

  /** Whether a new transaction may be sent from this lane now. */
  canTakeWork(): boolean {
    return this.state === 'active' && this.pending.size + this.reservations < this.options.pipelineDepth && this.options.mayRun();
  }

  /** Holds a pipeline slot from choosing this lane until its send is tracked or failed; returns the release. */
  reserve(): () => void {
    this.reservations++;
    let released = false;
    return () => { if (!released) { released = true; this.reservations--; } };
  }

  /** Whether this process may send from the account at all now (its lease is valid). */
  canSendNow(): boolean {
    return this.state !== 'stopped' && this.options.mayRun();
  }

  /** Reads the account's nonce and balance from the chain: the previous holder's transactions included. */
  async start(): Promise<void> {
    this.nextNonce = await this.chain.publicClient.getTransactionCount({ address: this.address, blockTag: 'pending' });
    this.inheritedUntil = this.nextNonce;
    await this.refreshBalance();
    if (this.state === 'starting') this.state = 'active';
    this.log.info({ nonce: this.nextNonce, balanceEth: this.balance === undefined ? undefined : formatEther(this.balance) }, 'relayer lane started');
  }

  /**
   * Whether what a previous holder of the account sent is settled: mined, or no longer waiting at the
   * node. A holder that died after broadcasting a transaction and before recording it leaves it waiting
   * for a block; a call the chain would accept twice (an escrow capture or refund) is not sent again while
   * it may be that one.
   */
  async previousHolderSettled(): Promise<boolean> {
    if (this.inheritedSettled) return true;
    const { publicClient } = this.chain;
    const [mined, pending] = await Promise.all([
      publicClient.getTransactionCount({ address: this.address, blockTag: 'latest' }),
      publicClient.getTransactionCount({ address: this.address, blockTag: 'pending' }),
    ]);
    // Our own transactions start at inheritedUntil: while one below it waits, pending is above mined.
    this.inheritedSettled = mined >= this.inheritedUntil || pending <= mined;
    return this.inheritedSettled;
  }

  /** Stops sending; in-flight transactions resolve as unknown (the chain, through reconciliation, decides them). */
  stop(reason: string): void {
    if (this.state === 'stopped') return;
    this.state = 'stopped';
    for (const p of this.pending.values()) p.resolve({ kind: 'unknown', reason });
    this.pending.clear();
    this.updateGauges();
    this.notifyIdle();
  }

  /** Resolves when nothing is in flight (or after `timeoutMs`), so a lease can be handed over cleanly. */
  async drained(timeoutMs: number): Promise<boolean> {
    if (this.pending.size === 0) return true;
    return new Promise((resolve) => {
      const done = () => { clearTimeout(timer); this.idle.delete(done); resolve(this.pending.size === 0); };
      const timer = setTimeout(done, timeoutMs);
      timer.unref();
      this.idle.add(done);
    });
  }

  /**
   * Signs and sends one transaction; resolves once a node took it (or may have: a send that timed out is
   * followed like any other, by its hash). Sends of one lane run one at a time, so nonces never collide.
   */
  submit(tx: TxRequest, label: Record<string, unknown> = {}): Promise<SentTx> {
    const run = this.sending.then(() => this.sendNow(tx, label));
    this.sending = run.catch(() => {});
    return run;
  }

  private async sendNow(tx: TxRequest, label: Record<string, unknown>): Promise<SentTx> {
    if (this.state !== 'active' || !this.options.mayRun()) throw new RelayerUnavailableError(`relayer ${this.address} is ${this.state === 'active' ? 'not leased by this process' : this.state}`);
    let fees = await this.currentFees(false);
    let lastError: unknown;
    for (let attempt = 0; attempt < 4; attempt++) {
      const nonce = this.nextNonce!;
      const raw = await this.sign(tx, nonce, fees);
      const hash = keccak256(raw);
      try {
        await this.chain.publicClient.sendRawTransaction({ serializedTransaction: raw });
      } catch (err) {
        lastError = err;
        const refusal = classifySendError(err);
        if (refusal === 'known') return this.track(tx, nonce, { hash, raw, fees }, label);
        if (refusal === 'ambiguous') {
          // The node may have it: follow it by hash like any sent transaction; the monitor rebroadcasts it if
          // no node knows it a block later.
          this.log.warn({ nonce, txHash: hash, err: shortReason(err), ...label }, 'settlement send timed out; following it by hash');
          return this.track(tx, nonce, { hash, raw, fees }, label);
        }
        this.options.metrics.settlementTransactions.inc({ event: 'refused', relayer: this.address });
        this.log.warn({ nonce, attempt, reason: refusal, err: shortReason(err), ...label }, 'settlement send refused by the node');
        if (refusal === 'nonce') {
          // Our own transaction, taken by a node that then failed to answer, looks the same to the next node.
          if (await this.chain.publicClient.getTransaction({ hash }).then(() => true, () => false)) return this.track(tx, nonce, { hash, raw, fees }, label);
          // Someone (a previous holder, or a transaction we lost track of) has this nonce: count from the node.
          const pending = await this.chain.publicClient.getTransactionCount({ address: this.address, blockTag: 'pending' });
          this.nextNonce = Math.max(pending, nonce + 1);
          continue;
        }
        if (refusal === 'fee') { fees = await this.currentFees(true); continue; }
        if (refusal === 'funds') {
          await this.refreshBalance();
          this.starve(`the node refused the transaction for lack of gas (${shortReason(err)})`);
          throw new RelayerUnavailableError(`relayer ${this.address} has too little ETH for gas`);
        }
        throw new SendRefusedError(shortReason(err));
      }
      return this.track(tx, nonce, { hash, raw, fees }, label);
    }
    throw new SendRefusedError(`the node kept refusing the transaction: ${shortReason(lastError)}`);
  }

  private track(tx: TxRequest, nonce: number, send: Pending['sends'][number], label: Record<string, unknown>): SentTx {
    this.nextNonce = nonce + 1;
    let resolve!: (fate: TxFate) => void;
    const fate = new Promise<TxFate>((r) => { resolve = r; });
    const entry: Pending = { nonce, tx, sends: [send], sentAt: this.clock.latest, consumedChecks: 0, label, resolve };
    entry.resolve = (f) => {
      if (this.pending.get(nonce) === entry) this.pending.delete(nonce);
      resolve(f);
      this.updateGauges();
      if (this.pending.size === 0) this.notifyIdle();
    };
    this.pending.set(nonce, entry);
    this.updateGauges();
    this.options.metrics.settlementTransactions.inc({ event: 'sent', relayer: this.address });
    this.log.info({ nonce, txHash: send.hash, maxFeePerGas: send.fees.maxFeePerGas.toString(), ...label }, 'settlement transaction sent');
    // A chain that mines on arrival (anvil's default) has the receipt within milliseconds; a timed chain
    // answers at the next block. Asking right away either way tells the clock which kind of chain this is.
    void this.checkNow(entry);
    return { hash: send.hash, nonce, fate };
  }

  /**
   * Asks for the receipt at once and a few times over the next RECEIPT_ASKS_MS. A node that mines on
   * arrival may answer the send a few milliseconds before its block exists (anvil mines in a task of its
   * own): asking only once, a fast client misses the receipt every time, the clock takes the blocks of
   * our own sequential sends for a cadence, and every payment then waits for a block poll (the bench saw
   * 100 ms per payment instead of 15 in such runs). A chain on a timer rarely closes a block within the
   * window, so it still reads as timed.
   */
  private async checkNow(entry: Pending): Promise<void> {
    const sentAt = Date.now();
    for (const at of this.clock.intervalMs === undefined ? RECEIPT_ASKS_MS.untimed : RECEIPT_ASKS_MS.timed) {
      const wait = sentAt + at - Date.now();
      // Unref'd: a pending ask does not keep a stopping process alive (the block clock follows the tx anyway).
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait).unref());
      if (this.pending.get(entry.nonce) !== entry) return; // followed to its block meanwhile
      const receipt = await this.chain.publicClient.getTransactionReceipt({ hash: entry.sends[0]!.hash }).catch(() => undefined);
      if (receipt) {
        this.clock.noteSent(true);
        this.settle(entry, receipt);
        return;
      }
    }
    this.clock.noteSent(false);
    if (this.clock.intervalMs === undefined) void this.clock.poll();
  }

  private settle(entry: Pending, receipt: TransactionReceipt): void {
    if (this.pending.get(entry.nonce) !== entry) return;
    this.options.metrics.settlementTransactions.inc({ event: receipt.status === 'success' ? 'mined' : 'reverted', relayer: this.address });
    this.log.info({ nonce: entry.nonce, txHash: receipt.transactionHash, block: Number(receipt.blockNumber), status: receipt.status, gasUsed: Number(receipt.gasUsed), ...entry.label }, 'settlement transaction mined');
    entry.resolve({ kind: 'mined', receipt });
  }

  /** Follows every transaction in flight one block further. Called on each new head; never runs twice at once. */
  async onBlock(head: bigint): Promise<void> {
    if (this.monitoring || this.state === 'stopped') return;
    this.monitoring = true;
    try {
      if (this.pending.size > 0) await this.follow(head);
      else this.confirmed = undefined;
    } catch (err) {
      this.log.warn({ err: shortReason(err) }, 'following settlement transactions failed; retrying at the next block');
    } finally {
      this.monitoring = false;
    }
  }

  private async follow(head: bigint): Promise<void> {
    const { publicClient } = this.chain;
    const confirmed = await publicClient.getTransactionCount({ address: this.address, blockTag: 'latest' });
    if (!this.confirmed || this.confirmed.nonce !== confirmed) this.confirmed = { nonce: confirmed, since: head };
    const entries = [...this.pending.values()].sort((a, b) => a.nonce - b.nonce);
    for (const entry of entries) {
      const receipt = await this.firstReceipt(entry);
      if (receipt && head - receipt.blockNumber + 1n >= BigInt(this.options.confirmations ?? 1)) { this.settle(entry, receipt); continue; }
      if (receipt) continue; // mined, not yet as deep as SETTLEMENT_CONFIRMATIONS asks
      if (entry.nonce < confirmed) {
        // The nonce is used, and by none of our hashes. A node that has the block but not yet the receipt
        // gets one more round before we call it replaced.
        if (++entry.consumedChecks < 2) continue;
        this.options.metrics.settlementTransactions.inc({ event: 'replaced', relayer: this.address });
        this.log.warn({ nonce: entry.nonce, txHashes: entry.sends.map((s) => s.hash), ...entry.label }, 'settlement transaction replaced: its nonce was used by another transaction');
        entry.resolve({ kind: 'replaced' });
        continue;
      }
      const waited = entry.sentAt === undefined ? 0n : head - entry.sentAt;
      // Without a valid lease another process may own the account's next nonces: follow, never send.
      if (waited < 1n || !this.options.mayRun()) continue;
      if (!(await this.knownToNode(entry))) await this.rebroadcast(entry, head);
      else if (waited >= BigInt(this.options.stuckBlocks)) await this.bump(entry, head);
    }
    await this.fillGap(head, confirmed);
  }

  private async firstReceipt(entry: Pending): Promise<TransactionReceipt | undefined> {
    const receipts = await Promise.all(entry.sends.map((s) => this.chain.publicClient.getTransactionReceipt({ hash: s.hash }).catch(() => undefined)));
    return receipts.find((r) => r !== undefined);
  }

  private async knownToNode(entry: Pending): Promise<boolean> {
    const found = await Promise.all(entry.sends.map((s) => this.chain.publicClient.getTransaction({ hash: s.hash }).then(() => true, () => false)));
    return found.some(Boolean);
  }

  private async rebroadcast(entry: Pending, head: bigint): Promise<void> {
    const last = entry.sends[entry.sends.length - 1]!;
    try {
      await this.chain.publicClient.sendRawTransaction({ serializedTransaction: last.raw });
    } catch (err) {
      const refusal = classifySendError(err);
      if (refusal === 'fee') { await this.bump(entry, head); return; }
      if (refusal !== 'known' && refusal !== 'nonce') this.log.warn({ nonce: entry.nonce, err: shortReason(err) }, 'rebroadcast refused');
      return;
    }
    entry.sentAt = head;
    this.options.metrics.settlementTransactions.inc({ event: 'rebroadcast', relayer: this.address });
    this.log.warn({ nonce: entry.nonce, txHash: last.hash, ...entry.label }, 'settlement transaction was unknown to the node; broadcast again');
  }

  /** Same nonce, same call, a fee at least 25% higher (and at least what the chain asks now). */
  private async bump(entry: Pending, head: bigint): Promise<void> {
    const last = entry.sends[entry.sends.length - 1]!.fees;
    const fees = await this.bumpedFees(last);
    if (!fees) {
      entry.sentAt = head; // at the ceiling: wait another round rather than ask every block
      this.log.warn({ nonce: entry.nonce, maxFeePerGas: last.maxFeePerGas.toString(), ceiling: this.options.maxFeePerGas?.toString() }, 'settlement transaction stuck at the fee ceiling (RELAYER_MAX_FEE_GWEI)');
      return;
    }
    const raw = await this.sign(entry.tx, entry.nonce, fees);
    const hash = keccak256(raw);
    try {
      await this.chain.publicClient.sendRawTransaction({ serializedTransaction: raw });
    } catch (err) {
      const refusal = classifySendError(err);
      if (refusal !== 'ambiguous' && refusal !== 'known') {
        // "nonce too low": a send of this nonce was mined meanwhile; the next round finds its receipt.
        if (refusal === 'nonce') this.log.info({ nonce: entry.nonce, ...entry.label }, 'fee bump not needed: the nonce was mined meanwhile');
        else this.log.warn({ nonce: entry.nonce, reason: refusal, err: shortReason(err), ...entry.label }, 'fee bump refused');
        entry.sentAt = head;
        return;
      }
    }
    entry.sends.push({ hash, raw, fees });
    entry.sentAt = head;
    this.options.metrics.settlementTransactions.inc({ event: 'fee_bumped', relayer: this.address });
    this.log.warn({ nonce: entry.nonce, txHash: hash, replaces: entry.sends[entry.sends.length - 2]!.hash, maxFeePerGas: fees.maxFeePerGas.toString(), ...entry.label }, 'settlement transaction stuck; resent with a higher fee');
  }

  /**
   * Nonces below our lowest one that stay unmined belong to a previous holder of the account (a process
   * that died with a transaction the chain will not take at its fee). They hold every transaction of ours
   * back, so after `stuckBlocks` without progress the lowest one is replaced by a zero-value transfer to
   * ourselves. Whatever that previous transaction carried stays open and reconciliation settles it again.
   */
  private async fillGap(head: bigint, confirmed: number): Promise<void> {
    if (this.state !== 'active' || !this.options.mayRun()) return;
    const lowest = Math.min(...this.pending.keys());
    if (!(lowest > confirmed) || this.pending.has(confirmed)) return;
    if (head - this.confirmed!.since < BigInt(this.options.stuckBlocks)) return;
    const now = await this.currentFees(true);
    const fees = { maxFeePerGas: now.maxFeePerGas * 2n, maxPriorityFeePerGas: now.maxPriorityFeePerGas * 2n + 1n };
    const tx: TxRequest = { to: this.address, data: '0x', gas: GAS_CANCEL };
    const raw = await this.sign(tx, confirmed, fees);
    const hash = keccak256(raw);
    try {
      await this.chain.publicClient.sendRawTransaction({ serializedTransaction: raw });
    } catch (err) {
      this.log.warn({ nonce: confirmed, err: shortReason(err) }, 'could not fill a nonce gap left by a previous holder');
      this.confirmed = { nonce: confirmed, since: head };
      return;
    }
    this.log.warn({ nonce: confirmed, txHash: hash }, 'nonce gap left by a previous holder of this relayer; filled with a cancel transaction');
    this.options.metrics.settlementTransactions.inc({ event: 'gap_filled', relayer: this.address });
    this.confirmed = { nonce: confirmed, since: head };
  }

  /** Re-reads the balance; starves or revives the lane. */
  async refreshBalance(): Promise<void> {
    this.balance = await this.chain.publicClient.getBalance({ address: this.address });
    this.options.metrics.gasBalance.set({ relayer: this.address }, Number(formatEther(this.balance)));
    const needed = this.gasLimit(this.options.reserveGas) * (await this.currentFees(false)).maxFeePerGas;
    if (this.balance < needed) this.starve(`balance ${formatEther(this.balance)} ETH is below ${formatEther(needed)} ETH, one full batch at current fees`);
    else if (this.state === 'starved') {
      this.state = 'active';
      this.problem = undefined;
      this.log.info({ balanceEth: formatEther(this.balance) }, 'relayer has gas again');
    }
  }

  /** Why the lane cannot send, for /ready; undefined when it can. */
  problem: string | undefined;

  private starve(why: string): void {
    this.problem = why;
    if (this.state === 'starved' || this.state === 'stopped') return;
    this.state = 'starved';
    this.log.error({ why }, 'relayer out of gas: no settlements from this account until it is funded');
  }

  private async sign(tx: TxRequest, nonce: number, fees: Fees): Promise<Hex> {
    return this.account.signTransaction({ type: 'eip1559', chainId: this.chain.chainId, to: tx.to, data: tx.data, gas: this.gasLimit(tx.gas), value: tx.value ?? 0n, nonce, ...fees });
  }

  /** A gas amount as this network sends it: scaled by gasLimitPercent (every transaction's limit, and the reserve a lane holds for a batch). */
  private gasLimit(gas: bigint): bigint {
    return gas * BigInt(this.options.gasLimitPercent ?? 100) / 100n;
  }

  /** Fees from the latest block, cached for that block: twice the base fee stays valid through several rising blocks. */
  private async currentFees(refresh: boolean): Promise<Fees> {
    const head = this.clock.latest;
    if (!refresh && this.feeCache && this.feeCache.block === head && Date.now() - this.feeCache.at < 2_000) return this.feeCache.fees;
    const block = await this.chain.publicClient.getBlock({ blockTag: 'latest' });
    const priority = await this.chain.publicClient.estimateMaxPriorityFeePerGas().catch(() => 1_000_000n);
    const base = block.baseFeePerGas ?? 1_000_000_000n;
    let fees: Fees = { maxFeePerGas: base * 2n + priority, maxPriorityFeePerGas: priority };
    const ceiling = this.options.maxFeePerGas;
    if (ceiling !== undefined && fees.maxFeePerGas > ceiling) fees = { maxFeePerGas: ceiling, maxPriorityFeePerGas: priority < ceiling ? priority : ceiling };
    this.feeCache = { block: head, at: Date.now(), fees };
    return fees;
  }

  private async bumpedFees(last: Fees): Promise<Fees | undefined> {
    const now = await this.currentFees(true);
    const priority = max(last.maxPriorityFeePerGas * FEE_BUMP_NUM / FEE_BUMP_DEN + 1n, now.maxPriorityFeePerGas);
    let maxFee = max(last.maxFeePerGas * FEE_BUMP_NUM / FEE_BUMP_DEN + 1n, now.maxFeePerGas, priority);
    const ceiling = this.options.maxFeePerGas;
    if (ceiling !== undefined && maxFee > ceiling) {
      if (ceiling * 10n <= last.maxFeePerGas * 11n) return undefined; // less than 10% above the last: no valid replacement
      maxFee = ceiling;
    }
    return { maxFeePerGas: maxFee, maxPriorityFeePerGas: priority > maxFee ? maxFee : priority };
  }

  private updateGauges(): void {
    this.options.metrics.inFlight.set({ relayer: this.address }, this.pending.size);
  }

  private notifyIdle(): void {
    for (const done of [...this.idle]) done();
  }
}

const max = (...values: bigint[]) => values.reduce((a, b) => (a > b ? a : b));

const messageOf = (err: unknown) => `${(err as { details?: string }).details ?? ''} ${(err as Error)?.message ?? ''}`.toLowerCase();

/** How the node answered a send: known (it has this exact transaction), or why it refused, or no answer we can trust. */
export function classifySendError(err: unknown): 'known' | 'nonce' | 'fee' | 'funds' | 'ambiguous' | 'other' {
  const text = messageOf(err);
  if (/already known|known transaction|already imported|transaction already exists/.test(text)) return 'known';
  if (/nonce too low|nonce too high|replacement transaction underpriced|nonce has already been used|invalid nonce/.test(text)) return 'nonce';
  if (/max fee per gas less than block base fee|fee cap less than block base fee|transaction underpriced|fee too low|underpriced/.test(text)) return 'fee';
  if (/insufficient funds|exceeds transaction sender account balance|outoffunds/.test(text)) return 'funds';
  // The node failed rather than answered (unreachable, timed out, internal error): it may have the transaction.
  if (isAmbiguousSendError(err) || nodeFault(err)) return 'ambiguous';
  return 'other';
}

/**
 * A send whose fate we cannot know (the connection broke or timed out after the node may have taken
 * it), as opposed to a refusal the node answered.
 */
export function isAmbiguousSendError(err: unknown): boolean {
  const name = (err as Error)?.name ?? '';
  return name === 'TimeoutError' || name === 'HttpRequestError' || /timed out|timeout|socket hang up|econnreset|econnrefused|fetch failed|other side closed|network/.test(messageOf(err));
}

export function shortReason(err: unknown): string {
  const e = err as { shortMessage?: string; message?: string; details?: string };
  return (e.shortMessage && e.details ? `${e.shortMessage} ${e.details}` : e.shortMessage ?? e.message ?? String(err)).split('\n')[0]!.slice(0, 300);
}
