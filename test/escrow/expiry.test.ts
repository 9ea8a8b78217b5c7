/**
 * The escrow's three deadlines, with the chain's clock moved (evm_increaseTime, then a block): payments
 * signed by the official @x402/evm auth-capture client can be collected only before the pre-approval
 * expiry, captured only before the capture deadline (after which the payer reclaims what is held), and
 * refunded only before the refund deadline. Each test runs from a chain snapshot and puts the clock back
 * after, since the client signs with the wall clock.
 */
import { isAddressEqual, parseEventLogs, type TransactionReceipt } from 'viem';
import { AUTH_CAPTURE_ESCROW_ADDRESS, authCaptureEscrowAbi } from '../../server/payments/schemes/auth-capture/evm/chain.js';
import {
  ONE_USDC,
  args,
  authCaptureRequirements,
  escrowCall,
  escrowRevert,
  nowSeconds,
  officialPayment,
  paymentStateOf,
  startEscrowChain,
  travel,
  usdcBalance,
  type EscrowChain,
  type OfferTerms,
  type SignedPayment,
} from './escrow-chain.js';

let chain: EscrowChain;
let snapshot: unknown;
let reclaimGas: bigint | undefined;

beforeAll(async () => {
  chain = await startEscrowChain();
});

afterAll(async () => {
  if (reclaimGas) process.stderr.write(`[escrow gas] reclaim: ${reclaimGas}\n`);
  await chain?.stop();
});

beforeEach(async () => {
  snapshot = await chain.publicClient.request({ method: 'evm_snapshot' as never, params: [] as never });
});

afterEach(async () => {
  await chain.publicClient.request({ method: 'evm_revert' as never, params: [snapshot] as never });
});

const operator = () => chain.operator;
const payer = () => chain.buyers[0]!;
/** An offer whose pre-approval (2 min) and capture deadline (10 min) are close, the refund deadline 1 h away. */
const soon = (terms: OfferTerms = {}): OfferTerms => ({ maxTimeoutSeconds: 120, captureDeadline: nowSeconds() + 600, refundDeadline: nowSeconds() + 3600, ...terms });
const pay = (terms: OfferTerms = {}) => officialPayment(chain, payer(), authCaptureRequirements(chain, soon(terms)));

async function authorized(terms: OfferTerms = {}): Promise<SignedPayment> {
  const payment = await pay(terms);
  await escrowCall(chain, operator(), 'authorize', args.authorize(payment));
  return payment;
}

const chainTime = async () => Number((await chain.publicClient.getBlock()).timestamp);
/** Moves the clock to `instant` (the next block's timestamp). */
async function travelTo(instant: number) {
  await travel(chain, instant - (await chainTime()));
  expect(await chainTime()).toBeGreaterThanOrEqual(instant);
}

describe('pre-approval expiry', () => {
  it.each(['eip3009', 'permit2'] as const)('a payment not collected in time can never be (%s): AfterPreApprovalExpiry', async (method) => {
    const payment = await pay({ assetTransferMethod: method });
    await travelTo(payment.paymentInfo.preApprovalExpiry);
    const reverted = await escrowRevert(chain, operator(), 'authorize', args.authorize(payment));
    expect(reverted.name).toBe('AfterPreApprovalExpiry');
    expect(reverted.args[1]).toBe(payment.paymentInfo.preApprovalExpiry);
    expect((await escrowRevert(chain, operator(), 'charge', args.charge(payment, ONE_USDC))).name).toBe('AfterPreApprovalExpiry');
  });

  it('one second before, it still can', async () => {
    const payment = await pay();
    await travelTo(payment.paymentInfo.preApprovalExpiry - 2);
    await escrowCall(chain, operator(), 'authorize', args.authorize(payment));
  });
});

