/**
 * Getting unclaimed escrow back on the dev chain's batch-settlement contract: the cooperative refund (sent by
 * the official facilitator as claim + refundWithSignature in one multicall, or called directly by the receiver
 * side, or relayed with the receiver authorizer's signature) and the payer's timed withdrawal (initiate, wait
 * the channel's withdraw delay with anvil's clock moved forward, finalize), with the claims that race it, and
 * every call that must fail. This file moves its node's clock: its deposits allow for that.
 */
import { refundTypes } from '@x402/evm';
import type { PaymentRequirements } from '@x402/core/types';
import { encodeFunctionData, parseUnits, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { batchSettlementDomain } from '../../server/payments/schemes/batch-settlement/evm/chain.js';
import {
  BATCH_SETTLEMENT_ADDRESS,
  ONE_USDC,
  WITHDRAW_DELAY,
  batchSettlementAbi,
  channelState,
  claimRow,
  contractClaim,
  contractConfig,
  depositThroughFacilitator,
  envelope,
  eventsOf,
  fundedBuyer,
  increaseTime,
  officialDeposit,
  officialVoucher,
  randomSalt,
  receiverState,
  requirements,
  revertOf,
  send,
  setEthBalance,
  startChannelWorld,
  usdcOf,
  type ChannelConfig,
  type ChannelWorld,
} from './support.js';

let world: ChannelWorld;
/** The seller's receiver key (it calls refund itself in some tests). */
let receiver: PrivateKeyAccount;
beforeAll(async () => {
  world = await startChannelWorld();
  receiver = privateKeyToAccount(generatePrivateKey());
  world.receiver = receiver.address;
  await setEthBalance(world.dev, receiver.address, parseUnits('10', 18));
});
afterAll(async () => { await world?.stop(); });

const CENT = ONE_USDC / 100n;

interface OpenChannel {
  buyer: PrivateKeyAccount;
  /** Signs the vouchers (the buyer, unless the channel has a separate payer authorizer). */
  voucherKey: PrivateKeyAccount;
  config: ChannelConfig;
  channelId: Hex;
  accepted: PaymentRequirements;
}

/** A channel holding 1 USDC, opened by the official client's deposit and the official facilitator. */
async function openChannel(options: { voucherSigner?: PrivateKeyAccount; buyer?: PrivateKeyAccount } = {}): Promise<OpenChannel> {
  const buyer = options.buyer ?? await fundedBuyer(world, '10');
  // A day's validity: this file moves the chain's clock forward by the withdraw delay, more than once.
  const accepted = requirements(world, { amount: CENT, maxTimeoutSeconds: 86_400 });
  const deposit = await officialDeposit(world, buyer, { depositUsdc: ONE_USDC, salt: randomSalt(), requirements: accepted, ...(options.voucherSigner ? { voucherSigner: options.voucherSigner } : {}) });
  await depositThroughFacilitator(world, deposit);
  return { buyer, voucherKey: options.voucherSigner ?? buyer, config: contractConfig(deposit.payload.channelConfig), channelId: deposit.payload.voucher.channelId, accepted };
}

const voucher = (channel: OpenChannel, amount: bigint) => officialVoucher(world, channel.voucherKey, channel.channelId, amount);

function signRefund(signer: PrivateKeyAccount, channelId: Hex, nonce: bigint, amount: bigint): Promise<Hex> {
  return signer.signTypedData({ domain: batchSettlementDomain(world.chainId), types: refundTypes, primaryType: 'Refund', message: { channelId, nonce, amount } });
}

describe('cooperative refund', () => {
  it('through the official facilitator: what was charged is claimed and the rest returned to the payer, in one transaction', async () => {
    const channel = await openChannel();
    // The seller charged 30 cents; the client asks for its money back with a zero-charge voucher at 30 cents.
    const zeroCharge = await voucher(channel, 30n * CENT);
    const request = envelope(channel.accepted, { type: 'refund', channelConfig: channel.config, voucher: zeroCharge });
    expect(await world.facilitator.verify(request, channel.accepted)).toMatchObject({ isValid: true, extra: { balance: ONE_USDC.toString(), totalClaimed: '0', refundNonce: '0' } });
    const payerBefore = await usdcOf(world, channel.buyer.address);
    const sellerBefore = await receiverState(world, receiver.address);

    const refund = { type: 'refund', channelConfig: channel.config, voucher: zeroCharge, amount: (70n * CENT).toString(), refundNonce: '0', claims: [claimRow(channel.config, zeroCharge, 30n * CENT)] };
    const settled = await world.facilitator.settle(envelope(channel.accepted, refund), channel.accepted);
    expect(settled).toMatchObject({ success: true, amount: (70n * CENT).toString(), extra: { channelState: { balance: (30n * CENT).toString(), totalClaimed: (30n * CENT).toString(), refundNonce: '1' } } });

    const receipt = await world.dev.publicClient.getTransactionReceipt({ hash: settled.transaction as Hex });
    expect(receipt.to?.toLowerCase()).toBe(BATCH_SETTLEMENT_ADDRESS.toLowerCase());
    expect(eventsOf(receipt).map((e) => [e.eventName, e.args])).toEqual([
      ['Claimed', { channelId: channel.channelId, sender: world.relayer.address, claimAmount: 30n * CENT, newTotalClaimed: 30n * CENT }],
      ['Refunded', { channelId: channel.channelId, sender: world.relayer.address, amount: 70n * CENT }],
    ]);
    expect(await usdcOf(world, channel.buyer.address)).toBe(payerBefore + 70n * CENT);
    expect(await channelState(world, channel.channelId)).toMatchObject({ balance: 30n * CENT, totalClaimed: 30n * CENT, refundNonce: 1n });
    // The seller is owed the 30 cents it claimed.
    expect(await receiverState(world, receiver.address)).toEqual({ totalClaimed: sellerBefore.totalClaimed + 30n * CENT, totalSettled: sellerBefore.totalSettled });
  });

  it('a full refund of an unused channel closes it (ChannelClosed); a new deposit opens it again (ChannelCreated)', async () => {
    const channel = await openChannel();
    const zeroCharge = await voucher(channel, 0n);
    const refund = { type: 'refund', channelConfig: channel.config, voucher: zeroCharge, amount: ONE_USDC.toString(), refundNonce: '0', claims: [] };
    const settled = await world.facilitator.settle(envelope(channel.accepted, refund), channel.accepted);
    expect(settled).toMatchObject({ success: true, amount: ONE_USDC.toString() });
    const receipt = await world.dev.publicClient.getTransactionReceipt({ hash: settled.transaction as Hex });
    expect(eventsOf(receipt).map((e) => e.eventName)).toEqual(['Refunded', 'ChannelClosed']);
    expect(await channelState(world, channel.channelId)).toMatchObject({ balance: 0n, totalClaimed: 0n, refundNonce: 1n });

    const again = await officialDeposit(world, channel.buyer, { depositUsdc: ONE_USDC, salt: channel.config.salt, requirements: channel.accepted });
    expect(again.payload.voucher.channelId).toBe(channel.channelId);
    const reopened = await depositThroughFacilitator(world, again);
    expect(eventsOf(await world.dev.publicClient.getTransactionReceipt({ hash: reopened.transaction as Hex })).map((e) => e.eventName)).toEqual(['ChannelCreated', 'Deposited']);
  });

  it('called directly by the receiver or the receiver authorizer, capped at what is unclaimed; the nonce moves even when nothing is left', async () => {
    const channel = await openChannel();
    await send(world, world.authorizer, 'claim', [[contractClaim(claimRow(channel.config, await voucher(channel, 40n * CENT), 40n * CENT))]]);
    const payerBefore = await usdcOf(world, channel.buyer.address);

    const first = await send(world, receiver, 'refund', [channel.config, 10n * CENT]);
    expect(eventsOf(first).map((e) => [e.eventName, e.args])).toEqual([['Refunded', { channelId: channel.channelId, sender: receiver.address, amount: 10n * CENT }]]);
    // Asking for more than is unclaimed returns what is unclaimed: 100 - 40 claimed - 10 refunded = 50.
    const second = await send(world, world.authorizer, 'refund', [channel.config, ONE_USDC]);
    expect(eventsOf(second).map((e) => e.args)).toEqual([{ channelId: channel.channelId, sender: world.authorizer.address, amount: 50n * CENT }]);
    expect(await usdcOf(world, channel.buyer.address)).toBe(payerBefore + 60n * CENT);
    expect(await channelState(world, channel.channelId)).toMatchObject({ balance: 40n * CENT, totalClaimed: 40n * CENT, refundNonce: 2n });
    // Nothing left to return: no transfer, no event, but the nonce moves (a signed refund for nonce 2 is now stale).
    expect(eventsOf(await send(world, receiver, 'refund', [channel.config, CENT]))).toEqual([]);
    expect(await channelState(world, channel.channelId)).toMatchObject({ balance: 40n * CENT, refundNonce: 3n });
    expect(await usdcOf(world, channel.buyer.address)).toBe(payerBefore + 60n * CENT);
  });

  it('refused: from anyone else (the payer included), for zero', async () => {
    const channel = await openChannel();
    for (const who of [channel.buyer.address, world.relayer.address, privateKeyToAccount(generatePrivateKey()).address]) {
      expect(await revertOf(world, who, 'refund', [channel.config, CENT])).toBe('NotAuthorizedToRefund');
    }
    expect(await revertOf(world, receiver.address, 'refund', [channel.config, 0n])).toBe('ZeroRefund');
  });

  it('refundWithSignature: anyone relays the receiver authorizer\'s signature for the current nonce, once; other signers, amounts and nonces are refused', async () => {
    const channel = await openChannel();
    const relay = privateKeyToAccount(generatePrivateKey());
    await setEthBalance(world.dev, relay.address, parseUnits('1', 18));
    const signed = await signRefund(world.authorizer, channel.channelId, 0n, 25n * CENT);

    expect(await revertOf(world, relay.address, 'refundWithSignature', [channel.config, 25n * CENT, 0n, await signRefund(channel.buyer, channel.channelId, 0n, 25n * CENT)])).toBe('InvalidSignature');
    expect(await revertOf(world, relay.address, 'refundWithSignature', [channel.config, 26n * CENT, 0n, signed])).toBe('InvalidSignature');
    expect(await revertOf(world, relay.address, 'refundWithSignature', [channel.config, 25n * CENT, 1n, signed])).toBe('InvalidRefundNonce');
    expect(await revertOf(world, relay.address, 'refundWithSignature', [channel.config, 0n, 0n, await signRefund(world.authorizer, channel.channelId, 0n, 0n)])).toBe('ZeroRefund');

    const receipt = await send(world, relay, 'refundWithSignature', [channel.config, 25n * CENT, 0n, signed]);
    expect(eventsOf(receipt).map((e) => e.args)).toEqual([{ channelId: channel.channelId, sender: relay.address, amount: 25n * CENT }]);
    expect(await revertOf(world, relay.address, 'refundWithSignature', [channel.config, 25n * CENT, 0n, signed])).toBe('InvalidRefundNonce');

    // A direct refund advances the nonce, so a signature made for the previous one is stale.
    const presigned = await signRefund(world.authorizer, channel.channelId, 1n, 5n * CENT);
    await send(world, receiver, 'refund', [channel.config, CENT]);
    expect(await revertOf(world, relay.address, 'refundWithSignature', [channel.config, 5n * CENT, 1n, presigned])).toBe('InvalidRefundNonce');
    expect(await channelState(world, channel.channelId)).toMatchObject({ balance: 74n * CENT, refundNonce: 2n });
  });

  it('multicall is all or nothing: a failing call reverts the calls before it, with its own error', async () => {
    const channel = await openChannel();
    const claim = encodeFunctionData({ abi: batchSettlementAbi, functionName: 'claim', args: [[contractClaim(claimRow(channel.config, await voucher(channel, 20n * CENT), 20n * CENT))]] });
    const badRefund = encodeFunctionData({ abi: batchSettlementAbi, functionName: 'refund', args: [channel.config, 0n] });
    expect(await revertOf(world, world.authorizer.address, 'multicall', [[claim, badRefund]])).toBe('ZeroRefund');
    expect((await channelState(world, channel.channelId)).totalClaimed).toBe(0n);
    const goodRefund = encodeFunctionData({ abi: batchSettlementAbi, functionName: 'refund', args: [channel.config, 80n * CENT] });
    const receipt = await send(world, world.authorizer, 'multicall', [[claim, goodRefund]]);
    expect(eventsOf(receipt).map((e) => e.eventName)).toEqual(['Claimed', 'Refunded']);
    // msg.sender is kept through the multicall: the authorizer claimed and refunded.
    expect(eventsOf(receipt).map((e) => (e.args as { sender: Address }).sender)).toEqual([world.authorizer.address, world.authorizer.address]);
    expect(await channelState(world, channel.channelId)).toMatchObject({ balance: 20n * CENT, totalClaimed: 20n * CENT });
  });
});

describe('timed withdrawal by the payer', () => {
  it('initiate; claims still land during the delay; after it, finalize pays the payer what is unclaimed', async () => {
    const channel = await openChannel();
    const payer = channel.buyer;
    const initiated = await send(world, payer, 'initiateWithdraw', [channel.config, ONE_USDC]);
    const block = await world.dev.publicClient.getBlock({ blockNumber: initiated.blockNumber });
    expect(eventsOf(initiated).map((e) => e.args)).toEqual([{ channelId: channel.channelId, amount: ONE_USDC, finalizeAfter: Number(block.timestamp) + WITHDRAW_DELAY }]);
    expect(await channelState(world, channel.channelId)).toMatchObject({ withdrawing: ONE_USDC, initiatedAt: Number(block.timestamp) });
    // The official facilitator reports the pending withdrawal to the seller, who should claim now.
    const outstanding = await voucher(channel, 40n * CENT);
    const check = await world.facilitator.verify(envelope(channel.accepted, { type: 'voucher', channelConfig: channel.config, voucher: outstanding }), channel.accepted);
    expect(check).toMatchObject({ isValid: true, extra: { withdrawRequestedAt: Number(block.timestamp) } });

    expect(await revertOf(world, payer.address, 'finalizeWithdraw', [channel.config])).toBe('WithdrawDelayNotElapsed');
    await send(world, world.authorizer, 'claim', [[contractClaim(claimRow(channel.config, outstanding, 40n * CENT))]]);
    await increaseTime(world, WITHDRAW_DELAY + 1);

    const payerBefore = await usdcOf(world, payer.address);
    const finalized = await send(world, payer, 'finalizeWithdraw', [channel.config]);
    expect(eventsOf(finalized).map((e) => [e.eventName, e.args])).toEqual([['WithdrawFinalized', { channelId: channel.channelId, sender: payer.address, amount: 60n * CENT }]]);
    expect(await usdcOf(world, payer.address)).toBe(payerBefore + 60n * CENT);
    expect(await channelState(world, channel.channelId)).toMatchObject({ balance: 40n * CENT, totalClaimed: 40n * CENT, withdrawing: 0n, initiatedAt: 0 });
    // The claimed 40 cents stay the seller's: settle pays them (with what earlier tests claimed for this receiver).
    const owed = await receiverState(world, receiver.address);
    expect(owed.totalClaimed - owed.totalSettled).toBeGreaterThanOrEqual(40n * CENT);
    const receiverBefore = await usdcOf(world, receiver.address);
    await send(world, world.relayer, 'settle', [receiver.address, world.usdc]);
    expect(await usdcOf(world, receiver.address)).toBe(receiverBefore + owed.totalClaimed - owed.totalSettled);
  });

  it('a voucher the seller did not claim before the withdrawal completed is lost to it: the late claim fails, the channel closed', async () => {
    const channel = await openChannel();
    const unclaimed = await voucher(channel, 50n * CENT);
    await send(world, channel.buyer, 'initiateWithdraw', [channel.config, ONE_USDC]);
    await increaseTime(world, WITHDRAW_DELAY + 1);
    const finalized = await send(world, channel.buyer, 'finalizeWithdraw', [channel.config]);
    expect(eventsOf(finalized).map((e) => e.eventName)).toEqual(['WithdrawFinalized', 'ChannelClosed']);
    expect(await revertOf(world, world.authorizer.address, 'claim', [[contractClaim(claimRow(channel.config, unclaimed, 50n * CENT))]])).toBe('ClaimExceedsBalance');
    expect(await channelState(world, channel.channelId)).toMatchObject({ balance: 0n, totalClaimed: 0n });
  });

  it('the payer\'s voucher key (payerAuthorizer) may initiate and finalize too; the funds go to the payer; only its vouchers count', async () => {
    const voucherSigner = privateKeyToAccount(generatePrivateKey());
    await setEthBalance(world.dev, voucherSigner.address, parseUnits('1', 18));
    const channel = await openChannel({ voucherSigner });
    expect(channel.config.payerAuthorizer).toBe(voucherSigner.address);
    // With a payer authorizer set, a voucher signed by the payer itself is not valid.
    const byPayer = await officialVoucher(world, channel.buyer, channel.channelId, 10n * CENT);
    expect(await revertOf(world, world.authorizer.address, 'claim', [[contractClaim(claimRow(channel.config, byPayer, 10n * CENT))]])).toBe('InvalidSignature');
    await send(world, world.authorizer, 'claim', [[contractClaim(claimRow(channel.config, await voucher(channel, 10n * CENT), 10n * CENT))]]);

    await send(world, voucherSigner, 'initiateWithdraw', [channel.config, 90n * CENT]);
    await increaseTime(world, WITHDRAW_DELAY + 1);
    const payerBefore = await usdcOf(world, channel.buyer.address);
    const finalized = await send(world, voucherSigner, 'finalizeWithdraw', [channel.config]);
    expect(eventsOf(finalized).map((e) => e.args)).toEqual([{ channelId: channel.channelId, sender: voucherSigner.address, amount: 90n * CENT }]);
    expect(await usdcOf(world, channel.buyer.address)).toBe(payerBefore + 90n * CENT);
    expect(await usdcOf(world, voucherSigner.address)).toBe(0n);
  });

  it('a cooperative refund during the delay shrinks the pending withdrawal, or ends it when it covers it', async () => {
    const channel = await openChannel();
    await send(world, channel.buyer, 'initiateWithdraw', [channel.config, 60n * CENT]);
    await send(world, receiver, 'refund', [channel.config, 20n * CENT]);
    expect(await channelState(world, channel.channelId)).toMatchObject({ balance: 80n * CENT, withdrawing: 40n * CENT });
    await send(world, receiver, 'refund', [channel.config, 50n * CENT]);
    expect(await channelState(world, channel.channelId)).toMatchObject({ balance: 30n * CENT, withdrawing: 0n, initiatedAt: 0 });
    expect(await revertOf(world, channel.buyer.address, 'finalizeWithdraw', [channel.config])).toBe('WithdrawalNotPending');
  });

  it('refused: initiating by anyone but the payer side, for zero, for more than is unclaimed, twice; finalizing by anyone else, or with nothing pending', async () => {
    const channel = await openChannel();
    await send(world, world.authorizer, 'claim', [[contractClaim(claimRow(channel.config, await voucher(channel, 30n * CENT), 30n * CENT))]]);
    const stranger = privateKeyToAccount(generatePrivateKey()).address;
    for (const who of [stranger, receiver.address, world.authorizer.address]) {
      expect(await revertOf(world, who, 'initiateWithdraw', [channel.config, CENT])).toBe('InvalidChannel');
    }
    const payer = channel.buyer.address;
    expect(await revertOf(world, payer, 'initiateWithdraw', [channel.config, 0n])).toBe('NothingToWithdraw');
    expect(await revertOf(world, payer, 'initiateWithdraw', [channel.config, 70n * CENT + 1n])).toBe('WithdrawAmountExceedsAvailable');
    expect(await revertOf(world, payer, 'finalizeWithdraw', [channel.config])).toBe('WithdrawalNotPending');
    await send(world, channel.buyer, 'initiateWithdraw', [channel.config, 70n * CENT]);
    expect(await revertOf(world, payer, 'initiateWithdraw', [channel.config, CENT])).toBe('WithdrawalAlreadyPending');
    await increaseTime(world, WITHDRAW_DELAY + 1);
    for (const who of [stranger, receiver.address]) {
      expect(await revertOf(world, who, 'finalizeWithdraw', [channel.config])).toBe('NotAuthorizedToFinalizeWithdraw');
    }
    // A channel that does not exist (another salt) has nothing to withdraw.
    expect(await revertOf(world, payer, 'initiateWithdraw', [{ ...channel.config, salt: randomSalt() }, CENT])).toBe('WithdrawAmountExceedsAvailable');
  });
});
