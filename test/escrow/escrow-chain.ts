/**
 * Test helper for test/escrow: a private dev chain per test file, started by the same code as `npm run dev`
 * and the suite's shared chain (server/dev/chain/dev-chain.ts, which places the escrow and its
 * collectors), plus payments signed by the official @x402/evm `auth-capture` client and the escrow calls
 * an operator makes with them. Private because some files move the chain's clock, which would expire the
 * authorizations other test files sign on the shared chain.
 */
import { AuthCaptureEvmScheme } from '@x402/evm/auth-capture/client';
import {
  BaseError,
  ContractFunctionRevertedError,
  createPublicClient,
  createWalletClient,
  http,
  maxUint256,
  parseAbi,
  parseUnits,
  toHex,
  type Account,
  type Address,
  type Chain,
  type Hex,
  type PublicClient,
  type TransactionReceipt,
  type Transport,
  type WalletClient,
} from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import {
  AUTH_CAPTURE_ESCROW_ADDRESS,
  EIP3009_TOKEN_COLLECTOR_ADDRESS,
  OPERATOR_REFUND_COLLECTOR_ADDRESS,
  PERMIT2_TOKEN_COLLECTOR_ADDRESS,
  authCaptureEscrowAbi,
  paymentInfoHash,
  paymentInfoOf,
  type PaymentInfo,
} from '../../server/payments/schemes/auth-capture/evm/chain.js';
import { AUTH_CAPTURE } from 'agentgate-x402-wire';
import { erc20AllowanceAbi, PERMIT2_ADDRESS } from '../../server/chain/permit2.js';
import { balanceOf, usdcAbi } from '../../server/chain/usdc.js';
import { localChain } from '../../server/dev/chain/deploy.js';
import { DEV_BUYERS } from '../../server/dev/chain/dev-accounts.js';
import { DEV_USDC_NAME, DEV_USDC_VERSION, startDevChain } from '../../server/dev/chain/dev-chain.js';

export const ONE_USDC = parseUnits('1', 6);

type Wallet = WalletClient<Transport, Chain, Account>;
export type EscrowFunction = 'authorize' | 'charge' | 'capture' | 'void' | 'reclaim' | 'refund';

export interface EscrowChain {
  rpcUrl: string;
  chainId: number;
  usdc: Address;
  /** The dev chain's SmartAccountFactory (counterfactual smart wallets). */
  factory: Address;
  publicClient: PublicClient;
  walletFor(account: Account): Wallet;
  /** Dev buyers 1..9, each holding 10,000 test USDC, each having approved Permit2. */
  buyers: PrivateKeyAccount[];
  /** The capture authorizer (PaymentInfo.operator): a fresh account with gas, USDC for refunds, and the
   *  refund collector approved to spend it. */
  operator: PrivateKeyAccount;
  stop(): Promise<void>;
}

export async function startEscrowChain(): Promise<EscrowChain> {
  const node = await startDevChain({ mintAmountUsdc: '10000' });
  try {
    const chain = localChain({ chainId: node.chainId, rpcUrl: node.rpcUrl });
    const publicClient = createPublicClient({ chain, transport: http(node.rpcUrl), pollingInterval: 50 }) as PublicClient;
    const walletFor = (account: Account) => createWalletClient({ chain, account, transport: http(node.rpcUrl), pollingInterval: 50 });
    const buyers = DEV_BUYERS.map((b) => privateKeyToAccount(b.privateKey));
    const operator = privateKeyToAccount(generatePrivateKey());
    await publicClient.request({ method: 'anvil_setBalance' as never, params: [operator.address, toHex(parseUnits('100', 18))] as never });
    const usdc = node.usdcAddress;
    const mined = async (hash: Hex) => { await publicClient.waitForTransactionReceipt({ hash }); };
    for (const buyer of buyers) {
      await mined(await walletFor(buyer).writeContract({ address: usdc, abi: erc20AllowanceAbi, functionName: 'approve', args: [PERMIT2_ADDRESS, maxUint256] }));
    }
    await mined(await walletFor(buyers[8]!).writeContract({ address: usdc, abi: usdcAbi, functionName: 'transfer', args: [operator.address, 1000n * ONE_USDC] }));
    await mined(await walletFor(operator).writeContract({ address: usdc, abi: erc20AllowanceAbi, functionName: 'approve', args: [OPERATOR_REFUND_COLLECTOR_ADDRESS, maxUint256] }));
    return { rpcUrl: node.rpcUrl, chainId: node.chainId, usdc, factory: node.factoryAddress, publicClient, walletFor, buyers, operator, stop: () => node.stop() };
  } catch (err) {
    await node.stop();
    throw err;
  }
}

