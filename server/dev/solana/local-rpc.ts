import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { address, getBase58Decoder, getBase58Encoder, getBase64Decoder, getBase64Encoder, type Address, type EncodedAccount } from '@solana/kit';
import { getMintDecoder, getTokenDecoder, getMintSize, getTokenSize, TOKEN_PROGRAM_ADDRESS } from '@solana-program/token';
import { SOLANA_ADDRESS, type SolanaNetworkInfo } from 'agentgate-x402-wire';
import { type LocalLedger, type RpcTransactionError } from './local-ledger.js';

// The Solana JSON-RPC API over a LocalLedger, for `agentgate dev` and the tests: the methods that
// @solana/kit, @x402/svm's client and facilitator, and our own facilitator and wallet call, in the shapes
// and with the errors of https://solana.com/docs/rpc. Everything is final the moment it lands (one node,
// no forks): every commitment answers the same.
//
//   getHealth getVersion getGenesisHash getSlot getBlockHeight getEpochInfo getLatestBlockhash
//   isBlockhashValid getBalance getAccountInfo getMultipleAccounts getTokenAccountBalance
//   getMinimumBalanceForRentExemption getFeeForMessage simulateTransaction sendTransaction
//   getSignatureStatuses getTransaction requestAirdrop
//
// Encodings: base64 everywhere (base58 too for sendTransaction and simulateTransaction), and jsonParsed
// for SPL Token mints and token accounts (other accounts fall back to base64, as the API does).

const LAMPORTS_PER_SIGNATURE = 5_000;
const MAX_BODY_BYTES = 1 << 20;
const base64 = { encode: getBase64Encoder(), decode: getBase64Decoder() };
const base58 = getBase58Encoder();

class RpcError extends Error {
  constructor(readonly code: number, message: string, readonly data?: unknown) { super(message); }
}

const invalidParams = (message: string) => new RpcError(-32602, `Invalid params: ${message}`);

function addressParam(value: unknown, what = 'address'): Address {
  if (typeof value !== 'string' || !SOLANA_ADDRESS.test(value)) throw invalidParams(`${what} must be a base58 public key`);
  return address(value);
}

function wireParam(value: unknown, encoding: unknown): Uint8Array {
  if (typeof value !== 'string') throw invalidParams('the transaction must be a string');
  try {
    return new Uint8Array(encoding === 'base64' ? base64.encode.encode(value) : base58.encode(value));
  } catch {
    throw invalidParams(`the transaction is not valid ${encoding === 'base64' ? 'base64' : 'base58'}`);
  }
}

/** A token amount as the API gives it. */
function uiAmount(amount: bigint, decimals: number) {
  const whole = amount / 10n ** BigInt(decimals);
  const fraction = (amount % 10n ** BigInt(decimals)).toString().padStart(decimals, '0').replace(/0+$/, '');
  const uiAmountString = fraction ? `${whole}.${fraction}` : `${whole}`;
  return { amount: amount.toString(), decimals, uiAmount: Number(uiAmountString), uiAmountString };
}

export class LocalSolanaRpc {
  private server: Server | undefined;

  constructor(private readonly ledger: LocalLedger, private readonly network: SolanaNetworkInfo) {}

  private context() {
    return { slot: this.ledger.slot, apiVersion: '2.2.0' };
  }

  private decimalsOf(mint: Address): number {
    const account = this.ledger.account(mint);
    if (!account || account.programAddress !== TOKEN_PROGRAM_ADDRESS || account.data.length !== getMintSize()) throw invalidParams('not a token mint');
    return getMintDecoder().decode(account.data).decimals;
  }

  /** An account as getAccountInfo gives it. */
  private accountJson(account: EncodedAccount | null, encoding: unknown) {
    if (!account) return null;
    const base = { executable: account.executable, lamports: Number(account.lamports), owner: account.programAddress, rentEpoch: Number.MAX_SAFE_INTEGER, space: Number(account.space) };
    if (encoding === 'jsonParsed' && account.programAddress === TOKEN_PROGRAM_ADDRESS) {
      if (account.data.length === getMintSize()) {
        const mint = getMintDecoder().decode(account.data);
        const info = { decimals: mint.decimals, freezeAuthority: mint.freezeAuthority.__option === 'Some' ? mint.freezeAuthority.value : null, isInitialized: mint.isInitialized, mintAuthority: mint.mintAuthority.__option === 'Some' ? mint.mintAuthority.value : null, supply: mint.supply.toString() };
        return { ...base, data: { program: 'spl-token', parsed: { type: 'mint', info }, space: account.data.length } };
      }
      if (account.data.length === getTokenSize()) {
        const token = getTokenDecoder().decode(account.data);
        const info = { isNative: token.isNative.__option === 'Some', mint: token.mint, owner: token.owner, state: ['uninitialized', 'initialized', 'frozen'][token.state] ?? 'initialized', tokenAmount: uiAmount(token.amount, this.decimalsOf(token.mint)) };
        return { ...base, data: { program: 'spl-token', parsed: { type: 'account', info }, space: account.data.length } };
      }
    }
    if (encoding === 'base58') return { ...base, data: [getBase58Decoder().decode(account.data), 'base58'] };
    return { ...base, data: [base64.decode.decode(account.data), 'base64'] };
  }

