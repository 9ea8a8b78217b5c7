import { decodeFunctionData, encodeFunctionData, isAddressEqual, keccak256, parseErc6492Signature, parseTransaction, recoverTransactionAddress, type Address, type Hex } from 'viem';
import { type ExactPermit2PaymentPayloadV2, toCaip2Network } from 'agentgate-x402-wire';
import { balanceOf } from '../../../../chain/usdc.js';
import { erc20AllowanceAbi, permit2Allowance, permit2NonceUsed, PERMIT2_ADDRESS, type Eip2612Permit } from '../../../../chain/permit2.js';
import { EXACT_PROXY_ADDRESS, exactPermitOf, exactProxyAbi, exactSettleArgs, exactTypedData, type ExactPermit } from './chain.js';
import type { ChainService } from '../../../../chain/chain-service.js';
import { nodeFault } from '../../../../chain/rpc-fault.js';
import { shortReason } from '../../../../settlement/relayer-lane.js';
import { chainUnavailable, revertName, signedBy } from '../../chain-checks.js';
import { eip2612PermitOf } from '../../permit2-proxy.js';

/**
 * Verification of an x402 `exact` payment through Permit2 (specs/schemes/exact/scheme_exact_evm.md,
 * "Permit2"; @x402/evm 2.27's exact facilitator for the order of the checks and their reason names): the
 * proxy as spender, the payee, the deadline and validAfter, the amount, the token, the witness signature;
 * then, with the eip2612GasSponsoring extension, its permit checked and the settleWithPermit simulated;
 * with erc20ApprovalGasSponsoring, the signed approve transaction checked and the balance; else the
 * settle simulated. A failed simulation is diagnosed as @x402/evm does (balance, then Permit2 allowance),
 * then by the revert's name. Read-only.
 */

export type ExactPermit2Verified = {
  ok: true; payer: Address; permit: ExactPermit; signature: Hex;
  /** eip2612GasSponsoring: settled with settleWithPermit. */
  permit2612?: Eip2612Permit;
  /** erc20ApprovalGasSponsoring: the buyer's approve(Permit2) transaction, broadcast before the settlement. */
  erc20Approval?: { signedTransaction: Hex };
};
export type ExactPermit2Refused = { ok: false; reason: string; message: string };

const refuse = (reason: string, message: string): ExactPermit2Refused => ({ ok: false, reason, message });

/** The most gas of a buyer's approve transaction the facilitator pays for (@x402/evm's clients sign 70,000). */
export const MAX_SPONSORED_APPROVAL_GAS = 100_000n;
/** The most an approval's fee cap may exceed the network's current fee estimate (clients sign the estimate; fees move between signing and settling). */
const MAX_FEE_OVER_NETWORK = 3n;

