import { hashTypedData, keccak256, recoverAddress, serializeSignature, parseSignature, toHex, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, sign } from 'viem/accounts';
import { randomBytes } from 'node:crypto';
import { recoverSigner } from '../../server/chain/recover.js';

/** The order of secp256k1. */
const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

describe('recoverSigner (libsecp256k1)', () => {
  it('recovers the signer of typed data exactly as viem does, for v in 27/28 and 0/1', async () => {
    for (let i = 0; i < 40; i++) {
      const account = privateKeyToAccount(generatePrivateKey());
      const typed = { domain: { name: 'USDC', version: '2', chainId: 84532 }, types: { T: [{ name: 'n', type: 'uint256' }] }, primaryType: 'T', message: { n: BigInt(i) } } as const;
      const signature = await account.signTypedData(typed);
      const hash = hashTypedData(typed);
      expect(recoverSigner(hash, signature)).toBe(account.address);
      const { r, s, yParity } = parseSignature(signature);
      expect(recoverSigner(hash, `${r}${s.slice(2)}${yParity ? '01' : '00'}` as Hex)).toBe(account.address);
    }
  });

  it('leaves every signature it cannot read to the slow path, and a wrong hash recovers someone else', async () => {
    const key = generatePrivateKey();
    const hash = keccak256(toHex(randomBytes(32)));
    const signature = serializeSignature(await sign({ hash, privateKey: key }));
    const { r, s, v } = parseSignature(signature);
    expect(recoverSigner(hash, signature.slice(0, 130) as Hex)).toBeUndefined(); // 64 bytes
    expect(recoverSigner(hash, `${signature}00` as Hex)).toBeUndefined(); // 66 bytes
    expect(recoverSigner(hash, `${signature.slice(0, 130)}1d` as Hex)).toBeUndefined(); // v = 29
    expect(recoverSigner(hash, `0x${'00'.repeat(32)}${s.slice(2)}1b` as Hex)).toBeUndefined(); // r = 0
    expect(recoverSigner(hash, `${r}${N.toString(16)}1b` as Hex)).toBeUndefined(); // s = n
    const other = keccak256(hash);
    expect(recoverSigner(other, signature)).toBe(await recoverAddress({ hash: other, signature }));
    expect(recoverSigner(other, signature)).not.toBe(privateKeyToAccount(key).address);
    expect(v).toBeDefined();
  });

  it('agrees with viem on a high-s signature (the same point; the token refuses it later either way)', async () => {
    const hash = keccak256(toHex(randomBytes(32)));
    const signed = await sign({ hash, privateKey: generatePrivateKey() });
    const high = { r: signed.r, s: toHex(N - BigInt(signed.s), { size: 32 }), yParity: signed.yParity ? 0 : 1 };
    const signature = serializeSignature(high);
    expect(recoverSigner(hash, signature)).toBe(await recoverAddress({ hash, signature }));
  });
});
