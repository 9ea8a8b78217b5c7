/**
 * The x402 Permit2 schemes' on-chain surface (`upto`, and `exact` with assetTransferMethod "permit2"):
 * Uniswap's Permit2 (signature transfers) and the x402 project's x402UptoPermit2Proxy and
 * x402ExactPermit2Proxy, at the addresses they have on every EVM network (the dev chain gets our own
 * implementation of each at the same addresses, server/dev/chain/permit2-contracts.ts). Typed data,
 * ABIs (the subsets we call) and the few reads the facilitator makes.
 *
 * Facts from the x402 specification (specs/schemes/upto/scheme_upto_evm.md) and @x402/evm 2.27's
 * constants: the buyer signs Permit2's PermitWitnessTransferFrom with the proxy as spender, for a maximum
 * amount, and the witness Witness(address to,address facilitator,uint256 validAfter); only
 * `witness.facilitator` may call the proxy's `settle`, for any amount up to the permitted one. The exact
 * proxy's witness is Witness(address to,uint256 validAfter): anyone may call its `settle`, which always
 * moves the whole permitted amount (specs/schemes/exact/scheme_exact_evm.md).
 */
import { decodeFunctionData, getAddress, isAddressEqual, parseEventLogs, type Address, type Hex, type PublicClient, type TypedDataDomain } from 'viem';
import { usdcAbi } from './usdc.js';

export const PERMIT2_ADDRESS: Address = '0x000000000022D473030F116dDEE9F6B43aC78BA3';
export const UPTO_PROXY_ADDRESS: Address = '0x4020A4f3b7b90ccA423B9fabCc0CE57C6C240002';
export const EXACT_PROXY_ADDRESS: Address = '0x402085c248EeA27D92E8b30b2C58ed07f9E20001';

/** Permit2's EIP-712 domain: name "Permit2", no version. */
export const permit2Domain = (chainId: number): TypedDataDomain => ({ name: 'Permit2', chainId, verifyingContract: PERMIT2_ADDRESS });

/** EIP-712 types the buyer signs (primary type PermitWitnessTransferFrom). */
export const uptoPermitTypes = {
  PermitWitnessTransferFrom: [
    { name: 'permitted', type: 'TokenPermissions' },
    { name: 'spender', type: 'address' },
    { name: 'nonce', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
    { name: 'witness', type: 'Witness' },
  ],
  TokenPermissions: [
    { name: 'token', type: 'address' },
    { name: 'amount', type: 'uint256' },
  ],
  Witness: [
    { name: 'to', type: 'address' },
    { name: 'facilitator', type: 'address' },
    { name: 'validAfter', type: 'uint256' },
  ],
} as const;

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

/** EIP-712 types of an exact Permit2 payment (the witness has no facilitator: anyone may settle it). */
export const exactPermitTypes = {
  PermitWitnessTransferFrom: uptoPermitTypes.PermitWitnessTransferFrom,
  TokenPermissions: uptoPermitTypes.TokenPermissions,
  Witness: [
    { name: 'to', type: 'address' },
    { name: 'validAfter', type: 'uint256' },
  ],
} as const;

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

const permitTransferFromTuple = {
  name: 'permit', type: 'tuple',
  components: [
    { name: 'permitted', type: 'tuple', components: [{ name: 'token', type: 'address' }, { name: 'amount', type: 'uint256' }] },
    { name: 'nonce', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
  ],
} as const;

const witnessTuple = {
  name: 'witness', type: 'tuple',
  components: [{ name: 'to', type: 'address' }, { name: 'facilitator', type: 'address' }, { name: 'validAfter', type: 'uint256' }],
} as const;

const eip2612PermitTuple = { name: 'permit2612', type: 'tuple', components: [{ name: 'value', type: 'uint256' }, { name: 'deadline', type: 'uint256' }, { name: 'r', type: 'bytes32' }, { name: 's', type: 'bytes32' }, { name: 'v', type: 'uint8' }] } as const;

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

export const permit2Abi = [
  {
    type: 'function', name: 'nonceBitmap', stateMutability: 'view',
    inputs: [{ name: 'owner', type: 'address' }, { name: 'wordPos', type: 'uint256' }], outputs: [{ type: 'uint256' }],
  },
  { type: 'function', name: 'DOMAIN_SEPARATOR', stateMutability: 'view', inputs: [], outputs: [{ type: 'bytes32' }] },
  {
    type: 'function', name: 'invalidateUnorderedNonces', stateMutability: 'nonpayable',
    inputs: [{ name: 'wordPos', type: 'uint256' }, { name: 'mask', type: 'uint256' }], outputs: [],
  },
] as const;

export const erc20AllowanceAbi = [
  {
    type: 'function', name: 'allowance', stateMutability: 'view',
    inputs: [{ name: 'owner', type: 'address' }, { name: 'spender', type: 'address' }], outputs: [{ type: 'uint256' }],
  },
  {
    type: 'function', name: 'approve', stateMutability: 'nonpayable',
    inputs: [{ name: 'spender', type: 'address' }, { name: 'value', type: 'uint256' }], outputs: [{ type: 'bool' }],
  },
] as const;

/**
 * The buyer's EIP-2612 permit letting Permit2 spend its USDC (the spec's `eip2612GasSponsoring`
 * extension): sent inside settleWithPermit, so a buyer that never approved Permit2 pays no gas.
 */
export interface Eip2612Permit { value: bigint; deadline: bigint; v: number; r: Hex; s: Hex }

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

/** Whether Permit2 has this owner's nonce marked used (settled, or cancelled by the owner). */
export async function permit2NonceUsed(client: PublicClient, owner: Address, nonce: bigint): Promise<boolean> {
  const word = await client.readContract({ address: PERMIT2_ADDRESS, abi: permit2Abi, functionName: 'nonceBitmap', args: [owner, nonce >> 8n] });
  return ((word >> (nonce & 0xffn)) & 1n) === 1n;
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

/** How much of `token` Permit2 may move from `owner` (the one-time approval the scheme needs). */
export function permit2Allowance(client: PublicClient, token: Address, owner: Address): Promise<bigint> {
  return client.readContract({ address: token, abi: erc20AllowanceAbi, functionName: 'allowance', args: [owner, PERMIT2_ADDRESS] });
}
