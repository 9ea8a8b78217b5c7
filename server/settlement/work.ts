import type { Address, TransactionReceipt } from 'viem';
import type { SettleOutcome, SettlementRequest } from './settler.js';
import type { SentTx, TxRequest } from './relayer-lane.js';

/**
 * One piece of settlement work, as an accepting process hands it to whichever process sends it: a payment
 * to settle (`exact`, `upto`), and later a channel claim or a refund. It travels through the database
 * (mailbox.ts) when the sender is another process, so `data` is plain JSON-like data (dates allowed).
 */
export interface SettlementWork<T = unknown> {
  /** Unique in the deployment (a payment id): the reply is matched by it. */
  id: string;
  /** Which executor runs it (registered by the area that owns the kind: payments registers exact and upto). */
  kind: string;
  /** The relayer that must send it, lower-case (an upto permit names its facilitator); undefined: any relayer. */
  lane?: string;
  data: T;
}

/**
 * How a piece of work ended, as its executor recorded it (`done`: the kind's own result, JSON-like), or
 * that nothing was sent and nothing recorded, so the accepting process may hand it to another relayer or
 * refuse it (`unavailable`).
 */
export type WorkOutcome<R = unknown> = { done: R } | { unavailable: string };

/** What an executor may send with: the batched transfers and single transactions of this process's relayers. */
export interface SendTools {
  /** An EIP-3009 transfer, batched with others into the transaction of the next block (settler.ts). */
  transfer(request: SettlementRequest): Promise<SettleOutcome>;
  /** One transaction from the relayer `address` and no other (throws RelayerUnavailableError if this process cannot). */
  submitFrom(address: Address, tx: TxRequest, label?: Record<string, unknown>): Promise<SentTx>;
  /**
   * Whether everything a previous holder of the relayer `address` sent is mined or gone: a holder that died
   * between broadcasting and recording leaves a transaction waiting (throws RelayerUnavailableError if this
   * process cannot send from it).
   */
  previousHolderSettled(address: Address): Promise<boolean>;
  /** One transaction from the least busy relayer of this process, never batched (throws RelayerUnavailableError if none can send). */
  submit(tx: TxRequest, label?: Record<string, unknown>): Promise<SentTx>;
  /** One transaction from any relayer of this process, waited for until mined. */
  sendTransaction(tx: Omit<TxRequest, 'gas'> & { gas?: bigint }, label?: Record<string, unknown>): Promise<TransactionReceipt>;
}

/**
 * Runs one kind of work on the process that sends it: sends what the chain must do and records what it
 * did (the accepting process only relays the outcome). It must be safe to run twice for one id (a lane
 * taken over after its holder died runs again what that holder may have sent): the chain's own
 * at-most-once (an authorization nonce) and unique inserts keep the second run from moving or recording
 * anything twice.
 */
export type WorkExecutor = (work: SettlementWork, tools: SendTools) => Promise<WorkOutcome>;
