/**
 * Vouchers, claims and settlement on the dev chain's batch-settlement contract, with vouchers signed by the
 * official @x402/evm client and claims and settlements sent by the official facilitator (claimWithSignature
 * under its receiver authorizer's ClaimBatch signature): cumulative vouchers, many channels and receivers in
 * one transaction, the sweep to the receivers, a contract-wallet payer (ERC-1271), every claim that must fail
 * (with nothing recorded), and the gas a claim costs per channel.
 */
import type { BatchSettlementVoucherClaim } from '@x402/evm';
import type { PaymentRequirements } from '@x402/core/types';
import { keccak256, parseEventLogs, toHex, zeroAddress, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { toClientEvmSigner } from '@x402/evm';
import { ERC3009_DEPOSIT_COLLECTOR_ADDRESS } from '../../server/payments/schemes/batch-settlement/evm/chain.js';
import { usdcAbi } from '../../server/chain/usdc.js';
import {
  BATCH_SETTLEMENT_ADDRESS,
  ONE_USDC,
  OfficialChannelClient,
  batchSettlementAbi,
  channelState,
  claimRow,
  contractClaim,
  contractConfig,
  depositThroughFacilitator,
  envelope,
  erc3009CollectorData,
  eventsOf,
  fundedBuyer,
  officialDeposit,
  officialVoucher,
  randomSalt,
  receiverState,
  requirements,
  revertOf,
  send,
  startChannelWorld,
  usdcOf,
  type ChannelConfig,
  type ChannelWorld,
} from './support.js';

let world: ChannelWorld;
beforeAll(async () => { world = await startChannelWorld(); });
afterAll(async () => { await world?.stop(); });

const CENT = ONE_USDC / 100n;

interface OpenChannel {
  buyer: PrivateKeyAccount;
  config: ChannelConfig;
  channelId: Hex;
  accepted: PaymentRequirements;
  /** The deposit's transaction. */
  opened: Hex;
}

/** A channel opened by the official client's deposit, sent by the official facilitator. */
async function openChannel(buyer: PrivateKeyAccount, options: { receiver?: Address; deposit?: bigint } = {}): Promise<OpenChannel> {
  const accepted = requirements(world, { amount: CENT, ...(options.receiver ? { receiver: options.receiver } : {}) });
  const deposit = await officialDeposit(world, buyer, { depositUsdc: options.deposit ?? ONE_USDC, salt: randomSalt(), requirements: accepted });
  const settled = await depositThroughFacilitator(world, deposit);
  return { buyer, config: contractConfig(deposit.payload.channelConfig), channelId: deposit.payload.voucher.channelId, accepted, opened: settled.transaction as Hex };
}

/** A claim sent by the official facilitator; its receiver authorizer signs the batch. */
async function claimThroughFacilitator(accepted: PaymentRequirements, claims: BatchSettlementVoucherClaim[]) {
  const settled = await world.facilitator.settle(envelope(accepted, { type: 'claim', claims }), accepted);
  if (!settled.success) throw new Error(`claim failed: ${settled.errorReason} ${settled.errorMessage ?? ''}`);
  return world.dev.publicClient.getTransactionReceipt({ hash: settled.transaction as Hex });
}

/** The row claiming `total` (cumulative) with the official client's voucher for `ceiling`. */
async function row(channel: OpenChannel, ceiling: bigint, total = ceiling, signer: PrivateKeyAccount = channel.buyer) {
  return claimRow(channel.config, await officialVoucher(world, signer, channel.channelId, ceiling), total);
}

describe('cumulative vouchers from the official client', () => {
  it('each verifies with the official facilitator; the latest claims everything, an older one then changes nothing', async () => {
    const channel = await openChannel(await fundedBuyer(world, '10'));
    const vouchers = [];
    for (const cents of [1n, 2n, 3n]) {
      const voucher = await officialVoucher(world, channel.buyer, channel.channelId, cents * CENT);
      const payment = envelope(channel.accepted, { type: 'voucher', channelConfig: channel.config, voucher });
      expect(await world.facilitator.verify(payment, channel.accepted)).toMatchObject({ isValid: true, extra: { channelId: channel.channelId, balance: ONE_USDC.toString(), totalClaimed: '0' } });
      vouchers.push(voucher);
    }
    const before = await receiverState(world, world.receiver);
    const receipt = await claimThroughFacilitator(channel.accepted, [claimRow(channel.config, vouchers[2]!, 3n * CENT)]);
    expect(eventsOf(receipt).map((e) => [e.eventName, e.args])).toEqual([['Claimed', { channelId: channel.channelId, sender: world.relayer.address, claimAmount: 3n * CENT, newTotalClaimed: 3n * CENT }]]);
    expect(await channelState(world, channel.channelId)).toMatchObject({ balance: ONE_USDC, totalClaimed: 3n * CENT });
    expect(await receiverState(world, world.receiver)).toEqual({ totalClaimed: before.totalClaimed + 3n * CENT, totalSettled: before.totalSettled });

    // Replaying an older voucher (or the same one) is a no-op: the claim is cumulative.
    const replay = await claimThroughFacilitator(channel.accepted, [claimRow(channel.config, vouchers[1]!, 2n * CENT), claimRow(channel.config, vouchers[2]!, 3n * CENT)]);
    expect(eventsOf(replay)).toEqual([]);
    expect(await channelState(world, channel.channelId)).toMatchObject({ totalClaimed: 3n * CENT });
    // And the official facilitator refuses the old voucher as a payment now.
    const old = envelope(channel.accepted, { type: 'voucher', channelConfig: channel.config, voucher: vouchers[1] });
    expect(await world.facilitator.verify(old, channel.accepted)).toMatchObject({ isValid: false, invalidReason: 'invalid_batch_settlement_evm_cumulative_below_claimed' });
  });

  it('a claim may stay below the voucher\'s ceiling (the seller charged less); a later claim with the same voucher takes the rest', async () => {
    const channel = await openChannel(await fundedBuyer(world, '10'));
    await claimThroughFacilitator(channel.accepted, [await row(channel, 5n * CENT, 3n * CENT)]);
    expect((await channelState(world, channel.channelId)).totalClaimed).toBe(3n * CENT);
    const receipt = await claimThroughFacilitator(channel.accepted, [await row(channel, 5n * CENT)]);
    expect(eventsOf(receipt).map((e) => e.args)).toEqual([{ channelId: channel.channelId, sender: world.relayer.address, claimAmount: 2n * CENT, newTotalClaimed: 5n * CENT }]);
  });
});

describe('claims across many channels in one transaction, then one settlement per receiver', () => {
  it('credit each channel and each receiver (rows of several receivers, interleaved); settle sweeps each receiver\'s claims in one transfer, once', async () => {
    const [receiverA, receiverB] = [privateKeyToAccount(generatePrivateKey()).address, privateKeyToAccount(generatePrivateKey()).address];
    const buyers = [await fundedBuyer(world, '10'), await fundedBuyer(world, '10'), await fundedBuyer(world, '10')];
    const channels = [
      await openChannel(buyers[0]!, { receiver: receiverA }),
      await openChannel(buyers[1]!, { receiver: receiverB }),
      await openChannel(buyers[2]!, { receiver: receiverA }),
      await openChannel(buyers[0]!, { receiver: receiverA }),
      await openChannel(buyers[1]!, { receiver: receiverB }),
    ];
    const amounts = [7n, 11n, 13n, 17n, 19n].map((cents) => cents * CENT);
    const rows = await Promise.all(channels.map((c, i) => row(c, amounts[i]!)));
    const receipt = await claimThroughFacilitator(channels[0]!.accepted, rows);

    expect(eventsOf(receipt).map((e) => e.eventName)).toEqual(['Claimed', 'Claimed', 'Claimed', 'Claimed', 'Claimed']);
    for (const [i, c] of channels.entries()) expect((await channelState(world, c.channelId)).totalClaimed).toBe(amounts[i]);
    const owedA = amounts[0]! + amounts[2]! + amounts[3]!;
    const owedB = amounts[1]! + amounts[4]!;
    expect(await receiverState(world, receiverA)).toEqual({ totalClaimed: owedA, totalSettled: 0n });
    expect(await receiverState(world, receiverB)).toEqual({ totalClaimed: owedB, totalSettled: 0n });

    // The official facilitator's settle: one transfer to the receiver, the Settled amount it reports.
    const escrowBefore = await usdcOf(world, BATCH_SETTLEMENT_ADDRESS);
    const settled = await world.facilitator.settle(envelope(channels[0]!.accepted, { type: 'settle', receiver: receiverA, token: world.usdc }), channels[0]!.accepted);
    expect(settled).toMatchObject({ success: true, amount: owedA.toString() });
    expect(await usdcOf(world, receiverA)).toBe(owedA);
    expect(await receiverState(world, receiverA)).toEqual({ totalClaimed: owedA, totalSettled: owedA });
    const again = await world.facilitator.settle(envelope(channels[0]!.accepted, { type: 'settle', receiver: receiverA, token: world.usdc }), channels[0]!.accepted);
    expect(again).toMatchObject({ success: false, errorReason: 'invalid_batch_settlement_evm_nothing_to_settle' });

    // Anyone may settle (the money can only go to the receiver); a second settle, or another token, moves nothing.
    const stranger = privateKeyToAccount(generatePrivateKey());
    await world.dev.publicClient.request({ method: 'anvil_setBalance' as never, params: [stranger.address, toHex(10n ** 18n)] as never });
    const sweep = await send(world, stranger, 'settle', [receiverB, world.usdc]);
    expect(eventsOf(sweep).map((e) => [e.eventName, e.args])).toEqual([['Settled', { receiver: receiverB, token: world.usdc, sender: stranger.address, amount: owedB }]]);
    expect(eventsOf(await send(world, stranger, 'settle', [receiverB, world.usdc]))).toEqual([]);
    expect(eventsOf(await send(world, stranger, 'settle', [receiverA, privateKeyToAccount(generatePrivateKey()).address]))).toEqual([]);
    expect(await usdcOf(world, receiverB)).toBe(owedB);
    expect(await usdcOf(world, BATCH_SETTLEMENT_ADDRESS)).toBe(escrowBefore - owedA - owedB);
    // The channels keep their balances: settled value leaves the escrow, not the channels' accounting.
    expect((await channelState(world, channels[0]!.channelId)).balance).toBe(ONE_USDC);
  });

  it('the receiver or the receiver authorizer may also claim directly, without a batch signature; nobody else may', async () => {
    const channel = await openChannel(await fundedBuyer(world, '10'));
    const receiverKey = privateKeyToAccount(generatePrivateKey());
    const ownChannel = await openChannel(channel.buyer, { receiver: receiverKey.address });
    await world.dev.publicClient.request({ method: 'anvil_setBalance' as never, params: [receiverKey.address, toHex(10n ** 18n)] as never });

    const byAuthorizer = contractClaim(await row(channel, 4n * CENT));
    expect(await revertOf(world, privateKeyToAccount(generatePrivateKey()).address, 'claim', [[byAuthorizer]])).toBe('NotAuthorizedToClaim');
    expect(await revertOf(world, receiverKey.address, 'claim', [[byAuthorizer]])).toBe('NotAuthorizedToClaim'); // not this channel's receiver
    const receipt = await send(world, world.authorizer, 'claim', [[byAuthorizer]]);
    expect(eventsOf(receipt).map((e) => e.args)).toEqual([{ channelId: channel.channelId, sender: world.authorizer.address, claimAmount: 4n * CENT, newTotalClaimed: 4n * CENT }]);

    await send(world, receiverKey, 'claim', [[contractClaim(await row(ownChannel, 6n * CENT))]]);
    expect((await channelState(world, ownChannel.channelId)).totalClaimed).toBe(6n * CENT);
    expect(await receiverState(world, receiverKey.address)).toEqual({ totalClaimed: 6n * CENT, totalSettled: 0n });
  });
});

describe('a claim that must fail records nothing', () => {
  let channel: OpenChannel;
  let other: OpenChannel;
  beforeAll(async () => {
    channel = await openChannel(await fundedBuyer(world, '10'));
    other = await openChannel(await fundedBuyer(world, '10'));
  });
  const claimRevert = async (rows: BatchSettlementVoucherClaim[], sender: Address = world.authorizer.address) => revertOf(world, sender, 'claim', [rows.map(contractClaim)]);

  it('claiming more than the voucher allows (ClaimExceedsCeiling) or than the channel holds (ClaimExceedsBalance)', async () => {
    expect(await claimRevert([await row(channel, 5n * CENT, 5n * CENT + 1n)])).toBe('ClaimExceedsCeiling');
    // The client signs whatever it is asked; the chain caps it at the deposit. The facilitator refuses it too.
    const overDeposit = await officialVoucher(world, channel.buyer, channel.channelId, ONE_USDC + 1n);
    expect(await claimRevert([claimRow(channel.config, overDeposit, ONE_USDC + 1n)])).toBe('ClaimExceedsBalance');
    const payment = envelope(channel.accepted, { type: 'voucher', channelConfig: channel.config, voucher: overDeposit });
    expect(await world.facilitator.verify(payment, channel.accepted)).toMatchObject({ isValid: false, invalidReason: 'invalid_batch_settlement_evm_cumulative_exceeds_balance' });
    // Up to the deposit is fine.
    await claimThroughFacilitator(channel.accepted, [claimRow(channel.config, overDeposit, ONE_USDC)]);
    expect((await channelState(world, channel.channelId)).totalClaimed).toBe(ONE_USDC);
  });

  it('a voucher not signed by the payer\'s authorizer, one for another channel, a tampered amount or recovery id: InvalidSignature', async () => {
    const stranger = privateKeyToAccount(generatePrivateKey());
    expect(await claimRevert([await row(other, 2n * CENT, 2n * CENT, stranger)])).toBe('InvalidSignature');
    const foreign = await officialVoucher(world, channel.buyer, channel.channelId, 2n * CENT); // same payer, the other channel's id
    const sameBuyerOther = await openChannel(channel.buyer);
    expect(await claimRevert([claimRow(sameBuyerOther.config, foreign, 2n * CENT)])).toBe('InvalidSignature');
    const signed = await officialVoucher(world, other.buyer, other.channelId, 2n * CENT);
    expect(await claimRevert([claimRow(other.config, { ...signed, maxClaimableAmount: (3n * CENT).toString() }, 3n * CENT)])).toBe('InvalidSignature');
    expect(await claimRevert([claimRow(other.config, { ...signed, signature: `${signed.signature.slice(0, 130)}${signed.signature.endsWith('1b') ? '1c' : '1b'}` as Hex }, 2n * CENT)])).toBe('InvalidSignature');
  });

  it('a malformed voucher signature fails with OpenZeppelin ECDSA\'s errors, as in the reference contract', async () => {
    const signed = await officialVoucher(world, other.buyer, other.channelId, 2n * CENT);
    const withSignature = (signature: Hex) => claimRow(other.config, { ...signed, signature }, 2n * CENT);
    expect(await claimRevert([withSignature('0x')])).toBe('ECDSAInvalidSignatureLength');
    expect(await claimRevert([withSignature(signed.signature.slice(0, 130) as Hex)])).toBe('ECDSAInvalidSignatureLength');
    // The same signature in its malleable form (s' = n - s, v flipped) is refused.
    const n = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
    const s = BigInt(`0x${signed.signature.slice(66, 130)}`);
    const flippedV = signed.signature.endsWith('1b') ? '1c' : '1b';
    expect(await claimRevert([withSignature(`${signed.signature.slice(0, 66)}${(n - s).toString(16).padStart(64, '0')}${flippedV}` as Hex)])).toBe('ECDSAInvalidSignatureS');
    // r = 0 recovers no address.
    expect(await claimRevert([withSignature(`0x${'00'.repeat(32)}${signed.signature.slice(66)}` as Hex)])).toBe('ECDSAInvalidSignature');
  });

  it('one bad row fails the whole batch: the good rows before it are not recorded', async () => {
    const good = await row(other, 3n * CENT);
    const bad = await row(other, 9n * CENT, 9n * CENT, privateKeyToAccount(generatePrivateKey()));
    expect(await claimRevert([good, bad])).toBe('InvalidSignature');
    const settled = await world.facilitator.settle(envelope(other.accepted, { type: 'claim', claims: [good, bad] }), other.accepted);
    expect(settled).toMatchObject({ success: false, errorReason: 'invalid_batch_settlement_evm_claim_simulation_failed' });
    expect((await channelState(world, other.channelId)).totalClaimed).toBe(0n);
  });

  it('claimWithSignature: a batch signature from anyone but the receiver authorizer, a batch mixing authorizers, a batch signature for other rows, an empty batch', async () => {
    const rows = [contractClaim(await row(other, 2n * CENT))];
    const digest = await world.dev.publicClient.readContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: 'getClaimBatchDigest', args: [rows] });
    const stranger = privateKeyToAccount(generatePrivateKey());
    const relay = world.relayer.address;
    expect(await revertOf(world, relay, 'claimWithSignature', [rows, await stranger.sign({ hash: digest })])).toBe('InvalidSignature');
    expect(await revertOf(world, relay, 'claimWithSignature', [rows, '0x'])).toBe('InvalidSignature');
    // Signed for 2 cents; relayed with 3 cents claimed.
    const authorized = await world.authorizer.sign({ hash: digest });
    const inflated = [{ ...rows[0]!, voucher: rows[0]!.voucher, totalClaimed: 3n * CENT }];
    expect(await revertOf(world, relay, 'claimWithSignature', [inflated, authorized])).toBe('InvalidSignature');

    // A second receiver authorizer's channel in a batch the first one signed.
    const otherAuthorizer = privateKeyToAccount(generatePrivateKey());
    const buyer = await fundedBuyer(world, '10');
    const accepted = requirements(world, { receiverAuthorizer: otherAuthorizer.address });
    const deposit = await officialDeposit(world, buyer, { depositUsdc: ONE_USDC, salt: randomSalt(), requirements: accepted });
    await send(world, world.relayer, 'deposit', [contractConfig(deposit.payload.channelConfig), ONE_USDC, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, erc3009CollectorData(deposit.payload)]);
    const foreignRow = contractClaim(claimRow(contractConfig(deposit.payload.channelConfig), await officialVoucher(world, buyer, deposit.payload.voucher.channelId, CENT), CENT));
    const mixed = [...rows, foreignRow];
    const mixedDigest = await world.dev.publicClient.readContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: 'getClaimBatchDigest', args: [mixed] });
    expect(await revertOf(world, relay, 'claimWithSignature', [mixed, await world.authorizer.sign({ hash: mixedDigest })])).toBe('NotReceiverAuthorizer');

    expect(await revertOf(world, relay, 'claimWithSignature', [[], authorized])).toBe('EmptyBatch');
    expect(await revertOf(world, world.authorizer.address, 'claim', [[]])).toBe('EmptyBatch');
    // The batch as signed goes through.
    await send(world, world.relayer, 'claimWithSignature', [rows, authorized]);
    expect((await channelState(world, other.channelId)).totalClaimed).toBe(2n * CENT);
  });
});

