/**
 * The x402 `auth-capture` scheme's on-chain surface: Base's Commerce Payments escrow (AuthCaptureEscrow)
 * and its token collectors, at the addresses they have on every network (commerce-payments v1.1, the
 * deployment the scheme uses when `extra.authCaptureEscrow` is absent; the dev chain gets our own
 * implementation at the same addresses, server/dev/chain/escrow.ts). Addresses, the escrow's ABI, and
 * the two hashes of a payment.
 *
 * Facts from the x402 specification (specs/schemes/auth-capture/, EVM binding), Base's commerce-payments
 * interfaces and docs (v1.1: capture and charge take an absolute `feeAmount`), and @x402/evm 2.27's
 * `auth-capture/client`, whose signatures our tests settle:
 * - the payer signs one token authorization to a collector (ERC-3009 ReceiveWithAuthorization, or a
 *   Permit2 PermitTransferFrom) for `maxAmount`, valid until `preApprovalExpiry`, whose nonce is the
 *   payment's payer-agnostic hash (below): the signature commits to every field of the payment;
 * - the operator (`extra.captureAuthorizer`) alone calls authorize / charge / capture / void / refund;
 *   the payer alone calls reclaim, once the authorization has expired.
 */
import type { RequiredContract } from '../../../../chain/contract-code.js';
import { encodeAbiParameters, encodeFunctionData, getAddress, keccak256, parseAbi, toHex, zeroAddress, type Address, type Hex, type PublicClient } from 'viem';

export const AUTH_CAPTURE_ESCROW_ADDRESS: Address = '0xf96815976523E00e65Be8f34cA5e64b4f41EB19c';
export const EIP3009_TOKEN_COLLECTOR_ADDRESS: Address = '0x8612dfdc421f80336cd14E8EF9cb1E765dB5ab88';
export const PERMIT2_TOKEN_COLLECTOR_ADDRESS: Address = '0xD69831Aed5bfe262067ec4c751f4F830EcdD446e';
/** Funds refunds from the operator's allowance (the operator approves this address on the token). */
export const OPERATOR_REFUND_COLLECTOR_ADDRESS: Address = '0x7a03443724d14798c4AB4622F1DAAcA761Fea486';

const PAYMENT_INFO_STRUCT =
  'struct PaymentInfo { address operator; address payer; address receiver; address token; uint120 maxAmount; uint48 preApprovalExpiry; uint48 authorizationExpiry; uint48 refundExpiry; uint16 minFeeBps; uint16 maxFeeBps; address feeReceiver; uint256 salt; }';

/** AuthCaptureEscrow v1.1: every function, event and custom error. */
export const authCaptureEscrowAbi = parseAbi([
  PAYMENT_INFO_STRUCT,
  'function authorize(PaymentInfo paymentInfo, uint256 amount, address tokenCollector, bytes collectorData)',
  'function charge(PaymentInfo paymentInfo, uint256 amount, address tokenCollector, bytes collectorData, uint256 feeAmount, address feeReceiver)',
  'function capture(PaymentInfo paymentInfo, uint256 amount, uint256 feeAmount, address feeReceiver)',
  'function void(PaymentInfo paymentInfo)',
  'function reclaim(PaymentInfo paymentInfo)',
  'function refund(PaymentInfo paymentInfo, uint256 amount, address tokenCollector, bytes collectorData)',
  'function getHash(PaymentInfo paymentInfo) view returns (bytes32)',
  'function getTokenStore(address operator) view returns (address)',
  'function paymentState(bytes32 paymentInfoHash) view returns (bool hasCollectedPayment, uint120 capturableAmount, uint120 refundableAmount)',
  'function tokenStoreImplementation() view returns (address)',
  'function PAYMENT_INFO_TYPEHASH() view returns (bytes32)',
  'event PaymentAuthorized(bytes32 indexed paymentInfoHash, PaymentInfo paymentInfo, uint256 amount, address tokenCollector)',
  'event PaymentCharged(bytes32 indexed paymentInfoHash, PaymentInfo paymentInfo, uint256 amount, address tokenCollector, uint256 feeAmount, address feeReceiver)',
  'event PaymentCaptured(bytes32 indexed paymentInfoHash, uint256 amount, uint256 feeAmount, address feeReceiver)',
  'event PaymentVoided(bytes32 indexed paymentInfoHash, uint256 amount)',
  'event PaymentReclaimed(bytes32 indexed paymentInfoHash, uint256 amount)',
  'event PaymentRefunded(bytes32 indexed paymentInfoHash, uint256 amount, address tokenCollector)',
  'event TokenStoreCreated(address indexed operator, address tokenStore)',
  'error InvalidSender(address sender, address expected)',
  'error ZeroAmount()',
  'error AmountOverflow(uint256 amount, uint256 limit)',
  'error ExceedsMaxAmount(uint256 amount, uint256 maxAmount)',
  'error AfterPreApprovalExpiry(uint48 timestamp, uint48 expiry)',
  'error InvalidExpiries(uint48 preApproval, uint48 authorization, uint48 refund)',
  'error FeeBpsOverflow(uint16 feeBps)',
  'error InvalidFeeBpsRange(uint16 minFeeBps, uint16 maxFeeBps)',
  'error FeeAmountOutOfRange(uint256 feeAmount, uint256 minFee, uint256 maxFee)',
  'error ZeroFeeReceiver()',
  'error InvalidFeeReceiver(address attempted, address expected)',
  'error InvalidCollectorForOperation()',
  'error TokenCollectionFailed()',
  'error PaymentAlreadyCollected(bytes32 paymentInfoHash)',
  'error AfterAuthorizationExpiry(uint48 timestamp, uint48 expiry)',
  'error InsufficientAuthorization(bytes32 paymentInfoHash, uint256 authorizedAmount, uint256 requestedAmount)',
  'error ZeroAuthorization(bytes32 paymentInfoHash)',
  'error BeforeAuthorizationExpiry(uint48 timestamp, uint48 expiry)',
  'error AfterRefundExpiry(uint48 timestamp, uint48 expiry)',
  'error RefundExceedsCapture(uint256 refund, uint256 captured)',
]);

