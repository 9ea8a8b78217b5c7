import { z } from 'zod';
import { Bytes32Hex, EvmAddress, Uint256String } from './evm.js';

// Permit2 (Uniswap's canonical signature-transfer contract), as every scheme that moves tokens through it
// speaks it: `exact` and `upto` payments, `batch-settlement` deposits, `auth-capture` collections. Written
// once: the nonce as buyers send it, and the EIP-712 types a buyer signs and a facilitator checks.

/** A Permit2 nonce: the official client writes a decimal uint256; the spec's example a 0x hex one. */
export const Permit2NonceSchema = z.union([Uint256String, Bytes32Hex, z.string().regex(/^0x[0-9a-fA-F]{1,64}$/)]);

/**
 * A signed transfer as a payload carries it (`permit2Authorization`): who signs, the token and amount
 * permitted, the spender, nonce and deadline. A scheme adds its witness.
 */
export const Permit2TransferSchema = z.object({
  from: EvmAddress,
  permitted: z.object({ token: EvmAddress, amount: Uint256String }),
  spender: EvmAddress,
  nonce: Permit2NonceSchema,
  deadline: Uint256String,
});

/** The token and amount a permit lets its spender move. */
export const PERMIT2_TOKEN_PERMISSIONS = [
  { name: 'token', type: 'address' },
  { name: 'amount', type: 'uint256' },
] as const;

/** A plain PermitTransferFrom (no witness), as Permit2's `permitTransferFrom` checks it. */
export const PERMIT2_TRANSFER_FROM_TYPES = {
  PermitTransferFrom: [
    { name: 'permitted', type: 'TokenPermissions' },
    { name: 'spender', type: 'address' },
    { name: 'nonce', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
  ],
  TokenPermissions: PERMIT2_TOKEN_PERMISSIONS,
} as const;

/**
 * The EIP-712 types of a PermitWitnessTransferFrom whose witness is the struct `witnessType` with these
 * fields: the contracts (the x402 proxies, the deposit collectors) bind what the buyer signed to it.
 */
export function permit2WitnessTypes<const W extends string, const F extends ReadonlyArray<{ readonly name: string; readonly type: string }>>(witnessType: W, witnessFields: F) {
  const transfer = [
    { name: 'permitted', type: 'TokenPermissions' },
    { name: 'spender', type: 'address' },
    { name: 'nonce', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
    { name: 'witness', type: witnessType },
  ] as const;
  return { PermitWitnessTransferFrom: transfer, TokenPermissions: PERMIT2_TOKEN_PERMISSIONS, ...({ [witnessType]: witnessFields } as Record<W, F>) };
}

/** The gas sponsoring extensions' declarations (specs/extensions/): the client fills in everything else. */
export const EIP2612_GAS_SPONSORING_DECLARATION = { info: { description: 'The facilitator accepts EIP-2612 gasless Permit to `Permit2` canonical contract.', version: '1' } } as const;
const ERC20_APPROVAL_GAS_SPONSORING_DECLARATION = { info: { description: 'The facilitator accepts a raw signed approval transaction and will sponsor the gas fees.', version: '1' } } as const;

/** What a 402 offering `exact` through Permit2 declares: a buyer without a Permit2 allowance, or without gas, pays anyway. */
export const PERMIT2_GAS_SPONSORING_EXTENSIONS = { eip2612GasSponsoring: EIP2612_GAS_SPONSORING_DECLARATION, erc20ApprovalGasSponsoring: ERC20_APPROVAL_GAS_SPONSORING_DECLARATION } as const;