export const nowSeconds = () => Math.floor(Date.now() / 1000);

export interface OfferTerms {
  amount?: bigint;
  payTo?: Address;
  operator?: Address;
  assetTransferMethod?: 'eip3009' | 'permit2';
  captureDeadline?: number;
  refundDeadline?: number;
  minFeeBps?: number;
  maxFeeBps?: number;
  feeRecipient?: Address;
  maxTimeoutSeconds?: number;
}

/** What an auth-capture seller's 402 offers (x402 v2 PaymentRequirements), on this chain in its USDC. */
export function authCaptureRequirements(chain: EscrowChain, terms: OfferTerms = {}) {
  const now = nowSeconds();
  return {
    scheme: AUTH_CAPTURE,
    network: `eip155:${chain.chainId}`,
    amount: (terms.amount ?? ONE_USDC).toString(),
    asset: chain.usdc,
    payTo: terms.payTo ?? freshAddress(),
    maxTimeoutSeconds: terms.maxTimeoutSeconds ?? 300,
    extra: {
      name: DEV_USDC_NAME,
      version: DEV_USDC_VERSION,
      authCaptureEscrow: AUTH_CAPTURE_ESCROW_ADDRESS,
      captureAuthorizer: terms.operator ?? chain.operator.address,
      captureDeadline: terms.captureDeadline ?? now + 3600,
      refundDeadline: terms.refundDeadline ?? now + 7 * 86400,
      minFeeBps: terms.minFeeBps ?? 0,
      maxFeeBps: terms.maxFeeBps ?? 0,
      feeRecipient: terms.feeRecipient ?? '0x0000000000000000000000000000000000000000',
      assetTransferMethod: terms.assetTransferMethod ?? 'eip3009',
    },
  };
}

export type AuthCaptureRequirements = ReturnType<typeof authCaptureRequirements>;

interface Eip3009Wire { authorization: { from: string; to: string; value: string; validAfter: string; validBefore: string; nonce: Hex }; signature: Hex; salt: Hex }
interface Permit2Wire { permit2Authorization: { from: string; permitted: { token: string; amount: string }; spender: string; nonce: string; deadline: string }; signature: Hex; salt: Hex }
export type CollectPayload = Eip3009Wire | Permit2Wire;

/** A signed payment, as the official client makes it, with what the operator passes to the escrow. */
export interface SignedPayment {
  payload: CollectPayload;
  paymentInfo: PaymentInfo;
  /** The collector for the payload's method; `collectorData` is the client's signature, untouched. */
  tokenCollector: Address;
  collectorData: Hex;
  hash: Hex;
}

/** Signer the official client accepts: an account, or anything with an address that signs typed data. */
type ClientSigner = ConstructorParameters<typeof AuthCaptureEvmScheme>[0];

export async function officialPayment(chain: EscrowChain, payer: ClientSigner, requirements: AuthCaptureRequirements): Promise<SignedPayment> {
  const result = await new AuthCaptureEvmScheme(payer).createPaymentPayload(2, requirements as never);
  const payload = result.payload as unknown as CollectPayload;
  const paymentInfo = paymentInfoOf(requirements, payload as never);
  const isPermit2 = 'permit2Authorization' in payload;
  return {
    payload,
    paymentInfo,
    tokenCollector: isPermit2 ? PERMIT2_TOKEN_COLLECTOR_ADDRESS : EIP3009_TOKEN_COLLECTOR_ADDRESS,
    collectorData: payload.signature,
    hash: paymentInfoHash(paymentInfo, chain.chainId),
  };
}

export const freshAddress = (): Address => privateKeyToAccount(generatePrivateKey()).address;

