import { hashDomain, hashTypedData, hexToBytes, keccak256, stringToBytes, type Hex } from 'viem';
import { transferWithAuthorizationTypes, usdcDomain, type Authorization, type UsdcDomainParams } from './usdc.js';

/**
 * The EIP-712 digest a payer signs for USDC's TransferWithAuthorization: what viem's hashTypedData
 * computes (tested against it), with the token's domain separator kept and the six fields laid out
 * directly. hashTypedData validates the types, hashes the type strings and ABI-encodes through hex
 * strings on every call: about 190 µs, where this takes about a quarter of that, on every paid request.
 * Anything outside the layout (a value of 2^256 or more, a nonce that is not 32 bytes) is left to
 * hashTypedData, which decides it as before.
 */
export function transferAuthorizationDigest(domain: UsdcDomainParams, message: Authorization): Hex {
  const { from, to, value, validAfter, validBefore, nonce } = message;
  if (!fitsUint256(value) || !fitsUint256(validAfter) || !fitsUint256(validBefore) || !/^0x[0-9a-fA-F]{64}$/.test(nonce)
    || !/^0x[0-9a-fA-F]{40}$/.test(from) || !/^0x[0-9a-fA-F]{40}$/.test(to)) {
    return hashTypedData({ domain: usdcDomain(domain), types: transferWithAuthorizationTypes, primaryType: 'TransferWithAuthorization', message });
  }
  const struct = new Uint8Array(7 * 32);
  struct.set(TYPE_HASH, 0);
  struct.set(hexToBytes(from), 32 + 12);
  struct.set(hexToBytes(to), 64 + 12);
  writeUint256(struct, 96, value);
  writeUint256(struct, 128, validAfter);
  writeUint256(struct, 160, validBefore);
  struct.set(hexToBytes(nonce), 192);
  const signed = new Uint8Array(2 + 32 + 32);
  signed.set([0x19, 0x01], 0);
  signed.set(domainSeparator(domain), 2);
  signed.set(keccak256(struct, 'bytes'), 34);
  return keccak256(signed);
}

const TYPE_HASH = keccak256(stringToBytes('TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)'), 'bytes');
const MAX_UINT256 = (1n << 256n) - 1n;
const fitsUint256 = (n: bigint) => n >= 0n && n <= MAX_UINT256;

function writeUint256(into: Uint8Array, offset: number, n: bigint): void {
  for (let i = 31; i >= 0 && n > 0n; i--) {
    into[offset + i] = Number(n & 0xffn);
    n >>= 8n;
  }
}

/** A deployment has one or two tokens' domains: kept, a few at most. */
const separators = new Map<string, Uint8Array>();

function domainSeparator(domain: UsdcDomainParams): Uint8Array {
  const key = `${domain.name}\n${domain.version}\n${domain.chainId}\n${domain.verifyingContract.toLowerCase()}`;
  let separator = separators.get(key);
  if (!separator) {
    const types = { EIP712Domain: [{ name: 'name', type: 'string' }, { name: 'version', type: 'string' }, { name: 'chainId', type: 'uint256' }, { name: 'verifyingContract', type: 'address' }] };
    separator = hexToBytes(hashDomain({ domain: usdcDomain(domain), types } as Parameters<typeof hashDomain>[0]));
    if (separators.size >= 16) separators.clear();
    separators.set(key, separator);
  }
  return separator;
}
