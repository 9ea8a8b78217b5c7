// A channel voucher's digest laid out by hand (voucherDigest, server/chain/batch-settlement.ts) is the one
// viem's hashTypedData computes, for random vouchers on several chains and at the edges of each field; a
// channel id, remembered per config, is the hash of that config and of nothing else.
import { randomBytes } from 'node:crypto';
import { getAddress, hashTypedData, type Hex } from 'viem';
import { batchSettlementDomain, channelConfigTypes, channelIdOf, voucherDigest, voucherTypedData, type ChannelConfig } from '../../server/payments/schemes/batch-settlement/evm/chain.js';

const hex = (bytes: number) => `0x${randomBytes(bytes).toString('hex')}` as Hex;
const address = () => getAddress(hex(20));
const chains = [8453, 84532, 31337];

test('random vouchers on several chains: the same digest as hashTypedData', () => {
  for (let i = 0; i < 200; i++) {
    const chainId = chains[i % chains.length]!;
    const channelId = hex(32);
    const max = BigInt(hex(1 + (i % 16)));
    expect(voucherDigest(channelId, max, chainId)).toBe(hashTypedData(voucherTypedData(channelId, max, chainId)));
  }
});

test('the edges of each field', () => {
  for (const [channelId, max] of [[`0x${'00'.repeat(32)}`, 0n], [`0x${'ff'.repeat(32)}`, (1n << 128n) - 1n], [hex(32), 1n]] as const) {
    expect(voucherDigest(channelId as Hex, max, 84532)).toBe(hashTypedData(voucherTypedData(channelId as Hex, max, 84532)));
  }
});

test('a channel id is its config\'s hash on its chain, asked again or not, and changes with any field', () => {
  const config: ChannelConfig = { payer: address(), payerAuthorizer: address(), receiver: address(), receiverAuthorizer: address(), token: address(), withdrawDelay: 900, salt: hex(32) };
  const viem = (c: ChannelConfig, chainId: number) => hashTypedData({ domain: batchSettlementDomain(chainId), types: channelConfigTypes, primaryType: 'ChannelConfig', message: c });
  expect(channelIdOf(config, 84532)).toBe(viem(config, 84532));
  expect(channelIdOf(config, 84532)).toBe(viem(config, 84532));
  expect(channelIdOf(config, 8453)).toBe(viem(config, 8453));
  for (const change of [{ payer: address() }, { payerAuthorizer: address() }, { receiver: address() }, { receiverAuthorizer: address() }, { token: address() }, { withdrawDelay: 901 }, { salt: hex(32) }]) {
    const other = { ...config, ...change };
    expect(channelIdOf(other, 84532)).toBe(viem(other, 84532));
    expect(channelIdOf(other, 84532)).not.toBe(channelIdOf(config, 84532));
  }
});
