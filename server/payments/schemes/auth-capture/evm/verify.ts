import { AUTH_CAPTURE, type AuthCapturePaymentPayload, authCaptureReason, type AuthCaptureRefusal, type AuthCaptureRequirements, collectTerms, PERMIT2_TRANSFER_FROM_TYPES } from 'agentgate-x402-wire';
import { isAddressEqual, zeroAddress, type Address, type Hex } from 'viem';
import {
  AUTH_CAPTURE_ESCROW_ADDRESS,
  authCaptureEscrowAbi,
  collectorDataOf,
  collectorFor,
  escrowCalldata,
  escrowOf,
  payerAgnosticNonce,
  paymentInfoHash,
  paymentInfoOf,
  type PaymentInfo,
} from './chain.js';
import type { ChainService } from '../../../../chain/chain-service.js';
import { permit2Allowance, permit2Domain } from '../../../../chain/permit2.js';
import { balanceOf, receiveWithAuthorizationTypes, usdcDomain } from '../../../../chain/usdc.js';
import { nodeFault } from '../../../../chain/rpc-fault.js';
import { shortReason } from '../../../../settlement/relayer-lane.js';
import { chainUnavailable, revertName, signedBy } from '../../chain-checks.js';

/**
 * Verification of an x402 `auth-capture` collect payload (specs/schemes/auth-capture/
 * scheme_auth_capture_evm.md, "Verification", client payment payload), the checks in the spec's order,
 * each refused under the spec's reason. We act as the `"delegated"` operator without a receiver
 * authorizer: the payload settles as `authorize` (paymentFlow `escrow`), the operator must be one of our
 * relayers, and capture, void and refund run out of band through our own API (the seller's key). We take
 * no fee, so an offer must have `minFeeBps` 0 (every capture submits feeAmount 0). Read-only.
 */

export type AuthCaptureVerified = {
  ok: true;
  payer: Address;
  paymentInfo: PaymentInfo;
  /** The escrow's payment id (`getHash`): keys its paymentState, and our claim. */
  hash: Hex;
  method: 'eip3009' | 'permit2';
  collector: Address;
  collectorData: Hex;
};
export type AuthCaptureRefused = { ok: false; reason: string; message: string; payer?: string };

const R = authCaptureReason;
const refuse = (reason: string, message: string, payer?: string): AuthCaptureRefused => ({ ok: false, reason, message, ...(payer ? { payer } : {}) });
const isZero = (address: string | undefined) => address === undefined || isAddressEqual(address as Address, zeroAddress);

export interface VerifyOptions { nowSeconds: number; marginSeconds: number }

/**
 * `requirements`: what the payment must meet (the facilitator API's paymentRequirements, or our seller's
 * own terms); `operators`: the relayers we submit from (the only captureAuthorizer we admit).
 */
