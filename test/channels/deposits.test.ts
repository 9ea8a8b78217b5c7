/**
 * Deposits into batch-settlement channels on the dev chain, signed by the official @x402/evm client and sent
 * by the official facilitator: through the EIP-3009 collector, through the Permit2 collector (with a prior
 * approval, or with the EIP-2612 permit the client adds), top-ups; and every way a deposit must fail, with
 * nothing moving: replayed, tampered, foreign (another channel's or another token's), malformed channels, a
 * collector that does not pay, a direct call to a collector.
 */
import { createBatchSettlementEIP3009DepositPayload } from '@x402/evm/batch-settlement/client';
import { toClientEvmSigner, type BatchSettlementDepositPayload } from '@x402/evm';
import { concat, encodeAbiParameters, encodeFunctionData, getAddress, maxUint128, numberToHex, parseEventLogs, parseUnits, size, zeroAddress, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import {
  BATCH_SETTLEMENT_ADDRESS,
  ERC3009_DEPOSIT_COLLECTOR_ADDRESS,
  MAX_WITHDRAW_DELAY,
  PERMIT2_DEPOSIT_COLLECTOR_ADDRESS,
  batchSettlementAbi,
  depositCollectorAbi,
} from '../../server/payments/schemes/batch-settlement/evm/chain.js';
import { erc20AllowanceAbi, PERMIT2_ADDRESS } from '../../server/chain/permit2.js';
import { usdcAbi } from '../../server/chain/usdc.js';
import { deployDevChain } from '../../server/dev/chain/deploy.js';
import { DEV_DEPLOYER } from '../../server/dev/chain/dev-accounts.js';
import {
  ONE_USDC,
  approvePermit2,
  channelIdOf,
  channelState,
  contractConfig,
  depositThroughFacilitator,
  envelope,
  erc3009CollectorData,
  eventsOf,
  fundedBuyer,
  officialDeposit,
  permit2CollectorData,
  requirements,
  revertOf,
  send,
  setEthBalance,
  startChannelWorld,
  usdcOf,
  type ChannelWorld,
} from './support.js';

let world: ChannelWorld;
beforeAll(async () => { world = await startChannelWorld(); });
afterAll(async () => { await world?.stop(); });

const FIVE_USDC = 5n * ONE_USDC;

async function receiptOf(hash: string) {
  return world.dev.publicClient.getTransactionReceipt({ hash: hash as Hex });
}

describe('a deposit the official client signs, sent by the official facilitator', () => {
  it('through the EIP-3009 collector opens the channel: the escrow holds the deposit, ChannelCreated and Deposited are emitted', async () => {
    const buyer = await fundedBuyer(world, '100');
    const deposit = await officialDeposit(world, buyer, { depositUsdc: FIVE_USDC });
    const config = contractConfig(deposit.payload.channelConfig);
    const channelId = deposit.payload.voucher.channelId;
    expect(channelId).toBe(channelIdOf(config, world.chainId));
    expect(deposit.payload.deposit.authorization.erc3009Authorization).toBeDefined();
    const [buyerBefore, escrowBefore] = [await usdcOf(world, buyer.address), await usdcOf(world, BATCH_SETTLEMENT_ADDRESS)];

    const verified = await world.facilitator.verify(deposit.payment, deposit.accepted);
    expect(verified).toMatchObject({ isValid: true, payer: buyer.address, extra: { channelId, balance: '0', totalClaimed: '0', refundNonce: '0' } });
    const settled = await depositThroughFacilitator(world, deposit);
    expect(settled).toMatchObject({ success: true, amount: FIVE_USDC.toString(), extra: { channelState: { channelId, balance: FIVE_USDC.toString(), totalClaimed: '0' } } });

    expect(await channelState(world, channelId)).toMatchObject({ balance: FIVE_USDC, totalClaimed: 0n, refundNonce: 0n });
    expect(await usdcOf(world, buyer.address)).toBe(buyerBefore - FIVE_USDC);
    expect(await usdcOf(world, BATCH_SETTLEMENT_ADDRESS)).toBe(escrowBefore + FIVE_USDC);
    expect(await usdcOf(world, ERC3009_DEPOSIT_COLLECTOR_ADDRESS)).toBe(0n);
    const events = eventsOf(await receiptOf(settled.transaction));
    expect(events.map((e) => e.eventName)).toEqual(['ChannelCreated', 'Deposited']);
    expect(events[0]!.args).toEqual({ channelId, config: { ...config, payer: getAddress(config.payer) } });
    expect(events[1]!.args).toEqual({ channelId, sender: world.relayer.address, amount: FIVE_USDC, newBalance: FIVE_USDC });
  });

  it('a top-up adds to the balance of the open channel, without a second ChannelCreated', async () => {
    const buyer = await fundedBuyer(world, '100');
    const first = await officialDeposit(world, buyer, { depositUsdc: FIVE_USDC });
    await depositThroughFacilitator(world, first);
    const signer = toClientEvmSigner(buyer, world.dev.publicClient);
    const topUp = await createBatchSettlementEIP3009DepositPayload(signer, 2, first.accepted, first.payload.channelConfig, (3n * ONE_USDC).toString(), (6n * ONE_USDC).toString());
    const payload = topUp.payload as unknown as BatchSettlementDepositPayload;
    const settled = await depositThroughFacilitator(world, { accepted: first.accepted, payload, payment: envelope(first.accepted, payload) });
    const channelId = first.payload.voucher.channelId;
    expect(await channelState(world, channelId)).toMatchObject({ balance: 8n * ONE_USDC });
    const events = eventsOf(await receiptOf(settled.transaction));
    expect(events.map((e) => [e.eventName, e.args])).toEqual([['Deposited', { channelId, sender: world.relayer.address, amount: 3n * ONE_USDC, newBalance: 8n * ONE_USDC }]]);
  });

  it('through the Permit2 collector, for a buyer who approved Permit2: the tokens go straight to the escrow and the Permit2 nonce is spent', async () => {
    const buyer = await fundedBuyer(world, '100');
    await approvePermit2(world, buyer);
    const deposit = await officialDeposit(world, buyer, { depositUsdc: FIVE_USDC, requirements: requirements(world, { assetTransferMethod: 'permit2' }) });
    const auth = deposit.payload.deposit.authorization.permit2Authorization!;
    expect(auth).toMatchObject({ spender: PERMIT2_DEPOSIT_COLLECTOR_ADDRESS, permitted: { amount: FIVE_USDC.toString() }, witness: { channelId: deposit.payload.voucher.channelId } });
    const escrowBefore = await usdcOf(world, BATCH_SETTLEMENT_ADDRESS);

    await depositThroughFacilitator(world, deposit);
    expect(await channelState(world, deposit.payload.voucher.channelId)).toMatchObject({ balance: FIVE_USDC });
    expect(await usdcOf(world, BATCH_SETTLEMENT_ADDRESS)).toBe(escrowBefore + FIVE_USDC);
    expect(await usdcOf(world, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS)).toBe(0n);
    // The same Permit2 signature cannot deposit twice.
    const config = contractConfig(deposit.payload.channelConfig);
    expect(await revertOf(world, world.relayer.address, 'deposit', [config, FIVE_USDC, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS, permit2CollectorData(deposit.payload)])).toBe('InvalidNonce');
  });

  it('through the Permit2 collector with the EIP-2612 permit the client signs when Permit2 has no allowance yet', async () => {
    const buyer = await fundedBuyer(world, '100');
    const deposit = await officialDeposit(world, buyer, {
      depositUsdc: FIVE_USDC,
      requirements: requirements(world, { assetTransferMethod: 'permit2' }),
      extensions: { eip2612GasSponsoring: {} },
    });
    expect(deposit.payment.extensions?.eip2612GasSponsoring).toMatchObject({ info: { spender: PERMIT2_ADDRESS, amount: FIVE_USDC.toString() } });
    const settled = await depositThroughFacilitator(world, deposit);
    expect(await channelState(world, deposit.payload.voucher.channelId)).toMatchObject({ balance: FIVE_USDC });
    // The permit gave Permit2 exactly the deposit, which it spent; no EIP2612PermitFailed* event.
    expect(await world.dev.publicClient.readContract({ address: world.usdc, abi: erc20AllowanceAbi, functionName: 'allowance', args: [buyer.address, PERMIT2_ADDRESS] })).toBe(0n);
    const receipt = await receiptOf(settled.transaction);
    expect(receipt.logs.filter((l) => getAddress(l.address) === PERMIT2_DEPOSIT_COLLECTOR_ADDRESS)).toEqual([]);
  });

  it('an EIP-2612 permit that fails is reported in an event and the deposit goes on with the existing allowance; one for another amount is refused', async () => {
    const buyer = await fundedBuyer(world, '100');
    await approvePermit2(world, buyer);
    const deposit = await officialDeposit(world, buyer, { depositUsdc: FIVE_USDC, requirements: requirements(world, { assetTransferMethod: 'permit2' }) });
    const config = contractConfig(deposit.payload.channelConfig);
    const permitData = (value: bigint) => encodeAbiParameters(
      [{ type: 'uint256' }, { type: 'uint256' }, { type: 'uint8' }, { type: 'bytes32' }, { type: 'bytes32' }],
      [value, BigInt(Math.floor(Date.now() / 1000) + 600), 27, `0x${'01'.repeat(32)}`, `0x${'02'.repeat(32)}`],
    );
    expect(await revertOf(world, world.relayer.address, 'deposit', [config, FIVE_USDC, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS, permit2CollectorData(deposit.payload, permitData(FIVE_USDC + 1n))])).toBe('Permit2612AmountMismatch');

    const receipt = await send(world, world.relayer, 'deposit', [config, FIVE_USDC, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS, permit2CollectorData(deposit.payload, permitData(FIVE_USDC))]);
    const reported = parseEventLogs({ abi: depositCollectorAbi, logs: receipt.logs, eventName: 'EIP2612PermitFailedWithReason' });
    expect(reported.map((e) => e.args)).toEqual([{ token: world.usdc, owner: buyer.address, reason: expect.stringMatching(/signature/) }]);
    expect(await channelState(world, deposit.payload.voucher.channelId)).toMatchObject({ balance: FIVE_USDC });
  });
});

describe('a deposit that must fail moves nothing', () => {
  let buyer: PrivateKeyAccount;
  let deposit: Awaited<ReturnType<typeof officialDeposit>>;
  let config: ReturnType<typeof contractConfig>;
  let data: Hex;
  beforeAll(async () => {
    buyer = await fundedBuyer(world, '100');
    deposit = await officialDeposit(world, buyer, { depositUsdc: FIVE_USDC });
    config = contractConfig(deposit.payload.channelConfig);
    data = erc3009CollectorData(deposit.payload);
  });
  const depositRevert = (cfg: typeof config, amount: bigint, collector: Address = ERC3009_DEPOSIT_COLLECTOR_ADDRESS, collectorData: Hex = data) =>
    revertOf(world, world.relayer.address, 'deposit', [cfg, amount, collector, collectorData]);

  it('a tampered amount, or the authorization used for another channel (other receiver, other salt), fails the token\'s signature check', async () => {
    expect(await depositRevert(config, FIVE_USDC + 1n)).toBe('FiatTokenV2: invalid signature');
    expect(await depositRevert({ ...config, receiver: privateKeyToAccount(generatePrivateKey()).address }, FIVE_USDC)).toBe('FiatTokenV2: invalid signature');
    expect(await depositRevert({ ...config, salt: `0x${'11'.repeat(32)}` }, FIVE_USDC)).toBe('FiatTokenV2: invalid signature');
    const signature = deposit.payload.deposit.authorization.erc3009Authorization!.signature as Hex;
    const forged = { ...deposit.payload, deposit: { ...deposit.payload.deposit, authorization: { erc3009Authorization: { ...deposit.payload.deposit.authorization.erc3009Authorization!, signature: `${signature.slice(0, 10)}${signature[10] === '0' ? '1' : '0'}${signature.slice(11)}` as Hex } } } };
    expect(await depositRevert(config, FIVE_USDC, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, erc3009CollectorData(forged))).toMatch(/^(FiatTokenV2: invalid signature|ECRecover: invalid signature( 's' value)?)$/);
  });

  it('an authorization replayed after its deposit: the token refuses it, and the official facilitator reports the failed simulation', async () => {
    await depositThroughFacilitator(world, deposit);
    const balance = (await channelState(world, deposit.payload.voucher.channelId)).balance;
    expect(await depositRevert(config, FIVE_USDC)).toBe('FiatTokenV2: authorization is used or canceled');
    expect(await world.facilitator.verify(deposit.payment, deposit.accepted)).toMatchObject({ isValid: false, invalidReason: 'invalid_batch_settlement_evm_deposit_simulation_failed' });
    expect((await channelState(world, deposit.payload.voucher.channelId)).balance).toBe(balance);
  });

  it('a channel with a zero payer, receiver, receiver authorizer or token is refused (InvalidChannel), and so is a withdraw delay outside 15 minutes – 30 days', async () => {
    for (const field of ['payer', 'receiver', 'receiverAuthorizer', 'token'] as const) {
      expect(await depositRevert({ ...config, [field]: zeroAddress }, FIVE_USDC)).toBe('InvalidChannel');
    }
    expect(await depositRevert({ ...config, withdrawDelay: 899 }, FIVE_USDC)).toBe('WithdrawDelayOutOfRange');
    expect(await depositRevert({ ...config, withdrawDelay: MAX_WITHDRAW_DELAY + 1 }, FIVE_USDC)).toBe('WithdrawDelayOutOfRange');
  });

  it('a zero amount, a zero collector, or an amount that would overflow the balance is refused before any token moves', async () => {
    expect(await depositRevert(config, 0n)).toBe('ZeroDeposit');
    expect(await depositRevert(config, FIVE_USDC, zeroAddress)).toBe('InvalidCollector');
    expect((await channelState(world, deposit.payload.voucher.channelId)).balance).toBeGreaterThan(0n);
    expect(await depositRevert(config, maxUint128)).toBe('DepositOverflow');
  });

  it('a collector that reports success without paying: DepositCollectionFailed', async () => {
    // A contract whose code is a single STOP: any call to it succeeds and moves nothing.
    const idle = privateKeyToAccount(generatePrivateKey()).address;
    await world.dev.publicClient.request({ method: 'anvil_setCode' as never, params: [idle, '0x00'] as never });
    expect(await depositRevert(config, FIVE_USDC, idle)).toBe('DepositCollectionFailed');
  });

  it('a collector that calls back into the contract during the deposit is stopped by the reentrancy guard', async () => {
    // Hand-assembled: on any call, call the settlement contract with `payload` (kept after the code) and
    // revert with its answer if it failed, else stop.
    const payload = encodeFunctionData({ abi: batchSettlementAbi, functionName: 'settle', args: [world.receiver, world.usdc] });
    const length = numberToHex(size(payload), { size: 2 });
    const code = concat([
      '0x61', length, '0x61', '0x003a', '0x600039', // CODECOPY(0, 0x3a, length)
      '0x60006000', '0x61', length, '0x60006000', '0x73', BATCH_SETTLEMENT_ADDRESS, '0x5af1', // CALL(gas, settlement, 0, 0, length, 0, 0)
      '0x603857', // JUMPI(0x38, success)
      '0x3d600060003e3d6000fd', // REVERT with the return data
      '0x5b00', // 0x38: JUMPDEST STOP
      payload,
    ]);
    expect(size(code) - size(payload)).toBe(0x3a);
    const reentrant = privateKeyToAccount(generatePrivateKey()).address;
    await world.dev.publicClient.request({ method: 'anvil_setCode' as never, params: [reentrant, code] as never });
    expect(await depositRevert(config, FIVE_USDC, reentrant)).toBe('ReentrancyGuardReentrantCall');
  });

  it('nobody but the settlement contract may call a collector: a stolen authorization cannot be pulled into escrow uncredited', async () => {
    const fresh = await officialDeposit(world, buyer, { depositUsdc: FIVE_USDC, salt: `0x${'22'.repeat(32)}` });
    const stranger = privateKeyToAccount(generatePrivateKey());
    for (const collector of [ERC3009_DEPOSIT_COLLECTOR_ADDRESS, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS]) {
      expect(await revertOf(world, stranger.address, 'collect' as never, [buyer.address, world.usdc, FIVE_USDC, fresh.payload.voucher.channelId, erc3009CollectorData(fresh.payload)], collector, depositCollectorAbi)).toBe('OnlyX402BatchSettlement');
    }
  });

  it('an authorization for USDC cannot deposit another token: the signature binds the token (EIP-3009 domain, Permit2 permit)', async () => {
    // A second token on the same chain, the buyer holding some and Permit2 approved for both.
    const other = await deployDevChain({ rpcUrl: world.dev.node.rpcUrl, deployerKey: DEV_DEPLOYER.privateKey, mintTo: [buyer.address], mintAmountUsdc: '100' });
    await setEthBalance(world.dev, buyer.address, parseUnits('10', 18));
    await approvePermit2(world, buyer);
    const hash = await world.dev.walletFor(buyer).writeContract({ address: other.usdcAddress, abi: erc20AllowanceAbi, functionName: 'approve', args: [PERMIT2_ADDRESS, FIVE_USDC] });
    await world.dev.publicClient.waitForTransactionReceipt({ hash });

    const eip3009 = await officialDeposit(world, buyer, { depositUsdc: FIVE_USDC, salt: `0x${'33'.repeat(32)}` });
    const asOtherToken = { ...contractConfig(eip3009.payload.channelConfig), token: other.usdcAddress };
    expect(await depositRevert(asOtherToken, FIVE_USDC, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, erc3009CollectorData(eip3009.payload))).toBe('FiatTokenV2: invalid signature');

    const permit2 = await officialDeposit(world, buyer, { depositUsdc: FIVE_USDC, salt: `0x${'44'.repeat(32)}`, requirements: requirements(world, { assetTransferMethod: 'permit2' }) });
    const permit2OtherToken = { ...contractConfig(permit2.payload.channelConfig), token: other.usdcAddress };
    expect(await depositRevert(permit2OtherToken, FIVE_USDC, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS, permit2CollectorData(permit2.payload))).toBe('InvalidSigner');
    // While the same payload deposits fine into its own channel, in USDC: the failures above are the token's binding.
    await send(world, world.relayer, 'deposit', [contractConfig(permit2.payload.channelConfig), FIVE_USDC, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS, permit2CollectorData(permit2.payload)]);
    expect(await world.dev.publicClient.readContract({ address: other.usdcAddress, abi: usdcAbi, functionName: 'balanceOf', args: [buyer.address] })).toBe(100n * ONE_USDC);
  });
});
