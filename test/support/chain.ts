import { randomBytes } from 'node:crypto';
import { createPublicClient, createWalletClient, http, maxUint256, parseUnits, toHex, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { baseSepolia } from 'viem/chains';
import { DEV_ACCOUNTS } from '../../server/dev/chain/dev-accounts.js';
import { DEV_CHAIN_ID, DEV_NETWORK, DEV_USDC_NAME, DEV_USDC_VERSION } from '../../server/dev/chain/dev-chain.js';
import { transferWithAuthorizationTypes, usdcAbi, usdcDomain, type Authorization } from '../../server/chain/usdc.js';
import { erc20AllowanceAbi, PERMIT2_ADDRESS } from '../../server/chain/permit2.js';
import { encodeBase64Json } from 'agentgate-x402-wire';

/**
 * The shared test chain (started by the global setup). Each jest worker pays from its own treasury
 * (dev account = worker id), so transactions of parallel workers never compete for one nonce.
 */
export function testChain() {
  const rpcUrl = process.env.AGENTGATE_TEST_RPC_URL;
  const usdc = process.env.AGENTGATE_TEST_USDC as Address | undefined;
  if (!rpcUrl || !usdc) throw new Error('the test chain is not running: run the tests with `npm test`');
  const chain = { ...baseSepolia, rpcUrls: { default: { http: [rpcUrl] } } };
  const publicClient = createPublicClient({ chain, transport: http(rpcUrl), pollingInterval: 100 });
  return { rpcUrl, usdc, chain, publicClient, factory: process.env.AGENTGATE_TEST_FACTORY as Address };
}

const workerIndex = () => Math.min(Number(process.env.JEST_WORKER_ID ?? 1), 9);
let treasuryWallet: ReturnType<typeof makeTreasury> | undefined;
function makeTreasury() {
  const { chain, rpcUrl } = testChain();
  const account = privateKeyToAccount(DEV_ACCOUNTS[workerIndex()]!.privateKey);
  return createWalletClient({ chain, transport: http(rpcUrl), account, pollingInterval: 100 });
}

/** Config for a backend that settles on the test chain, with a fresh relayer funded with test ETH. */
export async function chainConfig(): Promise<Record<string, string>> {
  const { rpcUrl, usdc } = testChain();
  const relayerKey = generatePrivateKey();
  await setEthBalance(privateKeyToAccount(relayerKey).address, parseUnits('100', 18));
  return {
    CHAIN_RPC_URL: rpcUrl,
    CHAIN_NETWORK: DEV_NETWORK,
    USDC_ADDRESS: usdc,
    USDC_EIP712_NAME: DEV_USDC_NAME,
    USDC_EIP712_VERSION: DEV_USDC_VERSION,
    RELAYER_PRIVATE_KEY: relayerKey,
    ...(testChain().factory ? { WALLET_FACTORY_ADDRESS: testChain().factory } : {}),
  };
}

/** A dev faucet key for a test server: a fresh account holding `usdc` test USDC (from this worker's treasury) and gas. */
export async function faucetConfig(usdc = '10000'): Promise<Record<string, string>> {
  const key = generatePrivateKey();
  const address = privateKeyToAccount(key).address;
  await setEthBalance(address, parseUnits('100', 18));
  await sendUsdc(address, parseUnits(usdc, 6));
  return { FAUCET_PRIVATE_KEY: key };
}

export async function setEthBalance(address: Address, wei: bigint): Promise<void> {
  const { publicClient } = testChain();
  await publicClient.request({ method: 'anvil_setBalance' as never, params: [address, toHex(wei)] as never });
}

export async function usdcBalance(address: Address): Promise<bigint> {
  const { publicClient, usdc } = testChain();
  return publicClient.readContract({ address: usdc, abi: usdcAbi, functionName: 'balanceOf', args: [address] });
}

/** A new buyer holding `usdc` test USDC (sent from this worker's treasury). */
export async function fundedBuyer(usdc = '100'): Promise<PrivateKeyAccount> {
  const buyer = privateKeyToAccount(generatePrivateKey());
  await sendUsdc(buyer.address, parseUnits(usdc, 6));
  return buyer;
}

/**
 * A new buyer holding `usdc` test USDC and some gas, that approved Permit2 for any amount once (as a
 * wallet does before its first Permit2 payment: upto, exact through Permit2).
 */
export async function permit2ApprovedBuyer(usdc = '1'): Promise<PrivateKeyAccount> {
  const buyer = await fundedBuyer(usdc);
  await setEthBalance(buyer.address, parseUnits('1', 18));
  const { chain, rpcUrl, usdc: token, publicClient } = testChain();
  const hash = await createWalletClient({ chain, transport: http(rpcUrl), account: buyer }).writeContract({ address: token, abi: erc20AllowanceAbi, functionName: 'approve', args: [PERMIT2_ADDRESS, maxUint256] });
  await publicClient.waitForTransactionReceipt({ hash });
  return buyer;
}

/**
 * The treasury's transfers go one at a time, each with the nonce the node reports as next. viem's local
 * nonce manager, after a send that failed, can hand out a nonce past a gap: every later transfer then
 * waits for ever, and each remaining test of the file times out at its first funding. A transfer that
 * is not mined within 30 s fails with its hash instead.
 */
let treasuryQueue: Promise<unknown> = Promise.resolve();
export function sendUsdc(to: Address, amount: bigint): Promise<void> {
  const send = treasuryQueue.then(async () => {
    const { publicClient, usdc } = testChain();
    treasuryWallet ??= makeTreasury();
    const nonce = await publicClient.getTransactionCount({ address: treasuryWallet.account.address, blockTag: 'pending' });
    const hash = await treasuryWallet.writeContract({ address: usdc, abi: usdcAbi, functionName: 'transfer', args: [to, amount], nonce });
    const receipt = await publicClient.waitForTransactionReceipt({ hash, timeout: 30_000 });
    if (receipt.status !== 'success') throw new Error(`the treasury's transfer ${hash} reverted`);
  });
  treasuryQueue = send.catch(() => {});
  return send;
}

export const randomNonce = (): Hex => toHex(randomBytes(32));

/** Signs an EIP-3009 TransferWithAuthorization for the test token, defaulting to a valid window. */
export async function signAuthorization(
  buyer: PrivateKeyAccount,
  input: { to: Address; value: bigint; validAfter?: bigint; validBefore?: bigint; nonce?: Hex },
  domain: { name?: string; chainId?: number; verifyingContract?: Address } = {},
): Promise<{ authorization: Authorization; signature: Hex }> {
  const now = BigInt(Math.floor(Date.now() / 1000));
  const authorization: Authorization = {
    from: buyer.address, to: input.to, value: input.value,
    validAfter: input.validAfter ?? now - 60n, validBefore: input.validBefore ?? now + 300n, nonce: input.nonce ?? randomNonce(),
  };
  const signature = await buyer.signTypedData({
    domain: usdcDomain({ name: domain.name ?? DEV_USDC_NAME, version: DEV_USDC_VERSION, chainId: domain.chainId ?? DEV_CHAIN_ID, verifyingContract: domain.verifyingContract ?? testChain().usdc }),
    types: transferWithAuthorizationTypes,
    primaryType: 'TransferWithAuthorization',
    message: authorization,
  });
  return { authorization, signature };
}

const wireAuthorization = (a: Authorization) => ({
  from: a.from, to: a.to, value: a.value.toString(), validAfter: a.validAfter.toString(), validBefore: a.validBefore.toString(), nonce: a.nonce,
});

/** An `X-Payment` header value (x402 v1 exact EVM). */
export function paymentHeaderV1(signed: { authorization: Authorization; signature: Hex }, network = DEV_NETWORK): string {
  return encodeBase64Json({ x402Version: 1, scheme: 'exact', network, payload: { signature: signed.signature, authorization: wireAuthorization(signed.authorization) } });
}
