import { recover } from 'tiny-secp256k1';
import { getAddress, hexToBytes, keccak256, type Address, type Hex } from 'viem';

/**
 * The address that signed `hash` with a 65-byte (r, s, v) signature, recovered by libsecp256k1 (compiled
 * to WebAssembly, tiny-secp256k1): about 0.3 ms where @noble/curves' recovery, which viem's
 * recoverTypedDataAddress uses, takes 1.5 ms of the event loop; every paid request recovers one.
 * Undefined for anything else (another length, a v other than 0/1/27/28, r or s out of range): the
 * caller then asks viem, which decides those cases as before.
 */
export function recoverSigner(hash: Hex, signature: Hex): Address | undefined {
  if (signature.length !== 132) return undefined;
  const bytes = hexToBytes(signature);
  const v = bytes[64]!;
  const recoveryId = v === 27 || v === 0 ? 0 : v === 28 || v === 1 ? 1 : undefined;
  if (recoveryId === undefined) return undefined;
  let publicKey: Uint8Array | null;
  try {
    publicKey = recover(hexToBytes(hash), bytes.subarray(0, 64), recoveryId, false);
  } catch {
    return undefined;
  }
  if (!publicKey) return undefined;
  return getAddress(`0x${keccak256(publicKey.subarray(1)).slice(-40)}`);
}