  private statusJson(signature: string) {
    const landed = this.ledger.status(signature);
    if (!landed) return null;
    return { slot: landed.slot, confirmations: null, err: landed.err, status: landed.err ? { Err: landed.err } : { Ok: null }, confirmationStatus: 'finalized' };
  }

  /** One method call; throws RpcError for the error answer. */
  async call(method: string, params: unknown[]): Promise<unknown> {
    const ledger = this.ledger;
    const options = (i: number) => (params[i] && typeof params[i] === 'object' ? params[i] : {}) as Record<string, unknown>;
    switch (method) {
      case 'getHealth': return 'ok';
      case 'getVersion': return { 'solana-core': '2.2.0', 'feature-set': 0 };
      case 'getGenesisHash': return this.network.genesisHash;
      case 'getSlot': return ledger.slot;
      case 'getBlockHeight': return ledger.blockHeight;
      case 'getEpochInfo': return { absoluteSlot: ledger.slot, blockHeight: ledger.blockHeight, epoch: 0, slotIndex: ledger.slot, slotsInEpoch: 432_000, transactionCount: ledger.transactions };
      case 'getLatestBlockhash': return { context: this.context(), value: ledger.latestBlockhash() };
      case 'isBlockhashValid': {
        if (typeof params[0] !== 'string') throw invalidParams('blockhash must be a string');
        return { context: this.context(), value: ledger.isBlockhashValid(params[0]) };
      }
      case 'getBalance': return { context: this.context(), value: Number(ledger.balance(addressParam(params[0]))) };
      case 'getAccountInfo': return { context: this.context(), value: this.accountJson(ledger.account(addressParam(params[0])), options(1).encoding) };
      case 'getMultipleAccounts': {
        if (!Array.isArray(params[0]) || params[0].length > 100) throw invalidParams('a list of at most 100 addresses');
        return { context: this.context(), value: params[0].map((a) => this.accountJson(ledger.account(addressParam(a)), options(1).encoding)) };
      }
      case 'getTokenAccountBalance': {
        const account = ledger.account(addressParam(params[0]));
        if (!account || account.programAddress !== TOKEN_PROGRAM_ADDRESS || account.data.length !== getTokenSize()) throw invalidParams('Invalid param: not a Token account');
        const token = getTokenDecoder().decode(account.data);
        return { context: this.context(), value: uiAmount(token.amount, this.decimalsOf(token.mint)) };
      }
      case 'getMinimumBalanceForRentExemption': {
        const size = Number(params[0]);
        if (!Number.isSafeInteger(size) || size < 0) throw invalidParams('the data length must be a non-negative integer');
        return Number(ledger.svm.minimumBalanceForRentExemption(BigInt(size)));
      }
      case 'getFeeForMessage': {
        const message = wireParam(params[0], 'base64');
        return { context: this.context(), value: (message[0]! & 0x80 ? message[1]! : message[0]!) * LAMPORTS_PER_SIGNATURE };
      }
      case 'simulateTransaction': {
        const o = options(1);
        const tx = ledger.decode(wireParam(params[0], o.encoding ?? 'base58'));
        const result = ledger.simulate(tx, { sigVerify: o.sigVerify === true, replaceRecentBlockhash: o.replaceRecentBlockhash === true });
        return { context: this.context(), value: { err: result.err, logs: result.logs, accounts: null, unitsConsumed: result.unitsConsumed, returnData: null, ...(o.replaceRecentBlockhash ? { replacementBlockhash: ledger.latestBlockhash() } : {}), ...(o.innerInstructions ? { innerInstructions: [] } : {}) } };
      }
      case 'sendTransaction': {
        const o = options(1);
        const wire = wireParam(params[0], o.encoding ?? 'base58');
        if (o.skipPreflight !== true) {
          // Preflight: what a node checks before forwarding, answered as its error (-32002).
          const tx = ledger.decode(wire);
          const simulated = ledger.simulate(tx, { sigVerify: true, replaceRecentBlockhash: false });
          if (simulated.err) throw preflightFailure(simulated.err, simulated.logs, simulated.unitsConsumed);
        }
        // Without preflight, a transaction that cannot land (expired blockhash, already processed) is
        // dropped silently: its signature comes back, and it never gets a status.
        return ledger.submit(wire).signature;
      }
      case 'getSignatureStatuses': {
        if (!Array.isArray(params[0]) || params[0].length > 256) throw invalidParams('a list of at most 256 signatures');
        return { context: this.context(), value: params[0].map((s) => (typeof s === 'string' ? this.statusJson(s) : null)) };
      }
      case 'getTransaction': {
        if (typeof params[0] !== 'string') throw invalidParams('signature must be a string');
        const landed = ledger.status(params[0]);
        if (!landed) return null;
        return {
          slot: landed.slot, blockTime: Math.floor(Date.now() / 1000), version: 0,
          meta: { err: landed.err, status: landed.err ? { Err: landed.err } : { Ok: null }, fee: LAMPORTS_PER_SIGNATURE, preBalances: [], postBalances: [], innerInstructions: [], logMessages: landed.logs, computeUnitsConsumed: landed.unitsConsumed, loadedAddresses: { readonly: [], writable: [] }, preTokenBalances: [], postTokenBalances: [], rewards: [] },
          transaction: [base64.decode.decode(landed.wire), 'base64'],
        };
      }
      case 'requestAirdrop': {
        const amount = Number(params[1]);
        if (!Number.isSafeInteger(amount) || amount <= 0) throw invalidParams('lamports must be a positive integer');
        return ledger.airdrop(addressParam(params[0]), BigInt(amount));
      }
      default: throw new RpcError(-32601, 'Method not found');
    }
  }