/** Arguments of each escrow function, in the published order. */
export const args = {
  authorize: (p: SignedPayment, amount = p.paymentInfo.maxAmount) => [p.paymentInfo, amount, p.tokenCollector, p.collectorData] as const,
  charge: (p: SignedPayment, amount: bigint, feeAmount = 0n, feeReceiver: Address = p.paymentInfo.feeReceiver) =>
    [p.paymentInfo, amount, p.tokenCollector, p.collectorData, feeAmount, feeReceiver] as const,
  capture: (p: SignedPayment, amount: bigint, feeAmount = 0n, feeReceiver: Address = p.paymentInfo.feeReceiver) => [p.paymentInfo, amount, feeAmount, feeReceiver] as const,
  void: (p: SignedPayment) => [p.paymentInfo] as const,
  reclaim: (p: SignedPayment) => [p.paymentInfo] as const,
  refund: (p: SignedPayment, amount: bigint) => [p.paymentInfo, amount, OPERATOR_REFUND_COLLECTOR_ADDRESS, '0x'] as const,
};

/** Sends an escrow call from `sender` and waits for it; throws if it reverted. */
export async function escrowCall(chain: EscrowChain, sender: Account, functionName: EscrowFunction, callArgs: readonly unknown[]): Promise<TransactionReceipt> {
  const hash = await chain.walletFor(sender).writeContract({ address: AUTH_CAPTURE_ESCROW_ADDRESS, abi: authCaptureEscrowAbi, functionName, args: callArgs as never });
  const receipt = await chain.publicClient.waitForTransactionReceipt({ hash });
  if (receipt.status !== 'success') throw new Error(`${functionName} ${hash} reverted`);
  return receipt;
}

/** Errors raised below the escrow that surface through its calls: Permit2's, the collectors', the reentrancy guard's. */
const errorsBelowEscrow = parseAbi([
  'error InvalidSigner()', 'error InvalidSignature()', 'error InvalidNonce()', 'error SignatureExpired(uint256 signatureDeadline)',
  'error InvalidAmount(uint256 maxAmount)', 'error OnlyAuthCaptureEscrow()', 'error SafeERC20FailedOperation(address token)', 'error Reentrancy()',
]);

/**
 * The custom error (name and arguments) an escrow call reverts with, simulated from `sender` so nothing is
 * mined; `Error(string)` gives its reason as name. Throws if the call would succeed.
 */
export async function escrowRevert(chain: EscrowChain, sender: Account, functionName: EscrowFunction, callArgs: readonly unknown[]): Promise<{ name: string; args: readonly unknown[] }> {
  try {
    await chain.publicClient.simulateContract({ account: sender, address: AUTH_CAPTURE_ESCROW_ADDRESS, abi: [...authCaptureEscrowAbi, ...errorsBelowEscrow], functionName, args: callArgs as never });
  } catch (err) {
    const reverted = err instanceof BaseError ? err.walk((e) => e instanceof ContractFunctionRevertedError) : undefined;
    if (reverted instanceof ContractFunctionRevertedError) {
      if (reverted.data) return { name: reverted.data.errorName === 'Error' ? String(reverted.reason) : reverted.data.errorName, args: reverted.data.args ?? [] };
      return { name: reverted.reason ?? reverted.signature ?? 'unknown', args: [] };
    }
    throw err;
  }
  throw new Error(`expected ${functionName} to revert, but it would succeed`);
}

export async function paymentStateOf(chain: EscrowChain, payment: SignedPayment) {
  const [hasCollectedPayment, capturableAmount, refundableAmount] = await chain.publicClient.readContract({
    address: AUTH_CAPTURE_ESCROW_ADDRESS, abi: authCaptureEscrowAbi, functionName: 'paymentState', args: [payment.hash],
  });
  return { hasCollectedPayment, capturableAmount, refundableAmount };
}

export const usdcBalance = (chain: EscrowChain, account: Address) => balanceOf({ client: chain.publicClient, token: chain.usdc, account });

/** Moves the chain's clock `seconds` ahead and mines a block at the new time. */
export async function travel(chain: EscrowChain, seconds: number): Promise<void> {
  await chain.publicClient.request({ method: 'evm_increaseTime' as never, params: [toHex(seconds)] as never });
  await chain.publicClient.request({ method: 'evm_mine' as never, params: [] as never });
}