describe('a contract-wallet payer (ERC-1271) with no separate voucher key', () => {
  it('deposits through the EIP-3009 collector and its vouchers are claimed; a voucher its owner did not sign is refused', async () => {
    const owner = privateKeyToAccount(generatePrivateKey());
    const salt = keccak256(toHex('wallet'));
    const factory = world.dev.deployment.factoryAddress;
    const factoryAbi = [
      { type: 'function', name: 'createAccount', stateMutability: 'nonpayable', inputs: [{ name: 'owner', type: 'address' }, { name: 'salt', type: 'bytes32' }], outputs: [{ type: 'address' }] },
      { type: 'function', name: 'getAddress', stateMutability: 'view', inputs: [{ name: 'owner', type: 'address' }, { name: 'salt', type: 'bytes32' }], outputs: [{ type: 'address' }] },
    ] as const;
    const wallet = await world.dev.publicClient.readContract({ address: factory, abi: factoryAbi, functionName: 'getAddress', args: [owner.address, salt] });
    await world.dev.publicClient.waitForTransactionReceipt({ hash: await world.dev.walletFor(world.relayer).writeContract({ address: factory, abi: factoryAbi, functionName: 'createAccount', args: [owner.address, salt] }) });
    await world.dev.publicClient.waitForTransactionReceipt({ hash: await world.dev.walletFor(world.dev.buyers[0]!).writeContract({ address: world.usdc, abi: usdcAbi, functionName: 'transfer', args: [wallet, 10n * ONE_USDC] }) });

    // The wallet's owner signs the raw EIP-712 digests; the wallet answers ERC-1271 for them.
    const walletSigner = toClientEvmSigner({ address: wallet, signTypedData: (message) => owner.signTypedData(message as never) }, world.dev.publicClient);
    const client = new OfficialChannelClient(walletSigner, { payerAuthorizer: zeroAddress, depositStrategy: () => ONE_USDC.toString() });
    const accepted = requirements(world, { amount: CENT });
    const created = await client.createPaymentPayload(2, accepted);
    const deposit = created.payload as unknown as Awaited<ReturnType<typeof officialDeposit>>['payload'];
    expect(deposit.channelConfig).toMatchObject({ payer: wallet, payerAuthorizer: zeroAddress });
    await depositThroughFacilitator(world, { accepted, payload: deposit, payment: envelope(accepted, deposit) });
    const config = contractConfig(deposit.channelConfig);
    const channelId = deposit.voucher.channelId;
    expect((await channelState(world, channelId)).balance).toBe(ONE_USDC);

    const signedByOwner = await officialVoucher(world, walletSigner, channelId, 5n * CENT);
    const payment = envelope(accepted, { type: 'voucher', channelConfig: config, voucher: signedByOwner });
    expect(await world.facilitator.verify(payment, accepted)).toMatchObject({ isValid: true });
    const notOwner = await officialVoucher(world, privateKeyToAccount(generatePrivateKey()), channelId, 6n * CENT);
    expect(await revertOf(world, world.authorizer.address, 'claim', [[contractClaim(claimRow(config, notOwner, 6n * CENT))]])).toBe('InvalidSignature');
    await claimThroughFacilitator(accepted, [claimRow(config, signedByOwner, 5n * CENT)]);
    expect((await channelState(world, channelId)).totalClaimed).toBe(5n * CENT);
  });
});

