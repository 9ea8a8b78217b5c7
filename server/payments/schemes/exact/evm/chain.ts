import { getAddress, type Address, type Hex } from 'viem';
import { permit2WitnessTypes } from 'agentgate-x402-wire';
import { eip2612PermitTuple, PERMIT2_ADDRESS, permit2Domain, permitTransferFromTuple } from '../../../../chain/permit2.js';
import type { RequiredContract } from '../../../../chain/contract-code.js';

// The x402 exact scheme's contracts on EVM beyond the token itself (whose EIP-3009
// transferWithAuthorization is chain/usdc.ts): the x402ExactPermit2Proxy, which settles an exact payment
// made through Permit2, and the EIP-712 permit the buyer signs for it.

export const EXACT_PROXY_ADDRESS: Address = '0x402085c248EeA27D92E8b30b2C58ed07f9E20001';

/** EIP-712 types of an exact Permit2 payment (the witness has no facilitator: anyone may settle it). */
export const exactPermitTypes = permit2WitnessTypes('Witness', [
  { name: 'to', type: 'address' },
  { name: 'validAfter', type: 'uint256' },
]);

/** `permit2Authorization` of an exact Permit2 payload, with numbers as bigints and addresses checksummed. */
export interface ExactPermit {
  from: Address;
  token: Address;
  /** What moves: always the whole permitted amount. */
  amount: bigint;
  spender: Address;
  nonce: bigint;
  deadline: bigint;
  to: Address;
  validAfter: bigint;
}

export function exactTypedData(permit: ExactPermit, chainId: number) {
  return {
    domain: permit2Domain(chainId),
    types: exactPermitTypes,
    primaryType: 'PermitWitnessTransferFrom' as const,
    message: {
      permitted: { token: permit.token, amount: permit.amount },
      spender: permit.spender,
      nonce: permit.nonce,
      deadline: permit.deadline,
      witness: { to: permit.to, validAfter: permit.validAfter },
    },
  };
}

export function exactPermitOf(wire: {
  from: string; permitted: { token: string; amount: string }; spender: string; nonce: string; deadline: string;
  witness: { to: string; validAfter: string };
}): ExactPermit {
  return {
    from: getAddress(wire.from),
    token: getAddress(wire.permitted.token),
    amount: BigInt(wire.permitted.amount),
    spender: getAddress(wire.spender),
    nonce: BigInt(wire.nonce),
    deadline: BigInt(wire.deadline),
    to: getAddress(wire.witness.to),
    validAfter: BigInt(wire.witness.validAfter),
  };
}

const exactWitnessTuple = { name: 'witness', type: 'tuple', components: [{ name: 'to', type: 'address' }, { name: 'validAfter', type: 'uint256' }] } as const;

/** x402ExactPermit2Proxy: settle, settleWithPermit, and the errors a failed settlement names (its own and Permit2's). */
export const exactProxyAbi = [
  {
    type: 'function', name: 'settle', stateMutability: 'nonpayable', outputs: [],
    inputs: [permitTransferFromTuple, { name: 'owner', type: 'address' }, exactWitnessTuple, { name: 'signature', type: 'bytes' }],
  },
  {
    type: 'function', name: 'settleWithPermit', stateMutability: 'nonpayable', outputs: [],
    inputs: [eip2612PermitTuple, permitTransferFromTuple, { name: 'owner', type: 'address' }, exactWitnessTuple, { name: 'signature', type: 'bytes' }],
  },
  { type: 'function', name: 'PERMIT2', stateMutability: 'view', inputs: [], outputs: [{ type: 'address' }] },
  { type: 'function', name: 'WITNESS_TYPEHASH', stateMutability: 'view', inputs: [], outputs: [{ type: 'bytes32' }] },
  { type: 'function', name: 'WITNESS_TYPE_STRING', stateMutability: 'view', inputs: [], outputs: [{ type: 'string' }] },
  { type: 'event', name: 'Settled', inputs: [] },
  { type: 'event', name: 'SettledWithPermit', inputs: [] },
  ...['InvalidDestination', 'InvalidOwner', 'InvalidPermit2Address', 'InvalidAmount', 'PaymentTooEarly', 'Permit2612AmountMismatch', 'ReentrancyGuardReentrantCall']
    .map((name) => ({ type: 'error', name, inputs: [] }) as const),
  { type: 'error', name: 'SignatureExpired', inputs: [{ name: 'signatureDeadline', type: 'uint256' }] },
  ...['InvalidNonce', 'InvalidSignature', 'InvalidSigner', 'InvalidSignatureLength', 'InvalidContractSignature']
    .map((name) => ({ type: 'error', name, inputs: [] }) as const),
] as const;

/** The exact proxy's `settle` arguments (it always moves the whole permitted amount). */
export function exactSettleArgs(permit: ExactPermit, signature: Hex) {
  return [
    { permitted: { token: permit.token, amount: permit.amount }, nonce: permit.nonce, deadline: permit.deadline },
    permit.from,
    { to: permit.to, validAfter: permit.validAfter },
    signature,
  ] as const;
}

/** What an exact payment through Permit2 settles through (an EIP-3009 one needs only the token). */
export const EXACT_PERMIT2_CONTRACTS: readonly RequiredContract[] = [
  { name: 'Permit2', address: PERMIT2_ADDRESS },
  { name: 'X402ExactPermit2Proxy', address: EXACT_PROXY_ADDRESS },
];
