import { decodeFunctionData, getAddress, isAddressEqual, parseEventLogs, type Address, type Hex, type PublicClient } from 'viem';
import type { ChainService } from '../../chain/chain-service.js';
import { usdcAbi } from '../../chain/usdc.js';
import { PERMIT2_ADDRESS, permit2NonceUsed, type Eip2612Permit } from '../../chain/permit2.js';
import { UPTO_PROXY_ADDRESS, uptoProxyAbi } from './upto/evm/chain.js';
import { EXACT_PROXY_ADDRESS, exactProxyAbi } from './exact/evm/chain.js';
import { blockBefore } from '../../chain/authorization-events.js';
import { RelayerUnavailableError, shortReason, type SentTx, type TxRequest } from '../../settlement/relayer-lane.js';
import type { SettleOutcome } from '../../settlement/settler.js';
import type { PaymentDoc } from '../models.js';

// What the schemes settling through an x402 Permit2 proxy share (`upto`, and `exact` with
// assetTransferMethod "permit2"): the buyer's EIP-2612 permit of the eip2612GasSponsoring extension, the
// send of one proxy settlement, and finding the transaction that settled a permit already used.

/** Why an eip2612GasSponsoring permit is refused, in @x402/evm's names. */
export type Eip2612Failure = 'invalid_eip2612_extension_format' | 'eip2612_from_mismatch' | 'eip2612_asset_mismatch' | 'eip2612_spender_not_permit2' | 'eip2612_deadline_expired' | 'permit2_2612_amount_mismatch';

/**
 * The eip2612GasSponsoring extension's permit (specs/extensions/eip2612_gas_sponsoring.md), checked as
 * @x402/evm checks it: from the payer, for the token, to Permit2, not expiring within 6 seconds; and for
 * exactly the permitted amount, which the proxies require. Undefined when the payload carries none:
 * clients echo the 402's declaration ({description, version}), and without the permit's fields there is
 * no permit, as @x402/evm reads it.
 */
export function eip2612PermitOf(extensions: Record<string, unknown> | null | undefined, expected: { payer: Address; token: Address; amount: bigint }, nowSeconds: number): Eip2612Permit | { reason: Eip2612Failure; message: string } | undefined {
  const info = (extensions?.eip2612GasSponsoring as { info?: Record<string, unknown> } | undefined)?.info;
  if (!info || ['from', 'asset', 'spender', 'amount', 'nonce', 'deadline', 'signature'].some((key) => !info[key])) return undefined;
  const text = (key: string) => (typeof info[key] === 'string' ? info[key] as string : '');
  const address = /^0x[0-9a-fA-F]{40}$/;
  const digits = /^\d{1,78}$/;
  if (!address.test(text('from')) || !address.test(text('asset')) || !address.test(text('spender')) || !digits.test(text('amount')) || !digits.test(text('deadline')) || !/^0x[0-9a-fA-F]{130}$/.test(text('signature'))) {
    return { reason: 'invalid_eip2612_extension_format', message: 'the eip2612GasSponsoring extension is malformed' };
  }
  if (!isAddressEqual(text('from') as Address, expected.payer)) return { reason: 'eip2612_from_mismatch', message: `the EIP-2612 permit is from ${text('from')}, not the payer ${expected.payer}` };
  if (!isAddressEqual(text('asset') as Address, expected.token)) return { reason: 'eip2612_asset_mismatch', message: `the EIP-2612 permit is for ${text('asset')}, not ${expected.token}` };
  if (!isAddressEqual(text('spender') as Address, PERMIT2_ADDRESS)) return { reason: 'eip2612_spender_not_permit2', message: `the EIP-2612 permit's spender must be Permit2 (${PERMIT2_ADDRESS})` };
  if (BigInt(text('amount')) !== expected.amount) return { reason: 'permit2_2612_amount_mismatch', message: `the EIP-2612 permit allows ${text('amount')}; it must allow exactly what the Permit2 permit moves at most (upto: its maximum), ${expected.amount}` };
  if (BigInt(text('deadline')) < BigInt(nowSeconds + 6)) return { reason: 'eip2612_deadline_expired', message: 'the EIP-2612 permit has expired' };
  const sig = text('signature');
  return { value: BigInt(text('amount')), deadline: BigInt(text('deadline')), r: `0x${sig.slice(2, 66)}`, s: `0x${sig.slice(66, 130)}`, v: parseInt(sig.slice(130, 132), 16) };
}

