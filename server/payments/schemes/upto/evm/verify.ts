import { encodeFunctionData, isAddressEqual, type Address, type Hex } from 'viem';
import { toCaip2Network, type UptoPaymentPayloadV2, type UptoReason } from 'agentgate-x402-wire';
import { balanceOf } from '../../../../chain/usdc.js';
import { permit2Allowance, permit2NonceUsed, PERMIT2_ADDRESS, type Eip2612Permit } from '../../../../chain/permit2.js';
import { UPTO_PROXY_ADDRESS, uptoPermitOf, uptoProxyAbi, uptoSettleArgs, uptoSettleWithPermitArgs, uptoTypedData, type UptoPermit } from './chain.js';
import type { ChainService } from '../../../../chain/chain-service.js';
import { chainUnavailable, revertName, signedBy } from '../../chain-checks.js';
import { eip2612PermitOf } from '../../permit2-proxy.js';
import { nodeFault } from '../../../../chain/rpc-fault.js';
import { shortReason } from '../../../../settlement/relayer-lane.js';

/**
 * Verification of an x402 `upto` payment (specs/schemes/upto/scheme_upto_evm.md, "Verification Logic"):
 * the Permit2 witness signature, the buyer's allowance to Permit2 (412 when missing: the buyer must
 * approve Permit2 once), the balance, the permitted maximum against the requirements, the time window,
 * network, asset, spender, payee and facilitator, then a simulation of the settlement for the whole
 * maximum from the facilitator account. Cheapest checks first; read-only.
 */

/** `permit2612`: the allowance comes with the payment (eip2612GasSponsoring), so settlement uses settleWithPermit. */
export type UptoVerified = { ok: true; payer: Address; permit: UptoPermit; signature: Hex; permit2612?: Eip2612Permit };
export type UptoRefused = { ok: false; reason: UptoReason; message: string };

export interface UptoTerms {
  payTo: Address;
  /** The most the seller may charge: the requirements' amount at verify time. */
  maxAmount: bigint;
}

const refuse = (reason: UptoReason, message: string): UptoRefused => ({ ok: false, reason, message });