export async function verifyExactPermit2Payment(
  payload: ExactPermit2PaymentPayloadV2,
  terms: { payTo: Address; amountAtomic: bigint },
  chain: ChainService,
  options: { nowSeconds: number; marginSeconds: number },
): Promise<ExactPermit2Verified | ExactPermit2Refused> {
  const accepted = payload.accepted;
  if (toCaip2Network(accepted.network) !== chain.caip2) return refuse('network_mismatch', `payment is for network ${accepted.network}; this facilitator settles on ${chain.caip2}`);
  const permit = exactPermitOf(payload.payload.permit2Authorization);
  if (!isAddressEqual(permit.spender, EXACT_PROXY_ADDRESS)) return refuse('invalid_permit2_spender', `the permit's spender is ${permit.spender}, not the x402 exact Permit2 proxy ${EXACT_PROXY_ADDRESS}`);
  if (!isAddressEqual(permit.to, terms.payTo)) return refuse('invalid_permit2_recipient_mismatch', `the permit pays ${permit.to}, not the seller ${terms.payTo}`);
  const { nowSeconds, marginSeconds } = options;
  // Settlement takes a block or two (and, after a handler, the handler's time): a permit about to expire would revert.
  if (permit.deadline < BigInt(nowSeconds + Math.max(6, marginSeconds))) return refuse('permit2_deadline_expired', `the permit expired (deadline ${permit.deadline})`);
  if (permit.validAfter > BigInt(nowSeconds)) return refuse('permit2_not_yet_valid', `the permit is valid only after ${permit.validAfter}`);
  if (permit.amount !== terms.amountAtomic) return refuse('permit2_amount_mismatch', `the permit moves ${permit.amount} atomic units; the price is ${terms.amountAtomic}`);
  if (!isAddressEqual(permit.token, chain.usdc.address)) return refuse('permit2_token_mismatch', `the permit is for token ${permit.token}; this facilitator settles USDC at ${chain.usdc.address}`);
  const signature = payload.payload.signature as Hex;
  if (!(await signedBy(chain, permit.from, { ...exactTypedData(permit, chain.chainId), signature }))) return refuse('invalid_permit2_signature', 'the permit is not signed by its from address for Permit2 on this chain');

  const used = await permit2NonceUsed(chain.publicClient, permit.from, permit.nonce).catch((err) => { throw chainUnavailable(err); });
  if (used) return refuse('permit2_invalid_nonce', 'this permit\'s Permit2 nonce was already used or cancelled');
  const verified: ExactPermit2Verified = { ok: true, payer: permit.from, permit, signature };

  const permit2612 = eip2612PermitOf(payload.extensions, { payer: permit.from, token: chain.usdc.address, amount: permit.amount }, nowSeconds);
  if (permit2612 && 'reason' in permit2612) return refuse(permit2612.reason, permit2612.message);
  if (permit2612) {
    const simulated = await simulateExactSettle(chain, permit, signature, permit2612);
    return simulated.ok ? { ...verified, permit2612 } : diagnose(chain, permit, simulated);
  }

  const approval = await erc20ApprovalOf(payload.extensions, permit, chain);
  if (approval && 'reason' in approval) return approval;
  if (approval) {
    // The approval is not on chain yet, so the settlement cannot be simulated: what must hold for it is checked.
    const [allowance, balance] = await Promise.all([
      permit2Allowance(chain.publicClient, chain.usdc.address, permit.from),
      balanceOf({ client: chain.publicClient, token: chain.usdc.address, account: permit.from }),
    ]).catch((err) => { throw chainUnavailable(err); });
    if (balance < permit.amount) return refuse('permit2_insufficient_balance', `the payer holds ${balance} atomic units; the permit moves ${permit.amount}`);
    // Already approved: nothing to broadcast, the settlement is simulated as any other.
    if (allowance < permit.amount) return { ...verified, erc20Approval: { signedTransaction: approval.signedTransaction } };
  }

  const simulated = await simulateExactSettle(chain, permit, signature);
  return simulated.ok ? verified : diagnose(chain, permit, simulated);
}

/** The settle (or settleWithPermit) call data. An ERC-6492 wrapper is taken off: Permit2 checks the inner signature. */
export function exactSettleCalldata(permit: ExactPermit, signature: Hex, permit2612?: Eip2612Permit): Hex {
  const inner = parseErc6492Signature(signature).signature;
  return permit2612
    ? encodeFunctionData({ abi: exactProxyAbi, functionName: 'settleWithPermit', args: [permit2612, ...exactSettleArgs(permit, inner)] })
    : encodeFunctionData({ abi: exactProxyAbi, functionName: 'settle', args: exactSettleArgs(permit, inner) });
}

/** Runs the proxy's settle (or settleWithPermit) as a call: nothing is sent (anyone may send it). */
export async function simulateExactSettle(chain: ChainService, permit: ExactPermit, signature: Hex, permit2612?: Eip2612Permit): Promise<{ ok: true } | ExactPermit2Refused> {
  try {
    await chain.publicClient.call({ to: EXACT_PROXY_ADDRESS, data: exactSettleCalldata(permit, signature, permit2612) });
    return { ok: true };
  } catch (err) {
    if (nodeFault(err)) throw chainUnavailable(err);
    const name = revertName(err, exactProxyAbi, 'settle');
    return refuse((name && REVERTS[name]) || 'permit2_simulation_failed', `the settlement would revert: ${name ?? shortReason(err)}`);
  }
}

