/**
 * Payments the official @x402/evm auth-capture client signs, through the dev chain's escrow: authorize
 * (ERC-3009 and Permit2 collectors, and a not-yet-deployed smart wallet through ERC-6492), capture in
 * parts and in full with fees, void, refund, and charge in one step. Every step checks the balances that
 * moved, the escrow's state and its event. Gas of each operation is printed once (the report quotes it).
 */
import { concatHex, encodeFunctionData, hashTypedData, isAddressEqual, parseEventLogs, serializeErc6492Signature, type Address, type TransactionReceipt } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { loadArtifacts } from '../../contracts/compile.js';
import { AUTH_CAPTURE_ESCROW_ADDRESS, EIP3009_TOKEN_COLLECTOR_ADDRESS, OPERATOR_REFUND_COLLECTOR_ADDRESS, PERMIT2_TOKEN_COLLECTOR_ADDRESS, authCaptureEscrowAbi } from '../../server/payments/schemes/auth-capture/evm/chain.js';
import { usdcAbi } from '../../server/chain/usdc.js';
import {
  ONE_USDC,
  args,
  authCaptureRequirements,
  escrowCall,
  freshAddress,
  officialPayment,
  paymentStateOf,
  startEscrowChain,
  usdcBalance,
  type EscrowChain,
  type OfferTerms,
  type SignedPayment,
} from './escrow-chain.js';

let chain: EscrowChain;
let tokenStore: Address;
const gas: Record<string, bigint> = {};

beforeAll(async () => {
  chain = await startEscrowChain();
  tokenStore = await chain.publicClient.readContract({ address: AUTH_CAPTURE_ESCROW_ADDRESS, abi: authCaptureEscrowAbi, functionName: 'getTokenStore', args: [chain.operator.address] });
});

afterAll(async () => {
  if (Object.keys(gas).length > 0) process.stderr.write(`[escrow gas] ${Object.entries(gas).map(([k, v]) => `${k}: ${v}`).join(', ')}\n`);
  await chain?.stop();
});

const balance = (account: Address) => usdcBalance(chain, account);
const operator = () => chain.operator;

/** The escrow's one event in `receipt`, by name. */
function eventOf(receipt: TransactionReceipt, eventName: string) {
  const events = parseEventLogs({ abi: authCaptureEscrowAbi, logs: receipt.logs.filter((l) => isAddressEqual(l.address, AUTH_CAPTURE_ESCROW_ADDRESS)) })
    .filter((e) => e.eventName !== 'TokenStoreCreated');
  expect(events.map((e) => e.eventName)).toEqual([eventName]);
  return events[0]!.args as Record<string, unknown>;
}

async function pay(payerIndex: number, terms: OfferTerms = {}): Promise<SignedPayment> {
  return officialPayment(chain, chain.buyers[payerIndex]!, authCaptureRequirements(chain, terms));
}

async function authorized(payerIndex: number, terms: OfferTerms = {}): Promise<SignedPayment> {
  const payment = await pay(payerIndex, terms);
  await escrowCall(chain, operator(), 'authorize', args.authorize(payment));
  return payment;
}