export async function verifyUptoPayment(
  payload: UptoPaymentPayloadV2,
  terms: UptoTerms,
  chain: ChainService,
  facilitators: readonly Address[],
  options: { nowSeconds: number; marginSeconds: number },
): Promise<UptoVerified | UptoRefused> {
  const accepted = payload.accepted;
  if (toCaip2Network(accepted.network) !== chain.caip2) return refuse('network_mismatch', `payment is for network ${accepted.network}; this facilitator settles on ${chain.caip2}`);
  const permit = uptoPermitOf(payload.payload.permit2Authorization);
  const signature = payload.payload.signature as Hex;
  if (!isAddressEqual(accepted.asset as Address, chain.usdc.address) || !isAddressEqual(permit.token, chain.usdc.address)) {
    return refuse('asset_mismatch', `the permit is for token ${permit.token}; this facilitator settles USDC at ${chain.usdc.address}`);
  }
  if (!isAddressEqual(permit.spender, UPTO_PROXY_ADDRESS)) return refuse('invalid_spender', `the permit's spender is ${permit.spender}, not the x402 upto proxy ${UPTO_PROXY_ADDRESS}`);
  if (!isAddressEqual(permit.to, terms.payTo)) return refuse('recipient_mismatch', `the permit pays ${permit.to}, not the seller ${terms.payTo}`);
  if (!facilitators.some((f) => isAddressEqual(f, permit.facilitator))) {
    return refuse('facilitator_mismatch', `the permit names facilitator ${permit.facilitator}; this facilitator settles from ${facilitators.join(', ')} (GET /v0/x402/supported)`);
  }
  const { nowSeconds, marginSeconds } = options;
  // Settlement takes a block or two (and, after a handler, the handler's time): a permit about to expire would revert.
  if (permit.deadline <= BigInt(nowSeconds + marginSeconds)) return refuse('authorization_expired', `the permit expired (deadline ${permit.deadline})`);
  if (permit.validAfter > BigInt(nowSeconds)) return refuse('authorization_not_yet_valid', `the permit is valid only after ${permit.validAfter}`);
  if (permit.maxAmount !== terms.maxAmount) {
    return refuse('amount_mismatch', `the permit allows at most ${permit.maxAmount} atomic units; the requirements' maximum is ${terms.maxAmount}`);
  }

  if (!(await signedBy(chain, permit.from, { ...uptoTypedData(permit, chain.chainId), signature }))) return refuse('invalid_signature', 'the permit is not signed by its from address for Permit2 on this chain');

  const [used, allowance, balance] = await Promise.all([
    permit2NonceUsed(chain.publicClient, permit.from, permit.nonce),
    permit2Allowance(chain.publicClient, chain.usdc.address, permit.from),
    balanceOf({ client: chain.publicClient, token: chain.usdc.address, account: permit.from }),
  ]).catch((err) => { throw chainUnavailable(err); });
  if (used) return refuse('nonce_already_used', 'this permit\'s Permit2 nonce was already used or cancelled');
  // Without the allowance, the spec's EIP-2612 route: the buyer's signed USDC permit for Permit2 rides in
  // the payload's eip2612GasSponsoring extension and is submitted with the settlement.
  const permit2612 = allowance < permit.maxAmount ? eip2612PermitOf(payload.extensions, { payer: permit.from, token: chain.usdc.address, amount: permit.maxAmount }, options.nowSeconds) : undefined;
  if (permit2612 && 'reason' in permit2612) return refuse('invalid_eip2612_permit', permit2612.message);
  if (allowance < permit.maxAmount && !permit2612) {
    return refuse('permit2_allowance_required', `the payer allows Permit2 (${PERMIT2_ADDRESS}) ${allowance} atomic units of USDC; ${permit.maxAmount} are needed: approve Permit2 once, then pay again`);
  }
  if (balance < permit.maxAmount) return refuse('insufficient_funds', `the payer holds ${balance} atomic units; the permit's maximum is ${permit.maxAmount}`);

  // The worst case, as the facilitator would send it: the whole maximum, from the facilitator account.
  const simulated = await simulateUptoSettle(chain, permit, permit.maxAmount, signature, permit2612);
  if (!simulated.ok) return simulated;
  return { ok: true, payer: permit.from, permit, signature, ...(permit2612 ? { permit2612 } : {}) };
}

/** The settle (or settleWithPermit) call data for charging `amount`. */
export function uptoSettleCalldata(permit: UptoPermit, amount: bigint, signature: Hex, permit2612?: Eip2612Permit): Hex {
  return permit2612
    ? encodeFunctionData({ abi: uptoProxyAbi, functionName: 'settleWithPermit', args: uptoSettleWithPermitArgs(permit2612, permit, amount, signature) })
    : encodeFunctionData({ abi: uptoProxyAbi, functionName: 'settle', args: uptoSettleArgs(permit, amount, signature) });
}

/** Runs the proxy's settle (or settleWithPermit) as a call from the facilitator account: nothing is sent. */
export async function simulateUptoSettle(chain: ChainService, permit: UptoPermit, amount: bigint, signature: Hex, permit2612?: Eip2612Permit): Promise<{ ok: true } | UptoRefused> {
  try {
    await chain.publicClient.call({ account: permit.facilitator, to: UPTO_PROXY_ADDRESS, data: uptoSettleCalldata(permit, amount, signature, permit2612) });
    return { ok: true };
  } catch (err) {
    if (nodeFault(err)) throw chainUnavailable(err);
    const name = revertName(err, uptoProxyAbi, 'settle'); // the proxy's ABI lists Permit2's errors too
    return refuse((name && REVERTS[name]) || 'settle_reverted', `the settlement would revert: ${name ?? shortReason(err)}`);
  }
}

/** The proxy's and Permit2's errors (the published ABIs) to our reason codes. */
const REVERTS: Record<string, UptoReason> = {
  AmountExceedsPermitted: 'settlement_exceeds_amount',
  UnauthorizedFacilitator: 'facilitator_mismatch',
  InvalidSigner: 'invalid_signature',
  InvalidSignature: 'invalid_signature',
  InvalidContractSignature: 'invalid_signature',
  InvalidSignatureLength: 'invalid_signature',
  InvalidNonce: 'nonce_already_used',
  SignatureExpired: 'authorization_expired',
  PaymentTooEarly: 'authorization_not_yet_valid',
};