describe('gas', () => {
  it('a claim of many channels costs little per channel (claimWithSignature through the official facilitator)', async () => {
    const buyers: PrivateKeyAccount[] = [];
    for (let i = 0; i < 5; i++) buyers.push(await fundedBuyer(world, '100'));
    const open = async (count: number) => {
      const channels: OpenChannel[] = [];
      for (let i = 0; i < count; i++) channels.push(await openChannel(buyers[i % buyers.length]!));
      return channels;
    };
    // The receiver's first claim ever writes its totals' slot from zero (20k gas once): done before measuring.
    const warmUp = await open(1);
    await claimThroughFacilitator(warmUp[0]!.accepted, [await row(warmUp[0]!, CENT)]);

    const figures: Record<number, { gasUsed: bigint; perChannel: bigint }> = {};
    for (const count of [1, 10, 50]) {
      const channels = await open(count);
      const rows = await Promise.all(channels.map((c, i) => row(c, BigInt(i + 1) * CENT)));
      const receipt = await claimThroughFacilitator(channels[0]!.accepted, rows);
      expect(parseEventLogs({ abi: batchSettlementAbi, logs: receipt.logs, eventName: 'Claimed' })).toHaveLength(count);
      figures[count] = { gasUsed: receipt.gasUsed, perChannel: receipt.gasUsed / BigInt(count) };
    }
    const marginal = (figures[50]!.gasUsed - figures[1]!.gasUsed) / 49n;
    // One settle pays the receiver for all 61 channels.
    const settled = await world.facilitator.settle(envelope(warmUp[0]!.accepted, { type: 'settle', receiver: world.receiver, token: world.usdc }), warmUp[0]!.accepted);
    const gasOf = async (hash: Hex) => (await world.dev.publicClient.getTransactionReceipt({ hash })).gasUsed;
    const settleGas = await gasOf(settled.transaction as Hex);
    const depositGas = await gasOf(warmUp[0]!.opened);
    process.stdout.write(`[batch-settlement gas] claimWithSignature: ${[1, 10, 50].map((n) => `${n} channel(s) ${figures[n]!.gasUsed} gas (${figures[n]!.perChannel}/channel)`).join('; ')}; each added channel ${marginal}; settle ${settleGas}; first EIP-3009 deposit ${depositGas}\n`);
    // About 20k per added channel, of which ~4.4k is its calldata (~480 bytes: config, voucher, signature) and
    // ~10k what no implementation avoids (the channel's storage slot, the payer's ECDSA, the Claimed event).
    expect(figures[50]!.perChannel).toBeLessThan(21_500n);
    expect(marginal).toBeLessThan(20_500n);
  });
});
