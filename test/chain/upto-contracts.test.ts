/**
 * The dev chain's Permit2 and x402 upto proxy (contracts/Permit2.sol, contracts/X402UptoPermit2Proxy.sol,
 * placed at their canonical addresses) against payments the official @x402/evm `upto` client signs: one
 * settles for the amount the facilitator names, and every tampered field reverts with the error the
 * published interface names, moving nothing.
 */
import { UptoEvmScheme } from '@x402/evm/upto/client';
import { x402UptoPermit2ProxyAddress, PERMIT2_ADDRESS as SDK_PERMIT2_ADDRESS } from '@x402/evm';
import {
  BaseError,
  ContractFunctionRevertedError,
  keccak256,
  maxUint256,
  toHex,
  type Address,
  type Hex,
} from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { loadArtifacts } from '../../contracts/compile.js';
import { balanceOf, usdcAbi } from '../../server/chain/usdc.js';
import { erc20AllowanceAbi, permit2Abi, permit2NonceUsed, PERMIT2_ADDRESS } from '../../server/chain/permit2.js';
import { UPTO_PROXY_ADDRESS, uptoPermitOf, uptoProxyAbi, uptoSettleArgs, uptoTypedData, type UptoPermit } from '../../server/payments/schemes/upto/evm/chain.js';
import { DEV_ACCOUNTS } from '../../server/dev/chain/dev-accounts.js';
import { DEV_USDC_NAME, DEV_USDC_VERSION } from '../../server/dev/chain/dev-chain.js';
import { ONE_USDC, startDevChain, type DevChain } from './dev-chain.js';

let dev: DevChain;
const facilitator = privateKeyToAccount(DEV_ACCOUNTS[5]!.privateKey);
const otherFacilitator = privateKeyToAccount(DEV_ACCOUNTS[6]!.privateKey);
const seller = privateKeyToAccount(generatePrivateKey()).address;

beforeAll(async () => {
  dev = await startDevChain();
  // The buyers' one-time approval of Permit2, which the scheme requires before any upto payment.
  for (const buyer of dev.buyers) {
    const hash = await dev.walletFor(buyer).writeContract({ address: dev.deployment.usdcAddress, abi: erc20AllowanceAbi, functionName: 'approve', args: [PERMIT2_ADDRESS, maxUint256] });
    await dev.publicClient.waitForTransactionReceipt({ hash });
  }
});

afterAll(async () => {
  await dev?.stop();
});

const usdc = () => dev.deployment.usdcAddress;
const balance = (account: Address) => balanceOf({ client: dev.publicClient, token: usdc(), account });

/** What an upto seller's 402 offers: up to `max`, paid to `seller`, settled by `facilitator`. */
function requirements(max: bigint, overrides: { facilitatorAddress?: Address; maxTimeoutSeconds?: number } = {}) {
  return {
    scheme: 'upto', network: `eip155:${dev.node.chainId}`, amount: max.toString(), asset: usdc(), payTo: seller,
    maxTimeoutSeconds: overrides.maxTimeoutSeconds ?? 300,
    extra: { name: DEV_USDC_NAME, version: DEV_USDC_VERSION, facilitatorAddress: overrides.facilitatorAddress ?? facilitator.address },
  };
}

/** The official client's payload for `requirements`, read back into the permit and its signature. */
async function officialPayment(buyer: PrivateKeyAccount, max: bigint, overrides: Parameters<typeof requirements>[1] = {}) {
  const result = await new UptoEvmScheme(buyer).createPaymentPayload(2, requirements(max, overrides) as never);
  const payload = result.payload as { signature: Hex; permit2Authorization: Parameters<typeof uptoPermitOf>[0] };
  return { permit: uptoPermitOf(payload.permit2Authorization), signature: payload.signature };
}

function settle(sender: PrivateKeyAccount, permit: UptoPermit, amount: bigint, signature: Hex) {
  return dev.walletFor(sender).writeContract({ address: UPTO_PROXY_ADDRESS, abi: uptoProxyAbi, functionName: 'settle', args: uptoSettleArgs(permit, amount, signature) });
}

/** The custom error a call reverted with (simulated, so nothing is mined), or Error(string)'s reason. */
async function revertOf(sender: PrivateKeyAccount, permit: UptoPermit, amount: bigint, signature: Hex): Promise<string> {
  try {
    await dev.publicClient.simulateContract({ account: sender, address: UPTO_PROXY_ADDRESS, abi: uptoProxyAbi, functionName: 'settle', args: uptoSettleArgs(permit, amount, signature) });
  } catch (err) {
    const reverted = err instanceof BaseError ? err.walk((e) => e instanceof ContractFunctionRevertedError) : undefined;
    if (reverted instanceof ContractFunctionRevertedError) return reverted.data?.errorName === 'Error' ? String(reverted.reason) : reverted.data?.errorName ?? String(reverted.reason);
    throw err;
  }
  throw new Error('expected the settlement to revert, but it would succeed');
}

