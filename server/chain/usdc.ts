/**
 * Typed viem helpers for USDC's EIP-3009 surface: the EIP-712 domain and types a payer signs, reads
 * (`balanceOf`, `authorizationState`) and the relayer's `transferWithAuthorization` submission. The ABI
 * below is the subset of Circle's FiatTokenV2_2 (Base, Base Sepolia, and the local dev chain) we use.
 */
import {
  hexToBigInt,
  size,
  sliceHex,
  type Account,
  type Address,
  type Chain,
  type Hex,
  type PublicClient,
  type Transport,
  type TypedDataDomain,
  type WalletClient,
} from 'viem';

export const USDC_DECIMALS = 6;

const authorizationInputs = [
  { name: 'from', type: 'address' },
  { name: 'to', type: 'address' },
  { name: 'value', type: 'uint256' },
  { name: 'validAfter', type: 'uint256' },
  { name: 'validBefore', type: 'uint256' },
  { name: 'nonce', type: 'bytes32' },
] as const;

const vrsInputs = [
  { name: 'v', type: 'uint8' },
  { name: 'r', type: 'bytes32' },
  { name: 's', type: 'bytes32' },
] as const;

const signatureInput = [{ name: 'signature', type: 'bytes' }] as const;

/** The ERC-20 + EIP-3009 part of Circle's USDC (FiatTokenV2_2) ABI. */
export const usdcAbi = [
  { type: 'function', name: 'name', stateMutability: 'view', inputs: [], outputs: [{ type: 'string' }] },
  { type: 'function', name: 'symbol', stateMutability: 'view', inputs: [], outputs: [{ type: 'string' }] },
  { type: 'function', name: 'decimals', stateMutability: 'view', inputs: [], outputs: [{ type: 'uint8' }] },
  { type: 'function', name: 'version', stateMutability: 'view', inputs: [], outputs: [{ type: 'string' }] },
  { type: 'function', name: 'totalSupply', stateMutability: 'view', inputs: [], outputs: [{ type: 'uint256' }] },
  { type: 'function', name: 'DOMAIN_SEPARATOR', stateMutability: 'view', inputs: [], outputs: [{ type: 'bytes32' }] },
  {
    type: 'function',
    name: 'balanceOf',
    stateMutability: 'view',
    inputs: [{ name: 'account', type: 'address' }],
    outputs: [{ type: 'uint256' }],
  },
  {
    type: 'function',
    name: 'transfer',
    stateMutability: 'nonpayable',
    inputs: [
      { name: 'to', type: 'address' },
      { name: 'value', type: 'uint256' },
    ],
    outputs: [{ type: 'bool' }],
  },
  {
    type: 'function',
    name: 'authorizationState',
    stateMutability: 'view',
    inputs: [
      { name: 'authorizer', type: 'address' },
      { name: 'nonce', type: 'bytes32' },
    ],
    outputs: [{ type: 'bool' }],
  },
  {
    type: 'function',
    name: 'transferWithAuthorization',
    stateMutability: 'nonpayable',
    inputs: [...authorizationInputs, ...vrsInputs],
    outputs: [],
  },
  {
    type: 'function',
    name: 'transferWithAuthorization',
    stateMutability: 'nonpayable',
    inputs: [...authorizationInputs, ...signatureInput],
    outputs: [],
  },
  {
    type: 'function',
    name: 'receiveWithAuthorization',
    stateMutability: 'nonpayable',
    inputs: [...authorizationInputs, ...vrsInputs],
    outputs: [],
  },
  {
    type: 'function',
    name: 'receiveWithAuthorization',
    stateMutability: 'nonpayable',
    inputs: [...authorizationInputs, ...signatureInput],
    outputs: [],
  },
  {
    type: 'function',
    name: 'cancelAuthorization',
    stateMutability: 'nonpayable',
    inputs: [{ name: 'authorizer', type: 'address' }, { name: 'nonce', type: 'bytes32' }, ...vrsInputs],
    outputs: [],
  },
  {
    type: 'function',
    name: 'cancelAuthorization',
    stateMutability: 'nonpayable',
    inputs: [{ name: 'authorizer', type: 'address' }, { name: 'nonce', type: 'bytes32' }, ...signatureInput],
    outputs: [],
  },
  {
    type: 'event',
    name: 'Transfer',
    inputs: [
      { name: 'from', type: 'address', indexed: true },
      { name: 'to', type: 'address', indexed: true },
      { name: 'value', type: 'uint256', indexed: false },
    ],
  },
  {
    type: 'event',
    name: 'AuthorizationUsed',
    inputs: [
      { name: 'authorizer', type: 'address', indexed: true },
      { name: 'nonce', type: 'bytes32', indexed: true },
    ],
  },
  {
    type: 'event',
    name: 'AuthorizationCanceled',
    inputs: [
      { name: 'authorizer', type: 'address', indexed: true },
      { name: 'nonce', type: 'bytes32', indexed: true },
    ],
  },
] as const;

/** EIP-712 types for `transferWithAuthorization` (what x402's "exact" EVM scheme signs). */
export const transferWithAuthorizationTypes = {
  TransferWithAuthorization: authorizationInputs,
} as const;