describe('capture deadline and reclaim', () => {
  it('before the deadline the payer cannot reclaim (BeforeAuthorizationExpiry); after it the operator cannot capture (AfterAuthorizationExpiry)', async () => {
    const payment = await authorized();
    const deadline = payment.paymentInfo.authorizationExpiry;
    const early = await escrowRevert(chain, payer(), 'reclaim', args.reclaim(payment));
    expect(early.name).toBe('BeforeAuthorizationExpiry');
    expect(early.args[1]).toBe(deadline);

    await travelTo(deadline);
    const late = await escrowRevert(chain, operator(), 'capture', args.capture(payment, ONE_USDC));
    expect(late).toEqual({ name: 'AfterAuthorizationExpiry', args: [await chainTime(), deadline] });
  });

  it('after the deadline the payer reclaims what is still held (not what was captured), once', async () => {
    const payment = await authorized({ amount: 5n * ONE_USDC });
    await escrowCall(chain, operator(), 'capture', args.capture(payment, 2n * ONE_USDC));
    await travelTo(payment.paymentInfo.authorizationExpiry);
    const before = await usdcBalance(chain, payer().address);

    const receipt = await escrowCall(chain, payer(), 'reclaim', args.reclaim(payment));
    reclaimGas ??= receipt.gasUsed;
    expect(await usdcBalance(chain, payer().address)).toBe(before + 3n * ONE_USDC);
    expect(await paymentStateOf(chain, payment)).toEqual({ hasCollectedPayment: true, capturableAmount: 0n, refundableAmount: 2n * ONE_USDC });
    expect(reclaimedAmount(receipt)).toBe(3n * ONE_USDC);
    expect(await escrowRevert(chain, payer(), 'reclaim', args.reclaim(payment))).toEqual({ name: 'ZeroAuthorization', args: [payment.hash] });
  });

  it('a voided payment leaves nothing to reclaim; the operator may still void after the deadline', async () => {
    const voided = await authorized();
    await escrowCall(chain, operator(), 'void', args.void(voided));
    const late = await authorized();
    await travelTo(late.paymentInfo.authorizationExpiry + 60);
    expect((await escrowRevert(chain, payer(), 'reclaim', args.reclaim(voided))).name).toBe('ZeroAuthorization');
    const before = await usdcBalance(chain, payer().address);
    await escrowCall(chain, operator(), 'void', args.void(late));
    expect(await usdcBalance(chain, payer().address)).toBe(before + ONE_USDC);
  });
});

describe('refund deadline', () => {
  it('refunds are possible until the refund deadline, then AfterRefundExpiry', async () => {
    const payment = await authorized({ amount: 2n * ONE_USDC });
    await escrowCall(chain, operator(), 'capture', args.capture(payment, 2n * ONE_USDC));
    const deadline = payment.paymentInfo.refundExpiry;
    await travelTo(deadline - 5);
    await escrowCall(chain, operator(), 'refund', args.refund(payment, ONE_USDC));
    await travelTo(deadline);
    const reverted = await escrowRevert(chain, operator(), 'refund', args.refund(payment, ONE_USDC));
    expect(reverted.name).toBe('AfterRefundExpiry');
    expect(reverted.args[1]).toBe(deadline);
    expect(await paymentStateOf(chain, payment)).toMatchObject({ refundableAmount: ONE_USDC });
  });

  it('a charged payment too', async () => {
    const payment = await pay();
    await escrowCall(chain, operator(), 'charge', args.charge(payment, ONE_USDC));
    await travelTo(payment.paymentInfo.refundExpiry + 1);
    expect((await escrowRevert(chain, operator(), 'refund', args.refund(payment, ONE_USDC))).name).toBe('AfterRefundExpiry');
  });
});

describe('the clock is put back after each test', () => {
  it('the chain is no further than a few seconds from the wall clock', async () => {
    expect(Math.abs((await chainTime()) - nowSeconds())).toBeLessThan(30);
  });
});

function reclaimedAmount(receipt: TransactionReceipt): bigint | undefined {
  const escrowLogs = receipt.logs.filter((log) => isAddressEqual(log.address, AUTH_CAPTURE_ESCROW_ADDRESS));
  return parseEventLogs({ abi: authCaptureEscrowAbi, logs: escrowLogs, eventName: 'PaymentReclaimed' })[0]?.args.amount;
}