export async function verifyAuthCapture(
  payload: AuthCapturePaymentPayload,
  requirements: AuthCaptureRequirements,
  chain: ChainService,
  operators: readonly Address[],
  options: VerifyOptions,
): Promise<AuthCaptureVerified | AuthCaptureRefused> {
  const wire = payload.payload;
  const terms = collectTerms(wire);
  const payer = terms.from;
  const extra = requirements.extra;
  const bound = !isZero(extra.receiverAuthorizer) || !isZero(extra.policy);

  // 1. Shape guard (the two shapes are checked when decoding): saltNonce if and only if the bind is on.
  if (bound !== (wire.saltNonce !== undefined)) return refuse(R('payload_format'), bound ? 'the offer binds the salt (receiverAuthorizer or policy): saltNonce is required' : 'saltNonce is present but the offer does not bind the salt', payer);
  // 2. Scheme match.
  if (requirements.scheme !== AUTH_CAPTURE || payload.accepted.scheme !== AUTH_CAPTURE) return refuse(R('scheme'), 'the scheme is not auth-capture', payer);
  // 3. Network match.
  if (!/^eip155:\d+$/.test(requirements.network)) return refuse('invalid_network', `${requirements.network} is not an eip155:<chainId> network`, payer);
  if (payload.accepted.network !== requirements.network) return refuse(R('network_mismatch'), `the payload was signed for ${payload.accepted.network}, the requirements name ${requirements.network}`, payer);
  if (requirements.network !== chain.caip2) return refuse(R('network_mismatch'), `this facilitator settles on ${chain.caip2}, not ${requirements.network}`, payer);
  // 4. Extra: the canonical escrow, a known payment flow, fee terms the Fee system allows (and ours: none).
  if (!escrowOf(extra.authCaptureEscrow)) return refuse(R('extra'), `authCaptureEscrow ${extra.authCaptureEscrow} is not the escrow this facilitator settles into`, payer);
  const flow = extra.paymentFlow ?? 'escrow';
  if (flow !== 'escrow' && flow !== 'authorization') return refuse(R('unsupported_payment_flow'), `paymentFlow ${flow} is neither escrow nor authorization`, payer);
  if (extra.minFeeBps > extra.maxFeeBps) return refuse(R('extra'), 'minFeeBps is above maxFeeBps', payer);
  if (isZero(extra.feeRecipient) && extra.maxFeeBps !== 0) return refuse(R('extra'), 'a zero feeRecipient requires minFeeBps = maxFeeBps = 0', payer);
  if (extra.minFeeBps !== 0) return refuse(R('extra'), 'this facilitator takes no fee and submits none: minFeeBps must be 0', payer);
  if (!isAddressEqual(requirements.asset as Address, chain.usdc.address)) return refuse(R('extra'), `this facilitator settles USDC at ${chain.usdc.address}, not ${requirements.asset}`, payer);
  // 5. Operator: delegated (the default) to an address we submit from; no policy; no receiver authorizer,
  //    so this is a collect settle and `charge` (the authorization flow) is not relayed.
  const operatorType = extra.operatorType ?? 'delegated';
  if (operatorType !== 'delegated') return refuse(R('unsupported_operator_type'), `operatorType ${operatorType} is not supported: this facilitator is the (delegated) operator itself`, payer);
  if (!operators.some((o) => isAddressEqual(o, extra.captureAuthorizer as Address))) {
    return refuse(R('operator_not_admitted'), `captureAuthorizer ${extra.captureAuthorizer} is not an account this facilitator submits from (${operators.join(', ') || 'none running'}; GET /v0/x402/supported)`, payer);
  }
  if (!isZero(extra.policy)) return refuse(R('policy'), 'a policy operator is not supported', payer);
  if (flow === 'authorization') return refuse(R('missing_receiver_authorizer'), 'charge (paymentFlow authorization) needs a receiver authorizer, which this facilitator does not relay for', payer);
  // 6. Method routing.
  const method = extra.assetTransferMethod ?? 'eip3009';
  if (method !== terms.method) return refuse(R('payload_method_mismatch'), `the offer's assetTransferMethod is ${method}; the payload is ${terms.method}`, payer);
  // 7. Deadline ordering.
  const { nowSeconds, marginSeconds } = options;
  const floor = nowSeconds + Math.max(6, marginSeconds);
  if (extra.refundDeadline < extra.captureDeadline || nowSeconds + requirements.maxTimeoutSeconds > extra.captureDeadline || terms.expiry > BigInt(extra.captureDeadline)) {
    return refuse(R('deadline_ordering'), 'the deadlines must satisfy now + maxTimeoutSeconds <= captureDeadline <= refundDeadline, and the signature must expire by the captureDeadline', payer);
  }
  if (extra.captureDeadline <= floor) return refuse(R('capture_deadline_expired'), `the captureDeadline ${extra.captureDeadline} is past or too close`, payer);
  // 8. Time window.
  if (terms.expiry <= BigInt(floor)) return refuse(R('authorization_expired'), `the authorization expires at ${terms.expiry}: too soon to collect`, payer);
  if ('authorization' in wire && BigInt(wire.authorization.validAfter) > BigInt(nowSeconds)) return refuse(R('authorization_not_yet_valid'), `the authorization is valid only after ${wire.authorization.validAfter}`, payer);
  // 9. Collector match.
  const collector = collectorFor(method);
  const spender = 'permit2Authorization' in wire ? wire.permit2Authorization.spender : wire.authorization.to;
  if (!isAddressEqual(spender as Address, collector)) return refuse(R('token_collector_mismatch'), `the authorization names ${spender}; the ${method} collector is ${collector}`, payer);
  // 10. Token match (Permit2; ERC-3009 binds the token through its domain).
  if ('permit2Authorization' in wire && !isAddressEqual(wire.permit2Authorization.permitted.token as Address, requirements.asset as Address)) {
    return refuse(R('token_mismatch'), `the permit is for ${wire.permit2Authorization.permitted.token}, not ${requirements.asset}`, payer);
  }
  // 11. The client's signature (ECDSA here; ERC-1271 and ERC-6492 asked of the chain).
  const signature = wire.signature as Hex;
  const signed = 'permit2Authorization' in wire
    ? await signedBy(chain, payer as Address, {
      domain: permit2Domain(chain.chainId), primaryType: 'PermitTransferFrom', signature,
      types: PERMIT2_TRANSFER_FROM_TYPES,
      message: { permitted: { token: wire.permit2Authorization.permitted.token as Address, amount: terms.amount }, spender: spender as Address, nonce: terms.nonce, deadline: terms.expiry },
    })
    : await signedBy(chain, payer as Address, {
      domain: usdcDomain({ name: extra.name, version: extra.version, chainId: chain.chainId, verifyingContract: requirements.asset as Address }),
      types: receiveWithAuthorizationTypes, primaryType: 'ReceiveWithAuthorization', signature,
      message: { from: payer as Address, to: spender as Address, value: terms.amount, validAfter: BigInt(wire.authorization.validAfter), validBefore: terms.expiry, nonce: wire.authorization.nonce as Hex },
    });
  if (!signed) return refuse(R('signature'), 'the authorization is not signed by its from address', payer);
  // 12. Amount: authorize collects the full amount.
  if (terms.amount !== BigInt(requirements.amount)) return refuse(R('amount_mismatch'), `the authorization is for ${terms.amount}; the requirements ask ${requirements.amount}`, payer);
  // 13. Nonce match: the PaymentInfo rebuilt from the requirements must be the one signed for.
  const paymentInfo = paymentInfoOf(requirements, wire);
  const expected = payerAgnosticNonce(paymentInfo, chain.chainId);
  if (BigInt(expected) !== terms.nonce) return refuse(R('nonce_mismatch'), 'the signed nonce is not the payment the requirements describe (payee, amount, deadlines, fees or operator differ)', payer);
  // Balance (and Permit2's allowance), then 15. the simulation of the authorize we would send.
  const [balance, allowance] = await Promise.all([
    balanceOf({ client: chain.publicClient, token: chain.usdc.address, account: payer as Address }),
    method === 'permit2' ? permit2Allowance(chain.publicClient, chain.usdc.address, payer as Address) : Promise.resolve(terms.amount),
  ]).catch((err) => { throw chainUnavailable(err); });
  if (balance < terms.amount) return refuse(R('insufficient_balance'), `the payer holds ${balance}; ${terms.amount} are needed`, payer);
  if (allowance < terms.amount) return refuse(R('insufficient_balance'), `the payer allows Permit2 ${allowance}; ${terms.amount} are needed`, payer);
  const collectorData = collectorDataOf(signature);
  const simulated = await simulateEscrow(chain, paymentInfo.operator, escrowCalldata.authorize(paymentInfo, terms.amount, collector, collectorData));
  if (!simulated.ok) return { ...simulated, payer };
  return { ok: true, payer: paymentInfo.payer, paymentInfo, hash: paymentInfoHash(paymentInfo, chain.chainId), method, collector, collectorData };
}

