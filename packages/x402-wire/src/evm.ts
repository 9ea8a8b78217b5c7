import { z } from 'zod';

// What EVM payloads are made of, in every scheme: addresses, uint256 and bytes32 values, signatures, and the
// token's EIP-712 domain (which the buyer needs to sign; `extra` in the requirements).

export const EvmAddress = z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'expected a 0x-prefixed 20-byte address');
/** uint256 as a decimal string: at most 78 digits. */
export const Uint256String = z.string().regex(/^\d{1,78}$/, 'expected a decimal integer string');
export const Bytes32Hex = z.string().regex(/^0x[0-9a-fA-F]{64}$/, 'expected 0x-prefixed 32 bytes');
/** 65-byte ECDSA signatures, and longer ERC-1271/6492 smart-wallet ones; the header size caps length. */
export const SignatureHex = z.string().regex(/^0x(?:[0-9a-fA-F]{2})+$/, 'expected a 0x-prefixed hex signature');

/** EIP-712 domain of the token, which the buyer needs to sign (`extra` in the requirements). */
export const TokenDomainExtraSchema = z.object({ name: z.string().min(1), version: z.string().min(1) });