/** A failed simulation, diagnosed as @x402/evm does: the balance, then the Permit2 allowance; else the revert's own reason. */
async function diagnose(chain: ChainService, permit: ExactPermit, simulated: ExactPermit2Refused): Promise<ExactPermit2Refused> {
  const [code, balance, allowance] = await Promise.all([
    chain.publicClient.getCode({ address: EXACT_PROXY_ADDRESS }),
    balanceOf({ client: chain.publicClient, token: chain.usdc.address, account: permit.from }),
    permit2Allowance(chain.publicClient, chain.usdc.address, permit.from),
  ]).catch((err) => { throw chainUnavailable(err); });
  if (!code || code === '0x') return refuse('permit2_proxy_not_deployed', `no x402 exact Permit2 proxy at ${EXACT_PROXY_ADDRESS} on this chain`);
  if (balance < permit.amount) return refuse('permit2_insufficient_balance', `the payer holds ${balance} atomic units; the permit moves ${permit.amount}`);
  if (allowance < permit.amount) {
    return refuse('permit2_allowance_required', `the payer allows Permit2 (${PERMIT2_ADDRESS}) ${allowance} atomic units of USDC; ${permit.amount} are needed: approve Permit2 once, or pay with a gas sponsoring extension the 402 offers`);
  }
  return simulated;
}

/** Permit2's and the proxy's errors (the published ABIs) to @x402/evm's reason names. */
const REVERTS: Record<string, string> = {
  InvalidSigner: 'invalid_permit2_signature',
  InvalidSignature: 'invalid_permit2_signature',
  InvalidContractSignature: 'invalid_permit2_signature',
  InvalidSignatureLength: 'invalid_permit2_signature',
  SignatureExpired: 'permit2_deadline_expired',
  InvalidNonce: 'permit2_invalid_nonce',
  PaymentTooEarly: 'permit2_payment_too_early',
  InvalidAmount: 'permit2_invalid_amount',
  InvalidDestination: 'permit2_invalid_destination',
  InvalidOwner: 'permit2_invalid_owner',
  Permit2612AmountMismatch: 'permit2_2612_amount_mismatch',
};

const APPROVE_SELECTOR = '0x095ea7b3';

/**
 * The erc20ApprovalGasSponsoring extension's signed transaction (specs/extensions/erc20_gas_sponsoring.md),
 * checked as @x402/evm checks it (format, from, asset, spender, then the transaction: target, selector,
 * spender, signer), and as the spec asks beyond that: signed for this chain, with the payer's current
 * nonce, fees that match the network's (at least the base fee, at most 3 times its estimate) and at most
 * MAX_SPONSORED_APPROVAL_GAS (the facilitator funds its gas).
 * Undefined when the payload carries none.
 */
