// The TransferWithAuthorization digest laid out by hand (server/chain/authorization-digest.ts) is the one
// viem's hashTypedData computes, for random authorizations on several token domains, at the edges of
// every field, and for what falls outside the layout (left to hashTypedData).
import { randomBytes } from 'node:crypto';
import { getAddress, hashTypedData, type Hex } from 'viem';
import { transferAuthorizationDigest } from '../../server/chain/authorization-digest.js';
import { transferWithAuthorizationTypes, type Authorization, type UsdcDomainParams } from '../../server/chain/usdc.js';

const hex = (bytes: number) => `0x${randomBytes(bytes).toString('hex')}` as Hex;
const address = () => getAddress(hex(20));
const viem = (domain: UsdcDomainParams, message: Authorization) => hashTypedData({ domain, types: transferWithAuthorizationTypes, primaryType: 'TransferWithAuthorization', message });

const domains: UsdcDomainParams[] = [
  { name: 'USD Coin', version: '2', chainId: 8453, verifyingContract: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913' },
  { name: 'USDC', version: '2', chainId: 84532, verifyingContract: '0x036CbD53842c5426634e7929541eC2318f3dCF7e' },
  { name: 'USD Coin', version: '1', chainId: 31337, verifyingContract: address() },
];

test('random authorizations on several domains: the same digest as hashTypedData', () => {
  for (let i = 0; i < 200; i++) {
    const domain = domains[i % domains.length]!;
    const message: Authorization = {
      from: address(), to: address(), value: BigInt(hex(1 + (i % 32))), validAfter: BigInt(i), validBefore: BigInt(hex(4)), nonce: hex(32),
    };
    expect(transferAuthorizationDigest(domain, message)).toBe(viem(domain, message));
  }
});

test('the edges of each field, and addresses in any case', () => {
  const max = (1n << 256n) - 1n;
  const base: Authorization = { from: address(), to: address(), value: 0n, validAfter: 0n, validBefore: 0n, nonce: `0x${'00'.repeat(32)}` };
  for (const message of [
    base,
    { ...base, value: max, validAfter: max, validBefore: max, nonce: `0x${'ff'.repeat(32)}` as Hex },
    { ...base, value: 1n << 255n },
    { ...base, from: base.from.toLowerCase() as Hex, to: base.to.toUpperCase().replace('0X', '0x') as Hex },
  ]) {
    expect(transferAuthorizationDigest(domains[0]!, message)).toBe(viem(domains[0]!, { ...message, from: getAddress(message.from), to: getAddress(message.to) }));
  }
});

test('outside the layout it answers as hashTypedData does', () => {
  const base: Authorization = { from: address(), to: address(), value: 1n, validAfter: 0n, validBefore: 1n, nonce: hex(32) };
  const tooBig = { ...base, value: 1n << 256n };
  expect(() => transferAuthorizationDigest(domains[0]!, tooBig)).toThrow();
  expect(() => viem(domains[0]!, tooBig)).toThrow();
  const shortNonce = { ...base, nonce: hex(31) };
  expect(() => transferAuthorizationDigest(domains[0]!, shortNonce)).toThrow(/bytes32/);
  expect(() => viem(domains[0]!, shortNonce)).toThrow(/bytes32/);
});