/** The EIP-2612 permit a record keeps (eip2612GasSponsoring), if any. */
export function eip2612PermitOfRecord(payment: Pick<PaymentDoc, 'eip2612Permit'>): Eip2612Permit | undefined {
  const p = payment.eip2612Permit;
  return p ? { value: BigInt(p.value), deadline: BigInt(p.deadline), v: p.v, r: p.r as Hex, s: p.s as Hex } : undefined;
}

/** The EIP-2612 permit as a record keeps it. */
export const eip2612PermitRecord = (permit: Eip2612Permit) => ({ ...permit, value: permit.value.toString(), deadline: permit.deadline.toString() });

/**
 * Where a proxy payment whose Permit2 nonce is used moved its money: the record's transaction if it did,
 * else the token's Transfer of the record's amount from the payer to the payee in a transaction sent to
 * the `kind` proxy, searched from `fromBlock`. Undefined: the nonce was used without paying this record
 * (the buyer cancelled it on Permit2).
 */
export async function findProxySettlementTx(chain: ChainService, kind: 'upto' | 'exact', payment: PaymentDoc, fromBlock: bigint): Promise<Hex | undefined> {
  const payer = getAddress(payment.payerAddress);
  const payee = getAddress(payment.recipientAddress);
  const amount = BigInt(payment.amountUsdcRaw);
  const permit = { owner: payer, to: payee, nonce: BigInt(payment.permit2Authorization!.nonce) };
  const paysThis = async (hash: Hex) => (await proxySettlementAmount(chain.publicClient, kind, chain.usdc.address, hash, permit)) === amount;
  if (payment.txHash && await paysThis(payment.txHash as Hex)) return payment.txHash as Hex;
  const logs = await chain.publicClient.getContractEvents({ address: chain.usdc.address, abi: usdcAbi, eventName: 'Transfer', args: { from: payer, to: payee }, fromBlock, toBlock: 'latest' });
  for (const log of logs) if ((log.args as { value: bigint }).value === amount && await paysThis(log.transactionHash)) return log.transactionHash;
  return undefined;
}

/** One proxy settlement to send: its call, how to simulate it and from which relayer it goes. */
export interface ProxySettlement {
  kind: 'upto' | 'exact';
  owner: Address;
  nonce: bigint;
  tx: TxRequest;
  /** The call run as the sender would run it: nothing is sent. */
  simulate(): Promise<{ ok: true } | { ok: false; reason: string; message: string }>;
  /** Hands the transaction to the relayer that must send it (RelayerUnavailableError: this process cannot). */
  submit(tx: TxRequest): Promise<SentTx>;
  /** The record being settled: to find its settlement if the permit was used already. */
  payment?: PaymentDoc;
}

/**
 * Sends one proxy settlement, never batched (the upto proxy accepts only the facilitator the buyer named;
 * an exact one is sent the same way). It is simulated first, so a permit that can no longer settle
 * (allowance withdrawn, funds moved, nonce cancelled) is refused with its reason before any gas is spent.
 * Run again after a lane changed hands, the permit may have been settled already by its last holder: then
 * the answer is that settlement, not a refusal.
 */
