import { getAddress, type Address, type Hex } from 'viem';
import { permit2WitnessTypes } from 'agentgate-x402-wire';
import { eip2612PermitTuple, PERMIT2_ADDRESS, permit2Domain, permitTransferFromTuple, witnessTuple, type Eip2612Permit } from '../../../../chain/permit2.js';
import type { RequiredContract } from '../../../../chain/contract-code.js';

// The x402 upto scheme's contracts on EVM: the x402UptoPermit2Proxy, which settles the amount charged
// (at most what the buyer permitted) through Permit2, and the EIP-712 permit the buyer signs for it.

export const UPTO_PROXY_ADDRESS: Address = '0x4020A4f3b7b90ccA423B9fabCc0CE57C6C240002';

/** EIP-712 types the buyer signs (primary type PermitWitnessTransferFrom). */
export const uptoPermitTypes = permit2WitnessTypes('Witness', [
  { name: 'to', type: 'address' },
  { name: 'facilitator', type: 'address' },
  { name: 'validAfter', type: 'uint256' },
]);

/** `permit2Authorization` of an upto payload, with numbers as bigints and addresses checksummed. */
export interface UptoPermit {
  from: Address;
  token: Address;
  /** The most the buyer allows to be charged. */
  maxAmount: bigint;
  spender: Address;
  nonce: bigint;
  deadline: bigint;
  to: Address;
  facilitator: Address;
  validAfter: bigint;
}

export function uptoTypedData(permit: UptoPermit, chainId: number) {
  return {
    domain: permit2Domain(chainId),
    types: uptoPermitTypes,
    primaryType: 'PermitWitnessTransferFrom' as const,
    message: {
      permitted: { token: permit.token, amount: permit.maxAmount },
      spender: permit.spender,
      nonce: permit.nonce,
      deadline: permit.deadline,
      witness: { to: permit.to, facilitator: permit.facilitator, validAfter: permit.validAfter },
    },
  };
}

/** The wire form (`payload.permit2Authorization`) read into an UptoPermit. */
export function uptoPermitOf(wire: {
  from: string; permitted: { token: string; amount: string }; spender: string; nonce: string; deadline: string;
  witness: { to: string; facilitator: string; validAfter: string };
}): UptoPermit {
  return {
    from: getAddress(wire.from),
    token: getAddress(wire.permitted.token),
    maxAmount: BigInt(wire.permitted.amount),
    spender: getAddress(wire.spender),
    nonce: BigInt(wire.nonce),
    deadline: BigInt(wire.deadline),
    to: getAddress(wire.witness.to),
    facilitator: getAddress(wire.witness.facilitator),
    validAfter: BigInt(wire.witness.validAfter),
  };
}

/** x402UptoPermit2Proxy: settle, settleWithPermit, and the errors a failed settlement names. */
export const uptoProxyAbi = [
  {
    type: 'function', name: 'settle', stateMutability: 'nonpayable', outputs: [],
    inputs: [permitTransferFromTuple, { name: 'amount', type: 'uint256' }, { name: 'owner', type: 'address' }, witnessTuple, { name: 'signature', type: 'bytes' }],
  },
  {
    type: 'function', name: 'settleWithPermit', stateMutability: 'nonpayable', outputs: [],
    inputs: [
      eip2612PermitTuple, permitTransferFromTuple, { name: 'amount', type: 'uint256' }, { name: 'owner', type: 'address' }, witnessTuple, { name: 'signature', type: 'bytes' },
    ],
  },
  { type: 'function', name: 'PERMIT2', stateMutability: 'view', inputs: [], outputs: [{ type: 'address' }] },
  { type: 'function', name: 'WITNESS_TYPEHASH', stateMutability: 'view', inputs: [], outputs: [{ type: 'bytes32' }] },
  { type: 'function', name: 'WITNESS_TYPE_STRING', stateMutability: 'view', inputs: [], outputs: [{ type: 'string' }] },
  { type: 'event', name: 'Settled', inputs: [] },
  { type: 'event', name: 'SettledWithPermit', inputs: [] },
  ...['AmountExceedsPermitted', 'InvalidDestination', 'InvalidOwner', 'InvalidPermit2Address', 'InvalidAmount', 'PaymentTooEarly', 'Permit2612AmountMismatch', 'ReentrancyGuardReentrantCall', 'UnauthorizedFacilitator']
    .map((name) => ({ type: 'error', name, inputs: [] }) as const),
  // Permit2's own errors surface through the proxy's call.
  { type: 'error', name: 'SignatureExpired', inputs: [{ name: 'signatureDeadline', type: 'uint256' }] },
  { type: 'error', name: 'InvalidAmount', inputs: [{ name: 'maxAmount', type: 'uint256' }] },
  ...['InvalidNonce', 'InvalidSignature', 'InvalidSigner', 'InvalidSignatureLength', 'InvalidContractSignature']
    .map((name) => ({ type: 'error', name, inputs: [] }) as const),
] as const;

/** The proxy's `settleWithPermit` arguments. */
export function uptoSettleWithPermitArgs(permit2612: Eip2612Permit, permit: UptoPermit, amount: bigint, signature: Hex) {
  return [permit2612, ...uptoSettleArgs(permit, amount, signature)] as const;
}

/** The proxy's `settle` arguments for charging `amount` (at most permit.maxAmount). */
export function uptoSettleArgs(permit: UptoPermit, amount: bigint, signature: Hex) {
  return [
    { permitted: { token: permit.token, amount: permit.maxAmount }, nonce: permit.nonce, deadline: permit.deadline },
    amount,
    permit.from,
    { to: permit.to, facilitator: permit.facilitator, validAfter: permit.validAfter },
    signature,
  ] as const;
}

/** What every upto payment settles through. */
export const UPTO_CONTRACTS: readonly RequiredContract[] = [
  { name: 'Permit2', address: PERMIT2_ADDRESS },
  { name: 'X402UptoPermit2Proxy', address: UPTO_PROXY_ADDRESS },
];
