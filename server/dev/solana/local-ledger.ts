import { LiteSVM, TransactionMetadata, FailedTransactionMetadata } from 'litesvm';
import {
  getBase58Decoder, getCompiledTransactionMessageDecoder, getTransactionDecoder, lamports,
  type Address, type EncodedAccount, type Transaction,
} from '@solana/kit';

// A Solana ledger in this process: LiteSVM (the real runtime and the SPL programs) with what a validator
// adds around it and LiteSVM leaves out: slots that pass with time, a blockhash per slot that stays valid
// for 150 blocks (LiteSVM itself accepts only its latest one), signature statuses, and a transaction
// processed once. The JSON-RPC server (local-rpc.ts) answers from it.

/** How many blocks a blockhash stays valid, as on Solana (MAX_PROCESSING_AGE). */
export const BLOCKHASH_VALIDITY_BLOCKS = 150;

/** A transaction error as the JSON-RPC API spells it: "BlockhashNotFound", {InstructionError: [2, {Custom: 1}]}. */
export type RpcTransactionError = string | Record<string, unknown>;

export interface LandedTransaction {
  slot: number;
  err: RpcTransactionError | null;
  logs: string[];
  unitsConsumed: number;
  /** The wire transaction, as sent. */
  wire: Uint8Array;
}

export interface SimulationResult { err: RpcTransactionError | null; logs: string[]; unitsConsumed: number }

// LiteSVM's error enums are numbers at run time (TypeScript const enums): their names, in its order.
const transactionErrors = 'AccountInUse AccountLoadedTwice AccountNotFound ProgramAccountNotFound InsufficientFundsForFee InvalidAccountForFee AlreadyProcessed BlockhashNotFound CallChainTooDeep MissingSignatureForFee InvalidAccountIndex SignatureFailure InvalidProgramForExecution SanitizeFailure ClusterMaintenance AccountBorrowOutstanding WouldExceedMaxBlockCostLimit UnsupportedVersion InvalidWritableAccount WouldExceedMaxAccountCostLimit WouldExceedAccountDataBlockLimit TooManyAccountLocks AddressLookupTableNotFound InvalidAddressLookupTableOwner InvalidAddressLookupTableData InvalidAddressLookupTableIndex InvalidRentPayingAccount WouldExceedMaxVoteCostLimit WouldExceedAccountDataTotalLimit MaxLoadedAccountsDataSizeExceeded ResanitizationNeeded InvalidLoadedAccountsDataSizeLimit UnbalancedTransaction ProgramCacheHitMaxLimit CommitCancelled'.split(' ');
const instructionErrors = 'GenericError InvalidArgument InvalidInstructionData InvalidAccountData AccountDataTooSmall InsufficientFunds IncorrectProgramId MissingRequiredSignature AccountAlreadyInitialized UninitializedAccount UnbalancedInstruction ModifiedProgramId ExternalAccountLamportSpend ExternalAccountDataModified ReadonlyLamportChange ReadonlyDataModified DuplicateAccountIndex ExecutableModified RentEpochModified NotEnoughAccountKeys AccountDataSizeChanged AccountNotExecutable AccountBorrowFailed AccountBorrowOutstanding DuplicateAccountOutOfSync InvalidError ExecutableDataModified ExecutableLamportChange ExecutableAccountNotRentExempt UnsupportedProgramId CallDepth MissingAccount ReentrancyNotAllowed MaxSeedLengthExceeded InvalidSeeds InvalidRealloc ComputationalBudgetExceeded PrivilegeEscalation ProgramEnvironmentSetupFailure ProgramFailedToComplete ProgramFailedToCompile Immutable IncorrectAuthority AccountNotRentExempt InvalidAccountOwner ArithmeticOverflow UnsupportedSysvar IllegalOwner MaxAccountsDataAllocationsExceeded MaxAccountsExceeded MaxInstructionTraceLengthExceeded BuiltinProgramsMustConsumeComputeUnits'.split(' ');

/** LiteSVM's error object in the RPC API's JSON form. */
export function rpcError(err: unknown): RpcTransactionError {
  if (typeof err === 'number') return transactionErrors[err] ?? `TransactionError${err}`;
  if (err && typeof err === 'object') {
    const e = err as { index?: number; err?: () => unknown; accountIndex?: number; constructor: { name: string } };
    if (typeof e.err === 'function' && typeof e.index === 'number') {
      const inner = e.err();
      const detail = typeof inner === 'number' ? (instructionErrors[inner] ?? `InstructionError${inner}`)
        : inner && typeof (inner as { code?: unknown }).code === 'number' ? { Custom: (inner as { code: number }).code }
          : String(inner);
      return { InstructionError: [e.index, detail] };
    }
    if (typeof e.accountIndex === 'number') return { [e.constructor.name.replace(/^TransactionError/, '')]: { account_index: e.accountIndex } };
    if (typeof e.index === 'number') return { DuplicateInstruction: e.index };
  }
  return String(err);
}

const transactionDecoder = getTransactionDecoder();
const messageDecoder = getCompiledTransactionMessageDecoder();
const base58 = getBase58Decoder();

/** The transaction's id: its first signature (the fee payer's), base58. */
export function signatureOf(tx: Transaction): string {
  const first = Object.values(tx.signatures)[0];
  return first ? base58.decode(first) : '';
}

export class LocalLedger {
  readonly svm: LiteSVM;
  private slotNow = 1;
  /** Blockhash -> the last block height it is valid at. */
  private readonly blockhashes = new Map<string, number>();
  private latest: { blockhash: string; lastValidBlockHeight: number };
  private readonly landed = new Map<string, LandedTransaction>();
  private timer: NodeJS.Timeout | undefined;
  private transactionCount = 0;
  /** Transactions sent in this slot, landing when it closes (landAtSlot). */
  private queued: Uint8Array[] = [];