describe('authorize', () => {
  it.each([
    ['ERC-3009 (ReceiveWithAuthorization)', 'eip3009', EIP3009_TOKEN_COLLECTOR_ADDRESS],
    ['Permit2 (PermitTransferFrom)', 'permit2', PERMIT2_TOKEN_COLLECTOR_ADDRESS],
  ] as const)('through the %s collector holds the payer\'s maximum in the operator\'s token store', async (_, method, collector) => {
    const payment = await pay(0, { amount: 3n * ONE_USDC, assetTransferMethod: method });
    expect(payment.tokenCollector).toBe(collector);
    const [payerBefore, storeBefore] = [await balance(payment.paymentInfo.payer), await balance(tokenStore)];

    const receipt = await escrowCall(chain, operator(), 'authorize', args.authorize(payment));
    gas[`authorize (${method})`] ??= receipt.gasUsed;

    expect(await balance(payment.paymentInfo.payer)).toBe(payerBefore - 3n * ONE_USDC);
    expect(await balance(tokenStore)).toBe(storeBefore + 3n * ONE_USDC);
    expect(await balance(collector)).toBe(0n);
    expect(await paymentStateOf(chain, payment)).toEqual({ hasCollectedPayment: true, capturableAmount: 3n * ONE_USDC, refundableAmount: 0n });
    expect(eventOf(receipt, 'PaymentAuthorized')).toEqual({ paymentInfoHash: payment.hash, paymentInfo: payment.paymentInfo, amount: 3n * ONE_USDC, tokenCollector: collector });
  });

  it.each(['eip3009', 'permit2'] as const)('of less than the maximum (%s) takes only that much: the rest stays with the payer', async (method) => {
    const payment = await pay(1, { amount: 5n * ONE_USDC, assetTransferMethod: method });
    const payerBefore = await balance(payment.paymentInfo.payer);
    await escrowCall(chain, operator(), 'authorize', args.authorize(payment, 2n * ONE_USDC));
    expect(await balance(payment.paymentInfo.payer)).toBe(payerBefore - 2n * ONE_USDC);
    expect(await paymentStateOf(chain, payment)).toMatchObject({ capturableAmount: 2n * ONE_USDC });
    expect(await balance(payment.tokenCollector)).toBe(0n);
  });

  it('from a smart wallet that does not exist yet: the ERC-6492 wrapper deploys it, then its ERC-1271 answer is checked', async () => {
    const { abi: factoryAbi } = (await loadArtifacts()).SmartAccountFactory;
    const owner = privateKeyToAccount(generatePrivateKey());
    const salt = concatHex([owner.address, '0x000000000000000000000000']);
    const factory = chain.factory; // the dev chain's SmartAccountFactory
    const wallet = await chain.publicClient.readContract({ address: factory, abi: factoryAbi, functionName: 'getAddress', args: [owner.address, salt] }) as Address;
    await chain.publicClient.waitForTransactionReceipt({ hash: await chain.walletFor(chain.buyers[7]!).writeContract({ address: chain.usdc, abi: usdcAbi, functionName: 'transfer', args: [wallet, 10n * ONE_USDC] }) });
    expect(await chain.publicClient.getCode({ address: wallet })).toBeUndefined();

    // The wallet signs as SmartAccount expects (the owner's signature of the raw EIP-712 digest), wrapped in
    // ERC-6492 with the factory call that deploys it.
    const signer = {
      address: wallet,
      signTypedData: async (typedData: Parameters<typeof hashTypedData>[0]) => serializeErc6492Signature({
        address: factory,
        data: encodeFunctionData({ abi: factoryAbi, functionName: 'createAccount', args: [owner.address, salt] }),
        signature: await owner.sign({ hash: hashTypedData(typedData) }),
      }),
    };
    const payment = await officialPayment(chain, signer as never, authCaptureRequirements(chain, { amount: 4n * ONE_USDC }));
    await escrowCall(chain, operator(), 'authorize', args.authorize(payment));
    expect(await chain.publicClient.getCode({ address: wallet })).toMatch(/^0x[0-9a-f]+$/);
    expect(await balance(wallet)).toBe(6n * ONE_USDC);
    expect(await paymentStateOf(chain, payment)).toMatchObject({ capturableAmount: 4n * ONE_USDC });
  });
});

