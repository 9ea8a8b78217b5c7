/**
 * The dev chain's x402 exact Permit2 proxy (contracts/X402ExactPermit2Proxy.sol, placed at the address
 * @x402/evm signs for) against payments the official `exact` client signs with assetTransferMethod
 * "permit2": anyone settles one for exactly the permitted amount, to the witness's payee; every tampered
 * field reverts with the published error and moves nothing; a nonce settles once; settleWithPermit takes
 * the buyer's EIP-2612 permit for Permit2 when it never approved it.
 */
import { ExactEvmScheme } from '@x402/evm/exact/client';
import { toClientEvmSigner, x402ExactPermit2ProxyABI, x402ExactPermit2ProxyAddress } from '@x402/evm';
import { loadArtifacts } from '../../contracts/compile.js';
import { BaseError, ContractFunctionRevertedError, keccak256, maxUint256, toFunctionSelector, toHex, type Abi, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { balanceOf } from '../../server/chain/usdc.js';
import { erc20AllowanceAbi, permit2NonceUsed, PERMIT2_ADDRESS } from '../../server/chain/permit2.js';
import { EXACT_PROXY_ADDRESS, exactPermitOf, exactProxyAbi, exactSettleArgs, type ExactPermit } from '../../server/payments/schemes/exact/evm/chain.js';
import { DEV_ACCOUNTS } from '../../server/dev/chain/dev-accounts.js';
import { DEV_USDC_NAME, DEV_USDC_VERSION } from '../../server/dev/chain/dev-chain.js';
import { ONE_USDC, startDevChain, type DevChain } from './dev-chain.js';

let dev: DevChain;
/** Anyone may send an exact settlement: a dev account that is nobody in particular. */
const sender = privateKeyToAccount(DEV_ACCOUNTS[7]!.privateKey);
const seller = privateKeyToAccount(generatePrivateKey()).address;

beforeAll(async () => {
  dev = await startDevChain();
  const buyer = dev.buyers[0]!;
  const hash = await dev.walletFor(buyer).writeContract({ address: dev.deployment.usdcAddress, abi: erc20AllowanceAbi, functionName: 'approve', args: [PERMIT2_ADDRESS, maxUint256] });
  await dev.publicClient.waitForTransactionReceipt({ hash });
});

afterAll(async () => {
  await dev?.stop();
});

const usdc = () => dev.deployment.usdcAddress;
const balance = (account: Address) => balanceOf({ client: dev.publicClient, token: usdc(), account });

function requirements(amount: bigint) {
  return {
    scheme: 'exact', network: `eip155:${dev.node.chainId}`, amount: amount.toString(), asset: usdc(), payTo: seller, maxTimeoutSeconds: 300,
    extra: { name: DEV_USDC_NAME, version: DEV_USDC_VERSION, assetTransferMethod: 'permit2' },
  };
}

async function officialPayment(buyer: PrivateKeyAccount, amount: bigint, extensions?: Record<string, unknown>) {
  const signer = toClientEvmSigner(buyer, dev.publicClient as never);
  const result = await new ExactEvmScheme(signer).createPaymentPayload(2, requirements(amount) as never, extensions ? { extensions } as never : undefined);
  const payload = result.payload as { signature: Hex; permit2Authorization: Parameters<typeof exactPermitOf>[0] };
  return { permit: exactPermitOf(payload.permit2Authorization), signature: payload.signature, extensions: (result as { extensions?: Record<string, { info: Record<string, string> }> }).extensions };
}

const settle = (permit: ExactPermit, signature: Hex) =>
  dev.walletFor(sender).writeContract({ address: EXACT_PROXY_ADDRESS, abi: exactProxyAbi, functionName: 'settle', args: exactSettleArgs(permit, signature) });

async function revertOf(permit: ExactPermit, signature: Hex): Promise<string> {
  try {
    await dev.publicClient.simulateContract({ account: sender, address: EXACT_PROXY_ADDRESS, abi: exactProxyAbi, functionName: 'settle', args: exactSettleArgs(permit, signature) });
  } catch (err) {
    const reverted = err instanceof BaseError ? err.walk((e) => e instanceof ContractFunctionRevertedError) : undefined;
    if (reverted instanceof ContractFunctionRevertedError) return reverted.data?.errorName === 'Error' ? String(reverted.reason) : reverted.data?.errorName ?? String(reverted.reason);
    throw err;
  }
  throw new Error('expected the settlement to revert, but it would succeed');
}

describe('the x402 exact Permit2 proxy on the dev chain', () => {
  it('is at the address @x402/evm signs for, with the published witness type', async () => {
    expect(EXACT_PROXY_ADDRESS).toBe(x402ExactPermit2ProxyAddress);
    const read = <T>(functionName: 'PERMIT2' | 'WITNESS_TYPEHASH' | 'WITNESS_TYPE_STRING') =>
      dev.publicClient.readContract({ address: EXACT_PROXY_ADDRESS, abi: exactProxyAbi, functionName }) as Promise<T>;
    expect(await read<Address>('PERMIT2')).toBe(PERMIT2_ADDRESS);
    expect(await read<string>('WITNESS_TYPE_STRING')).toBe('Witness witness)TokenPermissions(address token,uint256 amount)Witness(address to,uint256 validAfter)');
    expect(await read<Hex>('WITNESS_TYPEHASH')).toBe(keccak256(toHex('Witness(address to,uint256 validAfter)')));
  });

  it('has every function, event and error of the published ABI, with the same selectors', async () => {
    const signatures = (abi: Abi) => abi.filter((item) => item.type !== 'constructor').map((item) => (item.type === 'function' || item.type === 'error' || item.type === 'event' ? `${item.type} ${toFunctionSelector(item as never)}` : '')).sort();
    const ours = signatures((await loadArtifacts()).X402ExactPermit2Proxy.abi as Abi);
    expect(ours).toEqual(expect.arrayContaining(signatures(x402ExactPermit2ProxyABI as Abi)));
    expect(signatures(exactProxyAbi as Abi)).toEqual(expect.arrayContaining(signatures(x402ExactPermit2ProxyABI as Abi)));
  });

  it('settles what the official client signed, from any sender, for exactly the price, once', async () => {
    const buyer = dev.buyers[0]!;
    const { permit, signature } = await officialPayment(buyer, ONE_USDC / 4n);
    expect(permit).toMatchObject({ spender: EXACT_PROXY_ADDRESS, to: seller, amount: ONE_USDC / 4n });
    const [buyerBefore, sellerBefore] = [await balance(buyer.address), await balance(seller)];
    expect((await dev.publicClient.waitForTransactionReceipt({ hash: await settle(permit, signature) })).status).toBe('success');
    expect(await balance(buyer.address)).toBe(buyerBefore - ONE_USDC / 4n);
    expect(await balance(seller)).toBe(sellerBefore + ONE_USDC / 4n);
    expect(await permit2NonceUsed(dev.publicClient, buyer.address, permit.nonce)).toBe(true);
    expect(await revertOf(permit, signature)).toBe('InvalidNonce');
  });

  it('refuses a tampered payee, amount or a permit before validAfter, moving nothing', async () => {
    const buyer = dev.buyers[0]!;
    const { permit, signature } = await officialPayment(buyer, ONE_USDC);
    const before = await balance(buyer.address);
    const thief = privateKeyToAccount(generatePrivateKey()).address;
    expect(await revertOf({ ...permit, to: thief }, signature)).toBe('InvalidSigner');
    expect(await revertOf({ ...permit, amount: permit.amount * 2n }, signature)).toBe('InvalidSigner');
    expect(await revertOf({ ...permit, validAfter: 2n ** 40n }, signature)).toBe('PaymentTooEarly');
    expect(await revertOf({ ...permit, to: '0x0000000000000000000000000000000000000000' }, signature)).toBe('InvalidDestination');
    expect(await balance(buyer.address)).toBe(before);
  });

  it('settleWithPermit: a buyer that never approved Permit2 pays with its EIP-2612 permit (signed by the official client)', async () => {
    const buyer = dev.buyers[1]!;
    expect(await dev.publicClient.readContract({ address: usdc(), abi: erc20AllowanceAbi, functionName: 'allowance', args: [buyer.address, PERMIT2_ADDRESS] })).toBe(0n);
    const unsponsored = await officialPayment(buyer, ONE_USDC);
    expect(await revertOf(unsponsored.permit, unsponsored.signature)).toBe('TRANSFER_FROM_FAILED'); // Permit2's token transfer: no allowance
    const { permit, signature, extensions } = await officialPayment(buyer, ONE_USDC, { eip2612GasSponsoring: { info: { version: '1' } } });
    const info = extensions!.eip2612GasSponsoring!.info;
    const sig = info.signature!;
    const permit2612 = { value: BigInt(info.amount!), deadline: BigInt(info.deadline!), r: `0x${sig.slice(2, 66)}` as Hex, s: `0x${sig.slice(66, 130)}` as Hex, v: parseInt(sig.slice(130, 132), 16) };
    const before = await balance(seller);
    const hash = await dev.walletFor(sender).writeContract({ address: EXACT_PROXY_ADDRESS, abi: exactProxyAbi, functionName: 'settleWithPermit', args: [permit2612, ...exactSettleArgs(permit, signature)] });
    expect((await dev.publicClient.waitForTransactionReceipt({ hash })).status).toBe('success');
    expect(await balance(seller)).toBe(before + ONE_USDC);
  });
});