/** The escrow's custom errors to the spec's reasons ("Typed simulation reverts"). */
const REVERTS: Record<string, AuthCaptureRefusal> = {
  AfterPreApprovalExpiry: 'authorization_expired', InvalidExpiries: 'deadline_ordering', ExceedsMaxAmount: 'amount_mismatch',
  PaymentAlreadyCollected: 'payment_already_collected', TokenCollectionFailed: 'token_collection_failed', InvalidCollectorForOperation: 'collector',
  InvalidSender: 'operator_mismatch', ZeroAmount: 'amount_mismatch', AmountOverflow: 'amount_overflow', FeeBpsOverflow: 'fee_bps',
  InvalidFeeBpsRange: 'fee_bps_range', FeeAmountOutOfRange: 'fee_bps_out_of_range', ZeroFeeReceiver: 'zero_fee_receiver', InvalidFeeReceiver: 'fee_receiver',
  AfterAuthorizationExpiry: 'capture_deadline_expired', InsufficientAuthorization: 'insufficient_authorization', ZeroAuthorization: 'zero_authorization',
  AfterRefundExpiry: 'refund_deadline_expired', RefundExceedsCapture: 'refund_exceeds_capture',
};

/** Runs an escrow call as the operator would send it: nothing is sent. */
export async function simulateEscrow(chain: ChainService, operator: Address, data: Hex): Promise<{ ok: true } | AuthCaptureRefused> {
  try {
    await chain.publicClient.call({ account: operator, to: AUTH_CAPTURE_ESCROW_ADDRESS, data });
    return { ok: true };
  } catch (err) {
    if (nodeFault(err)) throw chainUnavailable(err);
    const name = revertName(err, authCaptureEscrowAbi, 'authorize');
    return refuse(R((name && REVERTS[name]) || 'simulation_failed'), `the escrow call would revert: ${name ?? shortReason(err)}`);
  }
}