  /**
   * `landAtSlot`: a sent transaction lands when its slot closes (every `slotMs`, as on Solana, where a
   * leader packs a block per slot), its status visible only then; otherwise it lands on arrival, the
   * instant a test wants.
   */
  constructor(private readonly options: { landAtSlot?: boolean } = {}) {
    // Blockhashes are checked here (150 blocks, as on Solana); LiteSVM alone would accept its latest only.
    this.svm = new LiteSVM().withBlockhashCheck(false).withTransactionHistory(0n);
    this.latest = this.newBlockhash();
  }

  /** Slots pass every `slotMs` (400 on Solana): each has a new blockhash, and old ones expire. */
  startClock(slotMs: number): void {
    this.timer = setInterval(() => this.advance(1), slotMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** Moves `slots` slots ahead (a test expiring a blockhash moves 151); the closing slot's transactions land first. */
  advance(slots: number): void {
    const closing = this.queued;
    this.queued = [];
    for (const wire of closing) this.process(wire);
    this.slotNow += slots;
    this.svm.warpToSlot(BigInt(this.slotNow));
    this.latest = this.newBlockhash();
    for (const [hash, lastValid] of this.blockhashes) if (lastValid < this.slotNow) this.blockhashes.delete(hash);
  }

  private newBlockhash() {
    this.svm.expireBlockhash();
    const blockhash = this.svm.latestBlockhash();
    const lastValidBlockHeight = this.slotNow + BLOCKHASH_VALIDITY_BLOCKS;
    this.blockhashes.set(blockhash, lastValidBlockHeight);
    return { blockhash, lastValidBlockHeight };
  }

  get slot(): number { return this.slotNow; }
  /** One block per slot here: the block height is the slot. */
  get blockHeight(): number { return this.slotNow; }
  get transactions(): number { return this.transactionCount; }

  latestBlockhash(): { blockhash: string; lastValidBlockHeight: number } {
    return this.latest;
  }

  isBlockhashValid(blockhash: string): boolean {
    return (this.blockhashes.get(blockhash) ?? -1) >= this.slotNow;
  }

  account(address: Address): EncodedAccount | null {
    const found = this.svm.getAccount(address);
    return found.exists ? found : null;
  }

  setAccount(account: EncodedAccount): void {
    this.svm.setAccount(account);
  }

  balance(address: Address): bigint {
    return this.svm.getBalance(address) ?? 0n;
  }

  airdrop(to: Address, amount: bigint): string {
    const result = this.svm.airdrop(to, lamports(amount));
    if (!result || result instanceof FailedTransactionMetadata) throw new Error(`airdrop failed: ${result ? JSON.stringify(rpcError(result.err())) : 'no result'}`);
    return base58.decode(result.signature());
  }

  decode(wire: Uint8Array): Transaction {
    return transactionDecoder.decode(wire);
  }

  /** Why a transaction cannot be processed now, before running it; undefined: it may be. */
  private preflight(tx: Transaction): RpcTransactionError | undefined {
    const message = messageDecoder.decode(tx.messageBytes);
    if (!this.isBlockhashValid(message.lifetimeToken)) return 'BlockhashNotFound';
    if (this.landed.has(signatureOf(tx))) return 'AlreadyProcessed';
    return undefined;
  }

  /** Runs the transaction against the current state, changing nothing. */
  simulate(tx: Transaction, options: { sigVerify: boolean; replaceRecentBlockhash: boolean }): SimulationResult {
    if (!options.replaceRecentBlockhash) {
      const refused = this.preflight(tx);
      if (refused) return { err: refused, logs: [], unitsConsumed: 0 };
    }
    this.svm.withSigverify(options.sigVerify);
    try {
      const result = this.svm.simulateTransaction(tx);
      if (result instanceof FailedTransactionMetadata) return { err: rpcError(result.err()), logs: result.meta().logs(), unitsConsumed: Number(result.meta().computeUnitsConsumed()) };
      const meta = result.meta();
      return { err: null, logs: meta.logs(), unitsConsumed: Number(meta.computeUnitsConsumed()) };
    } finally {
      this.svm.withSigverify(true);
    }
  }

  /**
   * Processes a transaction as a leader would: one with an expired or unknown blockhash, or one already
   * processed, is dropped (undefined) and never lands; any other lands in this slot, failed or not.
   */
  process(wire: Uint8Array): { signature: string; dropped?: RpcTransactionError; landed?: LandedTransaction } {
    const tx = this.decode(wire);
    const signature = signatureOf(tx);
    const refused = this.preflight(tx);
    if (refused) return { signature, dropped: refused };
    const result = this.svm.sendTransaction(tx);
    const meta: TransactionMetadata = result instanceof FailedTransactionMetadata ? result.meta() : result;
    const landed: LandedTransaction = {
      slot: this.slotNow, err: result instanceof FailedTransactionMetadata ? rpcError(result.err()) : null,
      logs: meta.logs(), unitsConsumed: Number(meta.computeUnitsConsumed()), wire,
    };
    this.landed.set(signature, landed);
    this.transactionCount += 1;
    return { signature, landed };
  }

  /** A transaction sent to the leader: landed now, or queued for the slot's close (landAtSlot). */
  submit(wire: Uint8Array): { signature: string } {
    if (!this.options.landAtSlot) return this.process(wire);
    this.queued.push(wire);
    return { signature: signatureOf(this.decode(wire)) };
  }

  status(signature: string): LandedTransaction | undefined {
    return this.landed.get(signature);
  }
}
