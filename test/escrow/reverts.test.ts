/**
 * Every way the dev chain's escrow refuses a call, with payments the official @x402/evm auth-capture client
 * signs: the wrong sender, amounts out of bounds, a payment collected twice, bad expiries and fee terms,
 * captures, voids and refunds beyond what the payment holds, the wrong collector, and signatures that do
 * not cover what the operator submits. Each refusal is the published custom error with its arguments (or
 * the token's / Permit2's own error when the signature is what fails). Expiry refusals, which need the
 * chain's clock moved, are in expiry.test.ts.
 */
import { BaseError, ContractFunctionRevertedError, parseAbi, toHex, type Account, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import {
  AUTH_CAPTURE_ESCROW_ADDRESS,
  EIP3009_TOKEN_COLLECTOR_ADDRESS,
  OPERATOR_REFUND_COLLECTOR_ADDRESS,
  PERMIT2_TOKEN_COLLECTOR_ADDRESS,
  authCaptureEscrowAbi,
  type PaymentInfo,
} from '../../server/payments/schemes/auth-capture/evm/chain.js';
import {
  ONE_USDC,
  args,
  authCaptureRequirements,
  escrowCall,
  escrowRevert,
  freshAddress,
  officialPayment,
  paymentStateOf,
  startEscrowChain,
  usdcBalance,
  type EscrowChain,
  type EscrowFunction,
  type OfferTerms,
  type SignedPayment,
} from './escrow-chain.js';

let chain: EscrowChain;
let stranger: Account;

beforeAll(async () => {
  chain = await startEscrowChain();
  stranger = privateKeyToAccount(generatePrivateKey());
  await chain.publicClient.request({ method: 'anvil_setBalance' as never, params: [stranger.address, toHex(10n ** 20n)] as never });
});

afterAll(async () => {
  await chain?.stop();
});

const operator = () => chain.operator;
const pay = (terms: OfferTerms = {}, payerIndex = 0) => officialPayment(chain, chain.buyers[payerIndex]!, authCaptureRequirements(chain, terms));

async function authorized(terms: OfferTerms = {}): Promise<SignedPayment> {
  const payment = await pay(terms);
  await escrowCall(chain, operator(), 'authorize', args.authorize(payment));
  return payment;
}

async function captured(terms: OfferTerms = {}): Promise<SignedPayment> {
  const payment = await authorized(terms);
  await escrowCall(chain, operator(), 'capture', args.capture(payment, payment.paymentInfo.maxAmount));
  return payment;
}

async function expectRevert(sender: Account, functionName: EscrowFunction, callArgs: readonly unknown[], name: string | RegExp, errorArgs?: readonly unknown[]) {
  const reverted = await escrowRevert(chain, sender, functionName, callArgs);
  if (typeof name === 'string') expect(reverted.name).toBe(name);
  else expect(reverted.name).toMatch(name);
  if (errorArgs) expect(reverted.args).toEqual(errorArgs);
}

/** The payment with some fields changed after the payer signed, and the hash it would then have. */
function tampered(payment: SignedPayment, change: Partial<PaymentInfo>): SignedPayment {
  return { ...payment, paymentInfo: { ...payment.paymentInfo, ...change } };
}

describe('only the operator drives a payment, only the payer reclaims it', () => {
  it('authorize, charge, capture, void and refund from anyone else (the payer included) are InvalidSender', async () => {
    const payment = await pay();
    const payer = chain.buyers[0]!;
    for (const sender of [stranger, payer]) {
      await expectRevert(sender, 'authorize', args.authorize(payment), 'InvalidSender', [sender.address, operator().address]);
      await expectRevert(sender, 'charge', args.charge(payment, ONE_USDC), 'InvalidSender', [sender.address, operator().address]);
    }
    const held = await authorized();
    for (const [fn, callArgs] of [['capture', args.capture(held, ONE_USDC)], ['void', args.void(held)], ['refund', args.refund(held, ONE_USDC)]] as const) {
      await expectRevert(stranger, fn, callArgs, 'InvalidSender', [stranger.address, operator().address]);
    }
    await expectRevert(operator(), 'reclaim', args.reclaim(held), 'InvalidSender', [operator().address, held.paymentInfo.payer]);
  });

  it('a stranger naming itself operator cannot use the payer\'s signature: the nonce no longer matches it', async () => {
    const payment = await pay();
    await expectRevert(stranger, 'authorize', args.authorize(tampered(payment, { operator: stranger.address })), 'FiatTokenV2: invalid signature');
  });
});

describe('amounts', () => {
  it('zero is ZeroAmount; more than uint120 is AmountOverflow; more than the payer signed is ExceedsMaxAmount', async () => {
    const payment = await pay({ amount: 2n * ONE_USDC });
    await expectRevert(operator(), 'authorize', args.authorize(payment, 0n), 'ZeroAmount');
    await expectRevert(operator(), 'charge', args.charge(payment, 0n), 'ZeroAmount');
    await expectRevert(operator(), 'authorize', args.authorize(payment, 2n * ONE_USDC + 1n), 'ExceedsMaxAmount', [2n * ONE_USDC + 1n, 2n * ONE_USDC]);
    await expectRevert(operator(), 'charge', args.charge(payment, 3n * ONE_USDC), 'ExceedsMaxAmount', [3n * ONE_USDC, 2n * ONE_USDC]);
    const held = await authorized();
    await expectRevert(operator(), 'capture', args.capture(held, 0n), 'ZeroAmount');
    await expectRevert(operator(), 'refund', args.refund(held, 0n), 'ZeroAmount');
    await expectRevert(operator(), 'capture', args.capture(held, 2n ** 120n), 'AmountOverflow', [2n ** 120n, 2n ** 120n - 1n]);
  });
});

describe('a payment is collected once', () => {
  it('a second authorize, a charge after authorize, an authorize after void: PaymentAlreadyCollected', async () => {
    const payment = await authorized();
    await expectRevert(operator(), 'authorize', args.authorize(payment), 'PaymentAlreadyCollected', [payment.hash]);
    await expectRevert(operator(), 'charge', args.charge(payment, ONE_USDC), 'PaymentAlreadyCollected', [payment.hash]);
    await escrowCall(chain, operator(), 'void', args.void(payment));
    await expectRevert(operator(), 'authorize', args.authorize(payment), 'PaymentAlreadyCollected', [payment.hash]);
  });
});

describe('terms the payer signed but the escrow does not accept', () => {
  it('a capture deadline before the pre-approval expiry, or a refund deadline before the capture deadline: InvalidExpiries', async () => {
    const now = Math.floor(Date.now() / 1000);
    const early = await pay({ captureDeadline: now + 60, maxTimeoutSeconds: 300 });
    const { preApprovalExpiry: pre, authorizationExpiry: auth, refundExpiry: refund } = early.paymentInfo;
    await expectRevert(operator(), 'authorize', args.authorize(early), 'InvalidExpiries', [pre, auth, refund]);
    const refundFirst = await pay({ captureDeadline: now + 3600, refundDeadline: now + 1800 });
    await expectRevert(operator(), 'charge', args.charge(refundFirst, ONE_USDC), 'InvalidExpiries');
  });

  it('fee bounds above 100% (FeeBpsOverflow) or upside down (InvalidFeeBpsRange)', async () => {
    await expectRevert(operator(), 'authorize', args.authorize(await pay({ maxFeeBps: 10_001 })), 'FeeBpsOverflow', [10_001]);
    await expectRevert(operator(), 'authorize', args.authorize(await pay({ minFeeBps: 300, maxFeeBps: 200 })), 'InvalidFeeBpsRange', [300, 200]);
  });
});

describe('fees at capture and charge', () => {
  it('a fee outside the bounds the payer signed for this amount: FeeAmountOutOfRange(fee, min, max)', async () => {
    const feeRecipient = freshAddress();
    const held = await authorized({ amount: 10n * ONE_USDC, minFeeBps: 100, maxFeeBps: 300, feeRecipient });
    // 4 USDC: 1% = 40000, 3% = 120000.
    await expectRevert(operator(), 'capture', args.capture(held, 4n * ONE_USDC, 120_001n, feeRecipient), 'FeeAmountOutOfRange', [120_001n, 40_000n, 120_000n]);
    await expectRevert(operator(), 'capture', args.capture(held, 4n * ONE_USDC, 39_999n, feeRecipient), 'FeeAmountOutOfRange', [39_999n, 40_000n, 120_000n]);
    const fresh = await pay({ amount: 10n * ONE_USDC, minFeeBps: 100, maxFeeBps: 300, feeRecipient });
    await expectRevert(operator(), 'charge', args.charge(fresh, 10n * ONE_USDC, 0n, feeRecipient), 'FeeAmountOutOfRange', [0n, 100_000n, 300_000n]);
  });

  it('a fee with no recipient: ZeroFeeReceiver; another recipient than the signed one: InvalidFeeReceiver, even without a fee', async () => {
    const open = await authorized({ maxFeeBps: 500 });
    await expectRevert(operator(), 'capture', args.capture(open, ONE_USDC, 10_000n, '0x0000000000000000000000000000000000000000'), 'ZeroFeeReceiver');
    const signedRecipient = freshAddress();
    const other = freshAddress();
    const fixed = await authorized({ maxFeeBps: 500, feeRecipient: signedRecipient });
    await expectRevert(operator(), 'capture', args.capture(fixed, ONE_USDC, 10_000n, other), 'InvalidFeeReceiver', [other, signedRecipient]);
    await expectRevert(operator(), 'capture', args.capture(fixed, ONE_USDC, 0n, '0x0000000000000000000000000000000000000000'), 'InvalidFeeReceiver');
  });
});

describe('beyond what the payment holds', () => {
  it('capture over the authorized amount, of a voided payment, of one never authorized: InsufficientAuthorization', async () => {
    const held = await authorized({ amount: 2n * ONE_USDC });
    await escrowCall(chain, operator(), 'capture', args.capture(held, ONE_USDC));
    await expectRevert(operator(), 'capture', args.capture(held, ONE_USDC + 1n), 'InsufficientAuthorization', [held.hash, ONE_USDC, ONE_USDC + 1n]);
    await escrowCall(chain, operator(), 'void', args.void(held));
    await expectRevert(operator(), 'capture', args.capture(held, 1n), 'InsufficientAuthorization', [held.hash, 0n, 1n]);
    const never = await pay();
    await expectRevert(operator(), 'capture', args.capture(never, ONE_USDC), 'InsufficientAuthorization', [never.hash, 0n, ONE_USDC]);
  });

  it('void twice, after a full capture, of a charge, of a payment never authorized: ZeroAuthorization', async () => {
    const held = await authorized();
    await escrowCall(chain, operator(), 'void', args.void(held));
    await expectRevert(operator(), 'void', args.void(held), 'ZeroAuthorization', [held.hash]);
    const full = await captured();
    await expectRevert(operator(), 'void', args.void(full), 'ZeroAuthorization', [full.hash]);
    const charged = await pay();
    await escrowCall(chain, operator(), 'charge', args.charge(charged, ONE_USDC));
    await expectRevert(operator(), 'void', args.void(charged), 'ZeroAuthorization', [charged.hash]);
    const never = await pay();
    await expectRevert(operator(), 'void', args.void(never), 'ZeroAuthorization', [never.hash]);
  });

  it('refund over the captured amount, of an authorization not captured, after everything was refunded: RefundExceedsCapture', async () => {
    const payment = await authorized({ amount: 3n * ONE_USDC });
    await expectRevert(operator(), 'refund', args.refund(payment, 1n), 'RefundExceedsCapture', [1n, 0n]);
    await escrowCall(chain, operator(), 'capture', args.capture(payment, 2n * ONE_USDC));
    await expectRevert(operator(), 'refund', args.refund(payment, 2n * ONE_USDC + 1n), 'RefundExceedsCapture', [2n * ONE_USDC + 1n, 2n * ONE_USDC]);
    await escrowCall(chain, operator(), 'refund', args.refund(payment, 2n * ONE_USDC));
    await expectRevert(operator(), 'refund', args.refund(payment, 1n), 'RefundExceedsCapture', [1n, 0n]);
    expect(await paymentStateOf(chain, payment)).toEqual({ hasCollectedPayment: true, capturableAmount: ONE_USDC, refundableAmount: 0n });
  });

  it('a refund the operator has not funded (no allowance to the refund collector) fails in the token, and nothing moves', async () => {
    const unfunded = privateKeyToAccount(generatePrivateKey());
    await chain.publicClient.request({ method: 'anvil_setBalance' as never, params: [unfunded.address, toHex(10n ** 20n)] as never });
    const payment = await pay({ operator: unfunded.address });
    await escrowCall(chain, unfunded, 'authorize', args.authorize(payment));
    await escrowCall(chain, unfunded, 'capture', args.capture(payment, ONE_USDC));
    const payerBefore = await usdcBalance(chain, payment.paymentInfo.payer);
    const reverted = await escrowRevert(chain, unfunded, 'refund', args.refund(payment, ONE_USDC));
    expect(reverted.name).toMatch(/allowance|exceeds/i);
    expect(await usdcBalance(chain, payment.paymentInfo.payer)).toBe(payerBefore);
    expect(await paymentStateOf(chain, payment)).toMatchObject({ refundableAmount: ONE_USDC });
  });
});

describe('collectors', () => {
  it('a refund collector cannot fund a payment, a payment collector cannot fund a refund: InvalidCollectorForOperation', async () => {
    const payment = await pay();
    await expectRevert(operator(), 'authorize', [payment.paymentInfo, ONE_USDC, OPERATOR_REFUND_COLLECTOR_ADDRESS, payment.collectorData], 'InvalidCollectorForOperation');
    await expectRevert(operator(), 'charge', [payment.paymentInfo, ONE_USDC, OPERATOR_REFUND_COLLECTOR_ADDRESS, payment.collectorData, 0n, payment.paymentInfo.feeReceiver], 'InvalidCollectorForOperation');
    const full = await captured();
    await expectRevert(operator(), 'refund', [full.paymentInfo, ONE_USDC, EIP3009_TOKEN_COLLECTOR_ADDRESS, '0x'], 'InvalidCollectorForOperation');
  });

  it('an ERC-3009 signature given to the Permit2 collector is no Permit2 signature (and the other way round)', async () => {
    const eip3009 = await pay({ assetTransferMethod: 'eip3009' });
    await expectRevert(operator(), 'authorize', [eip3009.paymentInfo, ONE_USDC, PERMIT2_TOKEN_COLLECTOR_ADDRESS, eip3009.collectorData], 'InvalidSigner');
    const permit2 = await pay({ assetTransferMethod: 'permit2' });
    await expectRevert(operator(), 'authorize', [permit2.paymentInfo, ONE_USDC, EIP3009_TOKEN_COLLECTOR_ADDRESS, permit2.collectorData], 'FiatTokenV2: invalid signature');
  });

  it('only the escrow may call a collector or spend from a token store: OnlyAuthCaptureEscrow', async () => {
    const payment = await pay();
    const collectorAbi = parseAbi([
      'struct PaymentInfo { address operator; address payer; address receiver; address token; uint120 maxAmount; uint48 preApprovalExpiry; uint48 authorizationExpiry; uint48 refundExpiry; uint16 minFeeBps; uint16 maxFeeBps; address feeReceiver; uint256 salt; }',
      'function collectTokens(PaymentInfo paymentInfo, address tokenStore, uint256 amount, bytes collectorData)',
      'function sendTokens(address token, address recipient, uint256 amount) returns (bool)',
      'error OnlyAuthCaptureEscrow()',
    ]);
    const errorOf = async (address: Address, functionName: 'collectTokens' | 'sendTokens', callArgs: readonly unknown[]) => {
      try {
        await chain.publicClient.simulateContract({ account: stranger, address, abi: collectorAbi, functionName, args: callArgs as never });
      } catch (err) {
        const reverted = err instanceof BaseError ? err.walk((e) => e instanceof ContractFunctionRevertedError) : undefined;
        return reverted instanceof ContractFunctionRevertedError ? reverted.data?.errorName : String(err);
      }
      return 'no revert';
    };
    for (const collector of [EIP3009_TOKEN_COLLECTOR_ADDRESS, PERMIT2_TOKEN_COLLECTOR_ADDRESS, OPERATOR_REFUND_COLLECTOR_ADDRESS]) {
      expect(await errorOf(collector, 'collectTokens', [payment.paymentInfo, stranger.address, ONE_USDC, payment.collectorData])).toBe('OnlyAuthCaptureEscrow');
    }
    await captured(); // the operator's token store exists and holds money from earlier tests
    const store = await chain.publicClient.readContract({ address: AUTH_CAPTURE_ESCROW_ADDRESS, abi: authCaptureEscrowAbi, functionName: 'getTokenStore', args: [operator().address] });
    expect(await chain.publicClient.getCode({ address: store })).toBeDefined();
    expect(await errorOf(store, 'sendTokens', [chain.usdc, stranger.address, 1n])).toBe('OnlyAuthCaptureEscrow');
  });
});

describe('the signature covers every field of the payment', () => {
  it.each(['eip3009', 'permit2'] as const)('a bad signature, another payer, or any field changed after signing is refused by the token / Permit2 (%s)', async (method) => {
    const payment = await pay({ amount: 2n * ONE_USDC, maxFeeBps: 100, feeRecipient: freshAddress(), assetTransferMethod: method });
    const refusal = method === 'eip3009' ? 'FiatTokenV2: invalid signature' : 'InvalidSigner';
    // One hex digit of r changed: the signature recovers to nobody (USDC's ECRecover) or to someone else.
    const flipped = `${payment.collectorData.slice(0, 10)}${payment.collectorData[10] === 'a' ? 'b' : 'a'}${payment.collectorData.slice(11)}` as const;
    await expectRevert(operator(), 'authorize', [payment.paymentInfo, ONE_USDC, payment.tokenCollector, flipped], method === 'eip3009' ? /invalid signature/ : /^InvalidSign(er|ature)$/);
    const { paymentInfo: p } = payment;
    const changes: Array<Partial<PaymentInfo>> = [
      { payer: chain.buyers[1]!.address },
      { receiver: freshAddress() },
      { maxAmount: p.maxAmount + 1n },
      { preApprovalExpiry: p.preApprovalExpiry - 1 },
      { authorizationExpiry: p.authorizationExpiry + 1 },
      { refundExpiry: p.refundExpiry + 1 },
      { minFeeBps: 1 },
      { maxFeeBps: p.maxFeeBps + 1 },
      { feeReceiver: freshAddress() },
      { salt: p.salt + 1n },
    ];
    for (const change of changes) {
      await expectRevert(operator(), 'authorize', args.authorize(tampered(payment, change), ONE_USDC), refusal);
    }
    // Untouched, it still goes through: nothing above consumed it.
    await escrowCall(chain, operator(), 'authorize', args.authorize(payment));
  });
});

describe('nothing left behind', () => {
  it('after all of the above, the collectors and the escrow itself hold no tokens (payments sit in token stores)', async () => {
    for (const address of [EIP3009_TOKEN_COLLECTOR_ADDRESS, PERMIT2_TOKEN_COLLECTOR_ADDRESS, OPERATOR_REFUND_COLLECTOR_ADDRESS, AUTH_CAPTURE_ESCROW_ADDRESS]) {
      expect(await usdcBalance(chain, address)).toBe(0n);
    }
  });
});