/** What every token collector answers; `collectorType` 0 = payment (authorize, charge), 1 = refund. */
export const tokenCollectorAbi = parseAbi([
  'function collectorType() view returns (uint8)',
  'function authCaptureEscrow() view returns (address)',
]);

/** The on-chain PaymentInfo struct, typed as viem encodes it. */
export interface PaymentInfo {
  operator: Address;
  payer: Address;
  receiver: Address;
  token: Address;
  maxAmount: bigint;
  preApprovalExpiry: number;
  authorizationExpiry: number;
  refundExpiry: number;
  minFeeBps: number;
  maxFeeBps: number;
  feeReceiver: Address;
  salt: bigint;
}

export const PAYMENT_INFO_TYPEHASH = keccak256(toHex(
  'PaymentInfo(address operator,address payer,address receiver,address token,uint120 maxAmount,uint48 preApprovalExpiry,uint48 authorizationExpiry,uint48 refundExpiry,uint16 minFeeBps,uint16 maxFeeBps,address feeReceiver,uint256 salt)',
));

/** The payment's identifier, as the escrow's `getHash` computes it (keys `paymentState`). */
export function paymentInfoHash(info: PaymentInfo, chainId: number, escrow: Address = AUTH_CAPTURE_ESCROW_ADDRESS): Hex {
  const structHash = keccak256(encodeAbiParameters(
    [
      { type: 'bytes32' }, { type: 'address' }, { type: 'address' }, { type: 'address' }, { type: 'address' },
      { type: 'uint120' }, { type: 'uint48' }, { type: 'uint48' }, { type: 'uint48' }, { type: 'uint16' }, { type: 'uint16' },
      { type: 'address' }, { type: 'uint256' },
    ],
    [
      PAYMENT_INFO_TYPEHASH, info.operator, info.payer, info.receiver, info.token, info.maxAmount, info.preApprovalExpiry,
      info.authorizationExpiry, info.refundExpiry, info.minFeeBps, info.maxFeeBps, info.feeReceiver, info.salt,
    ],
  ));
  return keccak256(encodeAbiParameters([{ type: 'uint256' }, { type: 'address' }, { type: 'bytes32' }], [BigInt(chainId), escrow, structHash]));
}

/**
 * The nonce the payer signs (ERC-3009 nonce, or Permit2 nonce as a number): the payment's hash with the
 * payer zeroed, so it can be computed before the payer is known.
 */
export function payerAgnosticNonce(info: PaymentInfo, chainId: number, escrow: Address = AUTH_CAPTURE_ESCROW_ADDRESS): Hex {
  return paymentInfoHash({ ...info, payer: zeroAddress }, chainId, escrow);
}

/** The v1.1 deployment's escrow unless the offer names it (the only one we settle into). */
export function escrowOf(named: string | undefined): Address | undefined {
  if (named === undefined || named === '') return AUTH_CAPTURE_ESCROW_ADDRESS;
  return /^0x[0-9a-fA-F]{40}$/.test(named) && getAddress(named) === AUTH_CAPTURE_ESCROW_ADDRESS ? AUTH_CAPTURE_ESCROW_ADDRESS : undefined;
}

/** What an offer and a collect payload say of the payment, field by field (the EVM binding's PaymentInfo appendix). */
export interface PaymentInfoSource {
  payTo: string;
  asset: string;
  amount: string;
  extra: { captureAuthorizer: string; captureDeadline: number; refundDeadline: number; minFeeBps: number; maxFeeBps: number; feeRecipient: string };
}