describe('the dev chain has Permit2 and the x402 upto proxy where the official SDK expects them', () => {
  it('at the addresses @x402/evm signs for, with the published witness type', async () => {
    expect(PERMIT2_ADDRESS).toBe(SDK_PERMIT2_ADDRESS);
    expect(UPTO_PROXY_ADDRESS).toBe(x402UptoPermit2ProxyAddress);
    const read = <T>(functionName: 'PERMIT2' | 'WITNESS_TYPEHASH' | 'WITNESS_TYPE_STRING') =>
      dev.publicClient.readContract({ address: UPTO_PROXY_ADDRESS, abi: uptoProxyAbi, functionName }) as Promise<T>;
    expect(await read<Address>('PERMIT2')).toBe(PERMIT2_ADDRESS);
    expect(await read<string>('WITNESS_TYPE_STRING')).toBe('Witness witness)TokenPermissions(address token,uint256 amount)Witness(address to,address facilitator,uint256 validAfter)');
    expect(await read<Hex>('WITNESS_TYPEHASH')).toBe(keccak256(toHex('Witness(address to,address facilitator,uint256 validAfter)')));
    // Permit2's EIP-712 domain: name "Permit2", this chain, the canonical address; no version.
    const domain = keccak256(`0x${[
      keccak256(toHex('EIP712Domain(string name,uint256 chainId,address verifyingContract)')).slice(2),
      keccak256(toHex('Permit2')).slice(2),
      dev.node.chainId.toString(16).padStart(64, '0'),
      PERMIT2_ADDRESS.slice(2).toLowerCase().padStart(64, '0'),
    ].join('')}`);
    expect(await dev.publicClient.readContract({ address: PERMIT2_ADDRESS, abi: permit2Abi, functionName: 'DOMAIN_SEPARATOR' })).toBe(domain);
  });
});

describe('a payment the official upto client signs', () => {
  it('settles for the amount the facilitator names, up to the maximum; the nonce is then used', async () => {
    const buyer = dev.buyers[0]!;
    const { permit, signature } = await officialPayment(buyer, 2n * ONE_USDC);
    expect(permit).toMatchObject({ spender: UPTO_PROXY_ADDRESS, facilitator: facilitator.address, to: seller, maxAmount: 2n * ONE_USDC });
    const [buyerBefore, sellerBefore] = [await balance(buyer.address), await balance(seller)];
    const charged = ONE_USDC * 37n / 100n;
    const receipt = await dev.publicClient.waitForTransactionReceipt({ hash: await settle(facilitator, permit, charged, signature) });
    expect(receipt.status).toBe('success');
    expect(await balance(buyer.address)).toBe(buyerBefore - charged);
    expect(await balance(seller)).toBe(sellerBefore + charged);
    expect(await permit2NonceUsed(dev.publicClient, buyer.address, permit.nonce)).toBe(true);
    // Settled once, whatever the amount: the same signature cannot charge the rest.
    expect(await revertOf(facilitator, permit, 1n, signature)).toBe('InvalidNonce');
  });

  it('settles the whole maximum too', async () => {
    const buyer = dev.buyers[1]!;
    const { permit, signature } = await officialPayment(buyer, ONE_USDC);
    const before = await balance(seller);
    await dev.publicClient.waitForTransactionReceipt({ hash: await settle(facilitator, permit, ONE_USDC, signature) });
    expect(await balance(seller)).toBe(before + ONE_USDC);
  });
});