describe('capture', () => {
  it('in several parts until nothing is left; each part reaches the receiver and becomes refundable', async () => {
    const payment = await authorized(2, { amount: 10n * ONE_USDC });
    const receiver = payment.paymentInfo.receiver;
    let captured = 0n;
    for (const part of [ONE_USDC, 4n * ONE_USDC, 5n * ONE_USDC]) {
      const receipt = await escrowCall(chain, operator(), 'capture', args.capture(payment, part));
      gas[captured === 0n ? 'first capture of an operator (creates its token store)' : 'capture'] ??= receipt.gasUsed;
      captured += part;
      expect(await balance(receiver)).toBe(captured);
      expect(await paymentStateOf(chain, payment)).toEqual({ hasCollectedPayment: true, capturableAmount: 10n * ONE_USDC - captured, refundableAmount: captured });
      expect(eventOf(receipt, 'PaymentCaptured')).toEqual({ paymentInfoHash: payment.hash, amount: part, feeAmount: 0n, feeReceiver: payment.paymentInfo.feeReceiver });
    }
  });

  it('in full at once', async () => {
    const payment = await authorized(2, { amount: 7n * ONE_USDC });
    await escrowCall(chain, operator(), 'capture', args.capture(payment, 7n * ONE_USDC));
    expect(await balance(payment.paymentInfo.receiver)).toBe(7n * ONE_USDC);
    expect(await paymentStateOf(chain, payment)).toEqual({ hasCollectedPayment: true, capturableAmount: 0n, refundableAmount: 7n * ONE_USDC });
  });

  it('with a fee inside the payer\'s bounds: the fee goes to the signed fee recipient, the rest to the receiver', async () => {
    const feeRecipient = freshAddress();
    const payment = await authorized(3, { amount: 10n * ONE_USDC, minFeeBps: 100, maxFeeBps: 300, feeRecipient });
    // 1% .. 3% of each captured amount, in token units (v1.1): 4 USDC allows 0.04 .. 0.12.
    await escrowCall(chain, operator(), 'capture', args.capture(payment, 4n * ONE_USDC, 120_000n, feeRecipient));
    await escrowCall(chain, operator(), 'capture', args.capture(payment, 6n * ONE_USDC, 60_000n, feeRecipient));
    expect(await balance(feeRecipient)).toBe(180_000n);
    expect(await balance(payment.paymentInfo.receiver)).toBe(10n * ONE_USDC - 180_000n);
    expect(await paymentStateOf(chain, payment)).toMatchObject({ refundableAmount: 10n * ONE_USDC }); // the fee is part of what was captured
  });

  it('with a fee to a recipient the operator names, when the payer signed none', async () => {
    const chosen = freshAddress();
    const payment = await authorized(3, { amount: 2n * ONE_USDC, minFeeBps: 0, maxFeeBps: 1000 });
    const receipt = await escrowCall(chain, operator(), 'capture', args.capture(payment, 2n * ONE_USDC, 200_000n, chosen));
    expect(await balance(chosen)).toBe(200_000n);
    expect(eventOf(receipt, 'PaymentCaptured')).toEqual({ paymentInfoHash: payment.hash, amount: 2n * ONE_USDC, feeAmount: 200_000n, feeReceiver: chosen });
  });
});

describe('void', () => {
  it('returns what is still held to the payer; what was captured stays captured', async () => {
    const payment = await authorized(4, { amount: 5n * ONE_USDC });
    await escrowCall(chain, operator(), 'capture', args.capture(payment, 2n * ONE_USDC));
    const payerBefore = await balance(payment.paymentInfo.payer);
    const receipt = await escrowCall(chain, operator(), 'void', args.void(payment));
    gas.void ??= receipt.gasUsed;
    expect(await balance(payment.paymentInfo.payer)).toBe(payerBefore + 3n * ONE_USDC);
    expect(await paymentStateOf(chain, payment)).toEqual({ hasCollectedPayment: true, capturableAmount: 0n, refundableAmount: 2n * ONE_USDC });
    expect(eventOf(receipt, 'PaymentVoided')).toEqual({ paymentInfoHash: payment.hash, amount: 3n * ONE_USDC });
  });

  it('of an untouched authorization gives everything back', async () => {
    const payment = await authorized(4, { amount: 5n * ONE_USDC, assetTransferMethod: 'permit2' });
    const payerBefore = await balance(payment.paymentInfo.payer);
    await escrowCall(chain, operator(), 'void', args.void(payment));
    expect(await balance(payment.paymentInfo.payer)).toBe(payerBefore + 5n * ONE_USDC);
  });
});