/**
 * The PaymentInfo a facilitator rebuilds from the offer and the payload: operator = captureAuthorizer,
 * receiver = payTo, token = asset, maxAmount = amount, preApprovalExpiry = the signature's validBefore /
 * deadline, the deadlines and fee terms from `extra`, salt = payload.salt.
 */
export function paymentInfoOf(requirements: PaymentInfoSource, payload: { salt: string; authorization?: { from: string; validBefore: string }; permit2Authorization?: { from: string; deadline: string } }): PaymentInfo {
  const { extra } = requirements;
  const [payer, preApprovalExpiry] = payload.permit2Authorization
    ? [payload.permit2Authorization.from, payload.permit2Authorization.deadline]
    : [payload.authorization!.from, payload.authorization!.validBefore];
  return {
    operator: getAddress(extra.captureAuthorizer),
    payer: getAddress(payer),
    receiver: getAddress(requirements.payTo),
    token: getAddress(requirements.asset),
    maxAmount: BigInt(requirements.amount),
    preApprovalExpiry: Number(preApprovalExpiry),
    authorizationExpiry: extra.captureDeadline,
    refundExpiry: extra.refundDeadline,
    minFeeBps: extra.minFeeBps,
    maxFeeBps: extra.maxFeeBps,
    feeReceiver: getAddress(extra.feeRecipient),
    salt: BigInt(payload.salt),
  };
}

/** PaymentInfo as a record keeps it (JSON: big numbers as decimal strings). */
export interface StoredPaymentInfo {
  operator: string; payer: string; receiver: string; token: string; maxAmount: string; preApprovalExpiry: number; authorizationExpiry: number;
  refundExpiry: number; minFeeBps: number; maxFeeBps: number; feeReceiver: string; salt: string;
}

export const storedPaymentInfo = (info: PaymentInfo): StoredPaymentInfo => ({ ...info, maxAmount: info.maxAmount.toString(), salt: info.salt.toString() });

export const paymentInfoOfStored = (stored: StoredPaymentInfo): PaymentInfo => ({
  ...stored, operator: getAddress(stored.operator), payer: getAddress(stored.payer), receiver: getAddress(stored.receiver), token: getAddress(stored.token),
  feeReceiver: getAddress(stored.feeReceiver), maxAmount: BigInt(stored.maxAmount), salt: BigInt(stored.salt),
});

/** The escrow's balances of one payment: what can still be captured, and what can be refunded. */
export interface EscrowState { hasCollectedPayment: boolean; capturable: bigint; refundable: bigint }

export async function escrowState(client: PublicClient, hash: Hex): Promise<EscrowState> {
  const [hasCollectedPayment, capturable, refundable] = await client.readContract({ address: AUTH_CAPTURE_ESCROW_ADDRESS, abi: authCaptureEscrowAbi, functionName: 'paymentState', args: [hash] });
  return { hasCollectedPayment, capturable, refundable };
}

/** The operator's call data of each escrow operation we send (fees: none, v1.1's absolute feeAmount 0). */
export const escrowCalldata = {
  authorize: (info: PaymentInfo, amount: bigint, collector: Address, collectorData: Hex) => encodeFunctionData({ abi: authCaptureEscrowAbi, functionName: 'authorize', args: [info, amount, collector, collectorData] }),
  capture: (info: PaymentInfo, amount: bigint) => encodeFunctionData({ abi: authCaptureEscrowAbi, functionName: 'capture', args: [info, amount, 0n, info.feeReceiver] }),
  void: (info: PaymentInfo) => encodeFunctionData({ abi: authCaptureEscrowAbi, functionName: 'void', args: [info] }),
  refund: (info: PaymentInfo, amount: bigint) => encodeFunctionData({ abi: authCaptureEscrowAbi, functionName: 'refund', args: [info, amount, OPERATOR_REFUND_COLLECTOR_ADDRESS, '0x'] }),
};

/** The collector a payload pays through. */
export const collectorFor = (method: 'eip3009' | 'permit2'): Address => (method === 'permit2' ? PERMIT2_TOKEN_COLLECTOR_ADDRESS : EIP3009_TOKEN_COLLECTOR_ADDRESS);

/**
 * What the collector is handed as `collectorData`: the client's signature as it made it, an ERC-6492
 * wrapper left intact (both collectors run the ERC-6492 handler over these bytes, then pass the inner
 * signature to the token or to Permit2).
 */
export const collectorDataOf = (signature: Hex): Hex => signature;

/** What an auth-capture payment is authorized into, captured from, voided and refunded through. */
export const AUTH_CAPTURE_CONTRACTS: readonly RequiredContract[] = [
  { name: 'AuthCaptureEscrow', address: AUTH_CAPTURE_ESCROW_ADDRESS },
  { name: 'ERC3009PaymentCollector', address: EIP3009_TOKEN_COLLECTOR_ADDRESS },
  { name: 'OperatorRefundCollector', address: OPERATOR_REFUND_COLLECTOR_ADDRESS },
];