  /** One JSON-RPC request object into its response object. */
  private async answer(request: unknown): Promise<Record<string, unknown>> {
    const r = request as { jsonrpc?: unknown; id?: unknown; method?: unknown; params?: unknown };
    const id = r && (typeof r.id === 'string' || typeof r.id === 'number') ? r.id : null;
    if (!r || typeof r !== 'object' || r.jsonrpc !== '2.0' || typeof r.method !== 'string') return { jsonrpc: '2.0', id, error: { code: -32600, message: 'Invalid request' } };
    try {
      const params = r.params === undefined ? [] : r.params;
      if (!Array.isArray(params)) throw invalidParams('params must be an array');
      return { jsonrpc: '2.0', id, result: await this.call(r.method, params) };
    } catch (err) {
      if (err instanceof RpcError) return { jsonrpc: '2.0', id, error: { code: err.code, message: err.message, ...(err.data !== undefined ? { data: err.data } : {}) } };
      return { jsonrpc: '2.0', id, error: { code: -32603, message: `Internal error: ${(err as Error).message}` } };
    }
  }

  async listen(port = 0, host = '127.0.0.1'): Promise<string> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      req.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_BODY_BYTES) { res.writeHead(413).end(); req.destroy(); } else chunks.push(chunk);
      });
      req.on('end', () => {
        if (res.writableEnded) return;
        if (req.method !== 'POST') { res.writeHead(405, { Allow: 'POST' }).end(); return; }
        let body: unknown;
        try { body = JSON.parse(Buffer.concat(chunks).toString('utf8')); } catch {
          res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } }));
          return;
        }
        const done = Array.isArray(body) ? Promise.all(body.map((one) => this.answer(one))) : this.answer(body);
        void done.then((out) => res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify(out)));
      });
    });
    await new Promise<void>((resolve, reject) => {
      this.server!.once('error', reject);
      this.server!.listen(port, host, () => { this.server!.off('error', reject); resolve(); });
    });
    return `http://${host}:${(this.server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
  }
}

/** A preflight failure as a node answers it. */
function preflightFailure(err: RpcTransactionError, logs: string[], unitsConsumed: number): RpcError {
  const why = err === 'BlockhashNotFound' ? 'Blockhash not found' : err === 'AlreadyProcessed' ? 'This transaction has already been processed' : typeof err === 'string' ? err : JSON.stringify(err);
  return new RpcError(-32002, `Transaction simulation failed: ${why}`, { err, logs, accounts: null, unitsConsumed, returnData: null });
}