export async function sendProxySettlement(chain: ChainService, settlement: ProxySettlement): Promise<SettleOutcome> {
  const simulated = await settlement.simulate();
  if (!simulated.ok) {
    if (settlement.payment && await permit2NonceUsed(chain.publicClient, settlement.owner, settlement.nonce)) {
      const txHash = await findProxySettlementTx(chain, settlement.kind, settlement.payment, await blockBefore(chain, settlement.payment.createdAt));
      if (txHash) return { ok: true, txHash, batchSize: 1 };
    }
    return { ok: false, reason: simulated.reason, message: simulated.message };
  }
  let sent;
  try {
    sent = await settlement.submit(settlement.tx);
  } catch (err) {
    // Nothing reached the chain: the claim may be released and the same payment presented again.
    const message = err instanceof RelayerUnavailableError ? err.message : `the settlement could not be sent: ${shortReason(err)}`;
    return { ok: false, reason: 'relayer_unavailable', message, unavailable: true };
  }
  const fate = await sent.fate;
  if (fate.kind === 'mined' && fate.receipt.status === 'success') return { ok: true, txHash: fate.receipt.transactionHash, batchSize: 1 };
  if (fate.kind === 'mined') {
    // Reverted on chain though the simulation passed: the state changed in between. Replay it for the reason.
    const again = await settlement.simulate().catch(() => undefined);
    const reason = again && !again.ok ? again.reason : 'settle_reverted';
    return { ok: false, reason, message: `the settlement transaction ${fate.receipt.transactionHash} reverted${again && !again.ok ? `: ${again.message}` : ''}`, txHash: fate.receipt.transactionHash };
  }
  // Replaced, or the lane stopped: the chain decides, reconciliation asks it.
  const why = fate.kind === 'replaced' ? 'was replaced by another transaction' : `was not confirmed (${fate.reason})`;
  return { ok: false, reason: 'settle_unconfirmed', message: `the settlement transaction ${sent.hash} ${why}`, txHash: sent.hash, unconfirmed: true };
}

/**
 * What the transaction `hash` moved of `token` from the permit's owner to its payee, if it is a successful
 * settle(WithPermit) of that owner's permit with that Permit2 nonce, sent to the `kind` proxy; undefined
 * for anything else (not mined, reverted, another contract, another permit). The proxies' Settled event
 * carries nothing, and one buyer often pays one seller the same amount twice: only the call tells whose
 * permit it settled.
 */
export async function proxySettlementAmount(client: PublicClient, kind: 'upto' | 'exact', token: Address, hash: Hex, permit: { owner: Address; nonce: bigint; to: Address }): Promise<bigint | undefined> {
  const proxy = kind === 'upto' ? UPTO_PROXY_ADDRESS : EXACT_PROXY_ADDRESS;
  const [receipt, tx] = await Promise.all([client.getTransactionReceipt({ hash }).catch(() => undefined), client.getTransaction({ hash }).catch(() => undefined)]);
  if (!receipt || !tx || receipt.status !== 'success' || !receipt.to || !isAddressEqual(receipt.to, proxy)) return undefined;
  let call: { functionName: string; args?: readonly unknown[] };
  try { call = decodeFunctionData({ abi: kind === 'upto' ? uptoProxyAbi : exactProxyAbi, data: tx.input }); } catch { return undefined; }
  // settleWithPermit's arguments are settle's after the EIP-2612 permit; upto's settle names the amount before the owner.
  const args = call.functionName === 'settle' ? call.args : call.functionName === 'settleWithPermit' ? call.args?.slice(1) : undefined;
  const settled = args?.[0] as { nonce: bigint } | undefined;
  const owner = args?.[kind === 'upto' ? 2 : 1] as Address | undefined;
  if (!settled || !owner || !isAddressEqual(owner, permit.owner) || settled.nonce !== permit.nonce) return undefined;
  const transfers = parseEventLogs({ abi: usdcAbi, logs: receipt.logs.filter((l) => isAddressEqual(l.address, token)), eventName: 'Transfer' });
  return transfers.reduce((sum, t) => {
    const { from, to, value } = t.args as { from: Address; to: Address; value: bigint };
    return isAddressEqual(from, permit.owner) && isAddressEqual(to, permit.to) ? sum + value : sum;
  }, 0n);
}