describe('refund', () => {
  it('gives captured money back in parts, funded by the operator through the refund collector', async () => {
    const payment = await authorized(5, { amount: 6n * ONE_USDC });
    await escrowCall(chain, operator(), 'capture', args.capture(payment, 6n * ONE_USDC));
    const [payerBefore, operatorBefore, receiverBefore] = [await balance(payment.paymentInfo.payer), await balance(operator().address), await balance(payment.paymentInfo.receiver)];

    const receipt = await escrowCall(chain, operator(), 'refund', args.refund(payment, 2n * ONE_USDC));
    gas.refund ??= receipt.gasUsed;
    expect(eventOf(receipt, 'PaymentRefunded')).toEqual({ paymentInfoHash: payment.hash, amount: 2n * ONE_USDC, tokenCollector: OPERATOR_REFUND_COLLECTOR_ADDRESS });
    expect(await paymentStateOf(chain, payment)).toEqual({ hasCollectedPayment: true, capturableAmount: 0n, refundableAmount: 4n * ONE_USDC });
    await escrowCall(chain, operator(), 'refund', args.refund(payment, 4n * ONE_USDC));

    expect(await balance(payment.paymentInfo.payer)).toBe(payerBefore + 6n * ONE_USDC);
    expect(await balance(operator().address)).toBe(operatorBefore - 6n * ONE_USDC);
    expect(await balance(payment.paymentInfo.receiver)).toBe(receiverBefore); // the receiver's money is not touched
    expect(await paymentStateOf(chain, payment)).toMatchObject({ refundableAmount: 0n });
  });

  it('of a partly captured payment covers the captured part; the held part is voided apart', async () => {
    const payment = await authorized(5, { amount: 4n * ONE_USDC });
    await escrowCall(chain, operator(), 'capture', args.capture(payment, ONE_USDC));
    const payerBefore = await balance(payment.paymentInfo.payer);
    await escrowCall(chain, operator(), 'refund', args.refund(payment, ONE_USDC));
    await escrowCall(chain, operator(), 'void', args.void(payment));
    expect(await balance(payment.paymentInfo.payer)).toBe(payerBefore + 4n * ONE_USDC);
    expect(await paymentStateOf(chain, payment)).toEqual({ hasCollectedPayment: true, capturableAmount: 0n, refundableAmount: 0n });
  });
});

describe('charge', () => {
  it.each(['eip3009', 'permit2'] as const)('collects and pays the receiver in one step (%s), minus the fee; the payment is then refundable only', async (method) => {
    const feeRecipient = freshAddress();
    const payment = await pay(6, { amount: 3n * ONE_USDC, minFeeBps: 50, maxFeeBps: 50, feeRecipient, assetTransferMethod: method });
    const payerBefore = await balance(payment.paymentInfo.payer);
    const receipt = await escrowCall(chain, operator(), 'charge', args.charge(payment, 2n * ONE_USDC, 10_000n, feeRecipient));
    gas[`charge (${method})`] ??= receipt.gasUsed;

    expect(await balance(payment.paymentInfo.payer)).toBe(payerBefore - 2n * ONE_USDC);
    expect(await balance(payment.paymentInfo.receiver)).toBe(2n * ONE_USDC - 10_000n);
    expect(await balance(feeRecipient)).toBe(10_000n);
    expect(await paymentStateOf(chain, payment)).toEqual({ hasCollectedPayment: true, capturableAmount: 0n, refundableAmount: 2n * ONE_USDC });
    expect(eventOf(receipt, 'PaymentCharged')).toEqual({
      paymentInfoHash: payment.hash, paymentInfo: payment.paymentInfo, amount: 2n * ONE_USDC, tokenCollector: payment.tokenCollector, feeAmount: 10_000n, feeReceiver: feeRecipient,
    });

    await escrowCall(chain, operator(), 'refund', args.refund(payment, 2n * ONE_USDC));
    expect(await balance(payment.paymentInfo.payer)).toBe(payerBefore);
  });
});