async function erc20ApprovalOf(extensions: Record<string, unknown> | null | undefined, permit: ExactPermit, chain: ChainService): Promise<{ signedTransaction: Hex } | ExactPermit2Refused | undefined> {
  const info = (extensions?.erc20ApprovalGasSponsoring as { info?: Record<string, unknown> } | undefined)?.info;
  if (!info || ['from', 'asset', 'spender', 'amount', 'signedTransaction', 'version'].some((key) => !info[key])) return undefined;
  const text = (key: string) => (typeof info[key] === 'string' ? info[key] as string : '');
  const address = /^0x[0-9a-fA-F]{40}$/;
  if (!address.test(text('from')) || !address.test(text('asset')) || !address.test(text('spender')) || !/^\d{1,78}$/.test(text('amount'))
    || !/^0x[0-9a-fA-F]+$/.test(text('signedTransaction')) || !/^[0-9]+(\.[0-9]+)*$/.test(text('version'))) {
    return refuse('invalid_erc20_approval_extension_format', 'the erc20ApprovalGasSponsoring extension is malformed');
  }
  if (!isAddressEqual(text('from') as Address, permit.from)) return refuse('erc20_approval_from_mismatch', `the approval is from ${text('from')}, not the payer ${permit.from}`);
  if (!isAddressEqual(text('asset') as Address, chain.usdc.address)) return refuse('erc20_approval_asset_mismatch', `the approval is for ${text('asset')}, not ${chain.usdc.address}`);
  if (!isAddressEqual(text('spender') as Address, PERMIT2_ADDRESS)) return refuse('erc20_approval_spender_not_permit2', `the approval's spender must be Permit2 (${PERMIT2_ADDRESS})`);
  const signedTransaction = text('signedTransaction') as Hex;
  let tx;
  try { tx = parseTransaction(signedTransaction); } catch { return refuse('erc20_approval_tx_parse_failed', 'the signed approval transaction could not be parsed'); }
  if (!tx.to || !isAddressEqual(tx.to, chain.usdc.address)) return refuse('erc20_approval_tx_wrong_target', `the approval transaction calls ${tx.to ?? 'nothing'}, not ${chain.usdc.address}`);
  if (!(tx.data ?? '0x').startsWith(APPROVE_SELECTOR)) return refuse('erc20_approval_tx_wrong_selector', 'the approval transaction does not call approve()');
  let spender: Address;
  try { spender = decodeFunctionData({ abi: erc20AllowanceAbi, data: tx.data! }).args[0] as Address; } catch { return refuse('erc20_approval_tx_invalid_calldata', 'the approval transaction\'s approve() call data could not be decoded'); }
  if (!isAddressEqual(spender, PERMIT2_ADDRESS)) return refuse('erc20_approval_tx_wrong_spender', `the approval transaction approves ${spender}, not Permit2`);
  let signer: Address;
  try { signer = await recoverTransactionAddress({ serializedTransaction: signedTransaction as never }); } catch { return refuse('erc20_approval_tx_invalid_signature', 'the approval transaction\'s signer could not be recovered'); }
  if (!isAddressEqual(signer, permit.from)) return refuse('erc20_approval_tx_signer_mismatch', `the approval transaction is signed by ${signer}, not the payer ${permit.from}`);

  if (tx.chainId !== chain.chainId) return refuse('erc20_approval_tx_wrong_chain', `the approval transaction is signed for chain ${tx.chainId ?? 'none'}, not ${chain.chainId}`);
  if (tx.gas === undefined || tx.gas > MAX_SPONSORED_APPROVAL_GAS) return refuse('erc20_approval_tx_gas_too_high', `the approval transaction asks for ${tx.gas ?? 'unbounded'} gas; the facilitator funds at most ${MAX_SPONSORED_APPROVAL_GAS}`);
  const [nonce, block, fees] = await Promise.all([
    chain.publicClient.getTransactionCount({ address: permit.from, blockTag: 'pending' }),
    chain.publicClient.getBlock({ blockTag: 'latest' }),
    chain.publicClient.estimateFeesPerGas(),
  ]).catch((err) => { throw chainUnavailable(err); });
  if (tx.nonce !== nonce) return refuse('erc20_approval_tx_nonce_mismatch', `the approval transaction has nonce ${tx.nonce}; the payer's next nonce is ${nonce}`);
  const maxFee = tx.maxFeePerGas ?? tx.gasPrice ?? 0n;
  if (block.baseFeePerGas !== null && block.baseFeePerGas !== undefined && maxFee < block.baseFeePerGas) {
    return refuse('erc20_approval_tx_fee_too_low', `the approval transaction pays at most ${maxFee} wei per gas; the chain's base fee is ${block.baseFeePerGas}`);
  }
  // The facilitator funds gas x fee cap: a fee cap far above the network's price would make it fund far more than the approval costs.
  if (fees.maxFeePerGas !== undefined && maxFee > fees.maxFeePerGas * MAX_FEE_OVER_NETWORK) {
    return refuse('erc20_approval_tx_fee_too_high', `the approval transaction offers up to ${maxFee} wei per gas; the network asks about ${fees.maxFeePerGas}, and the facilitator funds at most ${MAX_FEE_OVER_NETWORK} times that`);
  }
  return { signedTransaction };
}

/** The hash of a signed transaction (what the node will call it). */
export const signedTransactionHash = (signed: Hex): Hex => keccak256(signed);
