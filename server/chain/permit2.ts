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
import type { Address, Hex, PublicClient, TypedDataDomain } from 'viem';

export const PERMIT2_ADDRESS: Address = '0x000000000022D473030F116dDEE9F6B43aC78BA3';

/** Permit2's EIP-712 domain: name "Permit2", no version. */
export const permit2Domain = (chainId: number): TypedDataDomain => ({ name: 'Permit2', chainId, verifyingContract: PERMIT2_ADDRESS });

/** ABI pieces the x402 Permit2 proxies share (their settle functions take a permit, a witness, and an optional EIP-2612 permit). */
export const permitTransferFromTuple = {
  name: 'permit', type: 'tuple',
  components: [
    { name: 'permitted', type: 'tuple', components: [{ name: 'token', type: 'address' }, { name: 'amount', type: 'uint256' }] },
    { name: 'nonce', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
  ],
} as const;

export const witnessTuple = {
  name: 'witness', type: 'tuple',
  components: [{ name: 'to', type: 'address' }, { name: 'facilitator', type: 'address' }, { name: 'validAfter', type: 'uint256' }],
} as const;

export const eip2612PermitTuple = { name: 'permit2612', type: 'tuple', components: [{ name: 'value', type: 'uint256' }, { name: 'deadline', type: 'uint256' }, { name: 'r', type: 'bytes32' }, { name: 's', type: 'bytes32' }, { name: 'v', type: 'uint8' }] } as const;

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

/** Whether Permit2 has this owner's nonce marked used (settled, or cancelled by the owner). */
export async function permit2NonceUsed(client: PublicClient, owner: Address, nonce: bigint): Promise<boolean> {
  const word = await client.readContract({ address: PERMIT2_ADDRESS, abi: permit2Abi, functionName: 'nonceBitmap', args: [owner, nonce >> 8n] });
  return ((word >> (nonce & 0xffn)) & 1n) === 1n;
}

/** How much of `token` Permit2 may move from `owner` (the one-time approval the scheme needs). */
export function permit2Allowance(client: PublicClient, token: Address, owner: Address): Promise<bigint> {
  return client.readContract({ address: token, abi: erc20AllowanceAbi, functionName: 'allowance', args: [owner, PERMIT2_ADDRESS] });
}