/** EIP-712 types for `receiveWithAuthorization`. */
export const receiveWithAuthorizationTypes = {
  ReceiveWithAuthorization: authorizationInputs,
} as const;

/** EIP-712 types for `cancelAuthorization`. */
export const cancelAuthorizationTypes = {
  CancelAuthorization: [
    { name: 'authorizer', type: 'address' },
    { name: 'nonce', type: 'bytes32' },
  ],
} as const;

/** The signed message of Transfer/ReceiveWithAuthorization. Amounts are raw 6-decimal units. */
export interface Authorization {
  from: Address;
  to: Address;
  value: bigint;
  /** Unix seconds; valid when block.timestamp > validAfter. */
  validAfter: bigint;
  /** Unix seconds; valid when block.timestamp < validBefore. */
  validBefore: bigint;
  /** 32 random bytes, unique per authorizer. */
  nonce: Hex;
}

export interface UsdcDomainParams {
  /** The token's EIP-712 name: "USD Coin" on the dev chain and Base mainnet, "USDC" on Base Sepolia. */
  name: string;
  /** "2" for USDC v2.x. */
  version: string;
  chainId: number;
  verifyingContract: Address;
}

/** The EIP-712 domain of a USDC deployment. */
export function usdcDomain({ name, version, chainId, verifyingContract }: UsdcDomainParams): TypedDataDomain {
  return { name, version, chainId, verifyingContract };
}

export interface BalanceOfParams {
  client: PublicClient;
  token: Address;
  account: Address;
}

/** Raw (6-decimal) USDC balance of `account`. */
export function balanceOf({ client, token, account }: BalanceOfParams): Promise<bigint> {
  return client.readContract({ address: token, abi: usdcAbi, functionName: 'balanceOf', args: [account] });
}

export interface AuthorizationStateParams {
  client: PublicClient;
  token: Address;
  authorizer: Address;
  nonce: Hex;
}

/** True once the authorizer's nonce has been used or canceled. */
export function authorizationState({ client, token, authorizer, nonce }: AuthorizationStateParams): Promise<boolean> {
  return client.readContract({
    address: token,
    abi: usdcAbi,
    functionName: 'authorizationState',
    args: [authorizer, nonce],
  });
}

/** Splits a 65-byte r||s||v signature; v given as 0/1 (y-parity) is normalised to 27/28. */
export function splitSignature(signature: Hex): { v: number; r: Hex; s: Hex } {
  if (size(signature) !== 65) throw new Error(`expected a 65-byte signature, got ${size(signature)} bytes`);
  const v = Number(hexToBigInt(sliceHex(signature, 64, 65)));
  return {
    r: sliceHex(signature, 0, 32),
    s: sliceHex(signature, 32, 64),
    v: v < 27 ? v + 27 : v,
  };
}

export type TransferWithAuthorizationArgs =
  | {
      form: 'vrs';
      args: readonly [Address, Address, bigint, bigint, bigint, Hex, number, Hex, Hex];
    }
  | {
      form: 'bytes';
      args: readonly [Address, Address, bigint, bigint, bigint, Hex, Hex];
    };

/**
 * Arguments for `transferWithAuthorization`: the (v, r, s) overload for a 65-byte ECDSA signature (it
 * exists on every USDC version), the `bytes signature` overload for anything else (e.g. ERC-1271
 * signatures of smart accounts; USDC v2.2+ only).
 */
export function transferWithAuthorizationArgs(authorization: Authorization, signature: Hex): TransferWithAuthorizationArgs {
  const { from, to, value, validAfter, validBefore, nonce } = authorization;
  if (size(signature) === 65) {
    const { v, r, s } = splitSignature(signature);
    return { form: 'vrs', args: [from, to, value, validAfter, validBefore, nonce, v, r, s] };
  }
  return { form: 'bytes', args: [from, to, value, validAfter, validBefore, nonce, signature] };
}

export interface SubmitTransferWithAuthorizationParams {
  /** The relayer; pays the gas. */
  walletClient: WalletClient<Transport, Chain | undefined, Account>;
  publicClient: PublicClient;
  token: Address;
  authorization: Authorization;
  signature: Hex;
}

export interface SubmittedTransfer {
  txHash: Hex;
  status: 'success' | 'reverted';
  blockNumber: bigint;
}

/**
 * Sends `transferWithAuthorization` from the relayer and waits for the receipt. A call that would revert
 * (bad signature, used nonce, expired, insufficient balance…) throws before anything is sent, with the
 * token's revert reason in the error (viem `ContractFunctionExecutionError`).
 */
export async function submitTransferWithAuthorization({
  walletClient,
  publicClient,
  token,
  authorization,
  signature,
}: SubmitTransferWithAuthorizationParams): Promise<SubmittedTransfer> {
  const call = transferWithAuthorizationArgs(authorization, signature);
  const target = {
    address: token,
    abi: usdcAbi,
    functionName: 'transferWithAuthorization',
    account: walletClient.account,
    chain: walletClient.chain,
  } as const;
  const txHash =
    call.form === 'vrs'
      ? await walletClient.writeContract({ ...target, args: call.args })
      : await walletClient.writeContract({ ...target, args: call.args });
  const receipt = await publicClient.waitForTransactionReceipt({ hash: txHash });
  return { txHash, status: receipt.status, blockNumber: receipt.blockNumber };
}