describe('every tampered field reverts, and nothing moves', () => {
  let buyer: PrivateKeyAccount;
  let payment: { permit: UptoPermit; signature: Hex };
  let buyerBefore: bigint;

  beforeEach(async () => {
    buyer = dev.buyers[2]!;
    payment = await officialPayment(buyer, ONE_USDC);
    buyerBefore = await balance(buyer.address);
  });

  afterEach(async () => {
    expect(await balance(buyer.address)).toBe(buyerBefore);
  });

  it('an amount above the permit', async () => {
    expect(await revertOf(facilitator, payment.permit, ONE_USDC + 1n, payment.signature)).toBe('AmountExceedsPermitted');
  });

  it('a larger permitted amount than the buyer signed', async () => {
    expect(await revertOf(facilitator, { ...payment.permit, maxAmount: 2n * ONE_USDC }, ONE_USDC + 1n, payment.signature)).toBe('InvalidSigner');
  });

  it('another recipient', async () => {
    expect(await revertOf(facilitator, { ...payment.permit, to: otherFacilitator.address }, 1n, payment.signature)).toBe('InvalidSigner');
  });

  it('another facilitator sending the buyer\'s witness', async () => {
    expect(await revertOf(otherFacilitator, payment.permit, 1n, payment.signature)).toBe('UnauthorizedFacilitator');
  });

  it('another facilitator putting itself in the witness', async () => {
    expect(await revertOf(otherFacilitator, { ...payment.permit, facilitator: otherFacilitator.address }, 1n, payment.signature)).toBe('InvalidSigner');
  });

  it('another token', async () => {
    expect(await revertOf(facilitator, { ...payment.permit, token: privateKeyToAccount(generatePrivateKey()).address }, 1n, payment.signature)).toBe('InvalidSigner');
  });

  it('a zero amount (a zero charge sends no transaction at all)', async () => {
    expect(await revertOf(facilitator, payment.permit, 0n, payment.signature)).toBe('InvalidAmount');
  });

  it('a reused nonce: cancelled by the buyer on Permit2', async () => {
    const { permit } = payment;
    const hash = await dev.walletFor(buyer).writeContract({ address: PERMIT2_ADDRESS, abi: permit2Abi, functionName: 'invalidateUnorderedNonces', args: [permit.nonce >> 8n, 1n << (permit.nonce & 0xffn)] });
    await dev.publicClient.waitForTransactionReceipt({ hash });
    expect(await revertOf(facilitator, permit, 1n, payment.signature)).toBe('InvalidNonce');
  });

  it('a signature by someone else', async () => {
    const forged = await privateKeyToAccount(generatePrivateKey()).signTypedData(uptoTypedData(payment.permit, dev.node.chainId));
    expect(await revertOf(facilitator, payment.permit, 1n, forged)).toBe('InvalidSigner');
  });

  it('before validAfter', async () => {
    const block = await dev.publicClient.getBlock();
    const permit = { ...payment.permit, validAfter: block.timestamp + 3600n };
    const signature = await buyer.signTypedData(uptoTypedData(permit, dev.node.chainId));
    expect(await revertOf(facilitator, permit, 1n, signature)).toBe('PaymentTooEarly');
  });

  it('without the buyer\'s approval of Permit2', async () => {
    const hash = await dev.walletFor(buyer).writeContract({ address: usdc(), abi: erc20AllowanceAbi, functionName: 'approve', args: [PERMIT2_ADDRESS, 0n] });
    await dev.publicClient.waitForTransactionReceipt({ hash });
    try {
      expect(await revertOf(facilitator, payment.permit, 1n, payment.signature)).toBe('TRANSFER_FROM_FAILED');
    } finally {
      const again = await dev.walletFor(buyer).writeContract({ address: usdc(), abi: erc20AllowanceAbi, functionName: 'approve', args: [PERMIT2_ADDRESS, maxUint256] });
      await dev.publicClient.waitForTransactionReceipt({ hash: again });
    }
  });

  // Last: it moves the chain's clock past every deadline signed so far.
  it('an expired deadline', async () => {
    const short = await officialPayment(buyer, ONE_USDC, { maxTimeoutSeconds: 30 });
    await dev.publicClient.request({ method: 'evm_increaseTime' as never, params: [120] as never });
    await dev.publicClient.request({ method: 'evm_mine' as never, params: [] as never });
    expect(await revertOf(facilitator, short.permit, 1n, short.signature)).toBe('SignatureExpired');
  });
});

describe('a smart-account buyer (ERC-1271)', () => {
  it('settles when its owner signed, and not when anyone else did', async () => {
    const artifacts = await loadArtifacts();
    const owner = privateKeyToAccount(generatePrivateKey());
    const salt = keccak256(toHex('upto-smart-account'));
    const factory = dev.deployment.factoryAddress;
    const account = await dev.publicClient.readContract({ address: factory, abi: artifacts.SmartAccountFactory.abi, functionName: 'getAddress', args: [owner.address, salt] }) as Address;
    const wait = async (hash: Hex) => { const r = await dev.publicClient.waitForTransactionReceipt({ hash }); expect(r.status).toBe('success'); };
    await wait(await dev.relayer.writeContract({ address: factory, abi: artifacts.SmartAccountFactory.abi, functionName: 'createAccount', args: [owner.address, salt] }));
    await wait(await dev.walletFor(dev.buyers[0]!).writeContract({ address: usdc(), abi: usdcAbi, functionName: 'transfer', args: [account, 5n * ONE_USDC] }));
    // The owner has the account approve Permit2 (execute), paying the gas itself.
    await wait(await dev.relayer.sendTransaction({ to: owner.address, value: 10n ** 17n }));
    const { encodeFunctionData } = await import('viem');
    const approve = encodeFunctionData({ abi: erc20AllowanceAbi, functionName: 'approve', args: [PERMIT2_ADDRESS, maxUint256] });
    await wait(await dev.walletFor(owner).writeContract({ address: account, abi: artifacts.SmartAccount.abi, functionName: 'execute', args: [usdc(), 0n, approve] }));

    const block = await dev.publicClient.getBlock();
    const permit: UptoPermit = {
      from: account, token: usdc(), maxAmount: 2n * ONE_USDC, spender: UPTO_PROXY_ADDRESS, nonce: 7n, deadline: block.timestamp + 600n,
      to: seller, facilitator: facilitator.address, validAfter: 0n,
    };
    const { hashTypedData } = await import('viem');
    const digest = hashTypedData(uptoTypedData(permit, dev.node.chainId));
    expect(await revertOf(facilitator, permit, 1n, await privateKeyToAccount(generatePrivateKey()).sign({ hash: digest }))).toBe('InvalidContractSignature');
    const before = await balance(seller);
    await wait(await settle(facilitator, permit, ONE_USDC, await owner.sign({ hash: digest })));
    expect(await balance(seller)).toBe(before + ONE_USDC);
    expect(await balance(account)).toBe(4n * ONE_USDC);
  });
});
