import { encodeFunctionData, hashTypedData, keccak256, parseEventLogs, toHex, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { loadArtifacts, type Artifacts } from '../../contracts/compile.js';
import {
  balanceOf,
  submitTransferWithAuthorization,
  transferWithAuthorizationTypes,
  usdcAbi,
  type Authorization,
} from '../../server/chain/usdc.js';
import { authorization, domainOf, ONE_USDC, revertReason, startDevChain, type DevChain } from './dev-chain.js';

let dev: DevChain;
let artifacts: Artifacts;

beforeAll(async () => {
  artifacts = await loadArtifacts();
  dev = await startDevChain();
});

afterAll(async () => {
  await dev?.stop();
});

const token = () => dev.deployment.usdcAddress;
const factory = () => dev.deployment.factoryAddress;
const balance = (account: Address) => balanceOf({ client: dev.publicClient, token: token(), account });

function counterfactualAddress(owner: Address, salt: Hex): Promise<Address> {
  return dev.publicClient.readContract({
    address: factory(),
    abi: artifacts.SmartAccountFactory.abi,
    functionName: 'getAddress',
    args: [owner, salt],
  }) as Promise<Address>;
}

async function createAccount(owner: Address, salt: Hex) {
  const hash = await dev.relayer.writeContract({
    address: factory(),
    abi: artifacts.SmartAccountFactory.abi,
    functionName: 'createAccount',
    args: [owner, salt],
  });
  return dev.publicClient.waitForTransactionReceipt({ hash });
}

/** An owner key, and its account deployed through the factory and funded with 100 USDC. */
async function fundedAccount(label: string) {
  const owner = privateKeyToAccount(generatePrivateKey());
  const salt = keccak256(toHex(label));
  const address = await counterfactualAddress(owner.address, salt);
  await createAccount(owner.address, salt);
  const hash = await dev.walletFor(dev.buyers[0]!).writeContract({
    address: token(),
    abi: usdcAbi,
    functionName: 'transfer',
    args: [address, 100n * ONE_USDC],
  });
  await dev.publicClient.waitForTransactionReceipt({ hash });
  return { owner, address };
}

function transferDigest(auth: Authorization): Hex {
  return hashTypedData({
    domain: domainOf(dev),
    types: transferWithAuthorizationTypes,
    primaryType: 'TransferWithAuthorization',
    message: auth,
  });
}

describe('SmartAccountFactory', () => {
  it('deploys at the counterfactual address, which can hold USDC before the account exists', async () => {
    const owner = privateKeyToAccount(generatePrivateKey());
    const salt = keccak256(toHex('wallet-1'));
    const predicted = await counterfactualAddress(owner.address, salt);
    expect(await dev.publicClient.getCode({ address: predicted })).toBeUndefined();

    // Fund first: the address is valid before any code lives there.
    const fund = await dev.walletFor(dev.buyers[0]!).writeContract({
      address: token(),
      abi: usdcAbi,
      functionName: 'transfer',
      args: [predicted, 5n * ONE_USDC],
    });
    await dev.publicClient.waitForTransactionReceipt({ hash: fund });

    const receipt = await createAccount(owner.address, salt);
    const created = parseEventLogs({ abi: artifacts.SmartAccountFactory.abi, logs: receipt.logs });
    expect(created).toHaveLength(1);
    expect(created[0]).toMatchObject({ eventName: 'AccountCreated', args: { account: predicted, owner: owner.address, salt } });
    expect(await dev.publicClient.getCode({ address: predicted })).toMatch(/^0x[0-9a-f]{100,}$/);
    expect(await balance(predicted)).toBe(5n * ONE_USDC);
    expect(
      await dev.publicClient.readContract({ address: predicted, abi: artifacts.SmartAccount.abi, functionName: 'owner' }),
    ).toBe(owner.address);
  });

  it('createAccount is idempotent: same address, no second deployment', async () => {
    const owner = privateKeyToAccount(generatePrivateKey());
    const salt = keccak256(toHex('wallet-2'));
    const first = await createAccount(owner.address, salt);
    expect(parseEventLogs({ abi: artifacts.SmartAccountFactory.abi, logs: first.logs })).toHaveLength(1);

    const { result } = await dev.publicClient.simulateContract({
      account: dev.relayer.account,
      address: factory(),
      abi: artifacts.SmartAccountFactory.abi,
      functionName: 'createAccount',
      args: [owner.address, salt],
    });
    expect(result).toBe(await counterfactualAddress(owner.address, salt));
    const second = await createAccount(owner.address, salt);
    expect(second.status).toBe('success');
    expect(parseEventLogs({ abi: artifacts.SmartAccountFactory.abi, logs: second.logs })).toHaveLength(0);
  });

  it('different owners or salts give different addresses', async () => {
    const a = privateKeyToAccount(generatePrivateKey()).address;
    const b = privateKeyToAccount(generatePrivateKey()).address;
    const s1 = keccak256(toHex('s1'));
    const s2 = keccak256(toHex('s2'));
    const addresses = new Set([
      await counterfactualAddress(a, s1),
      await counterfactualAddress(a, s2),
      await counterfactualAddress(b, s1),
    ]);
    expect(addresses.size).toBe(3);
  });
});

describe('SmartAccount paying USDC via ERC-1271', () => {
  it('isValidSignature answers 0x1626ba7e for the owner and 0xffffffff for anyone else', async () => {
    const { owner, address } = await fundedAccount('erc1271-direct');
    const digest = keccak256(toHex('any digest'));
    const isValid = (signature: Hex) =>
      dev.publicClient.readContract({
        address,
        abi: artifacts.SmartAccount.abi,
        functionName: 'isValidSignature',
        args: [digest, signature],
      });
    expect(await isValid(await owner.sign({ hash: digest }))).toBe('0x1626ba7e');
    expect(await isValid(await privateKeyToAccount(generatePrivateKey()).sign({ hash: digest }))).toBe('0xffffffff');
    expect(await isValid('0x1234')).toBe('0xffffffff');
  });

  it('pays via transferWithAuthorization with the owner-signed EIP-712 digest (v, r, s form)', async () => {
    const { owner, address } = await fundedAccount('pay-vrs');
    const seller = dev.buyers[2]!.address;
    const sellerBefore = await balance(seller);
    const auth = authorization({ from: address, to: seller, value: 7n * ONE_USDC });
    const signature = await owner.sign({ hash: transferDigest(auth) });

    const result = await submitTransferWithAuthorization({
      walletClient: dev.relayer,
      publicClient: dev.publicClient,
      token: token(),
      authorization: auth,
      signature,
    });

    expect(result.status).toBe('success');
    expect(await balance(address)).toBe(93n * ONE_USDC);
    expect(await balance(seller)).toBe(sellerBefore + 7n * ONE_USDC);
    const receipt = await dev.publicClient.getTransactionReceipt({ hash: result.txHash });
    const used = parseEventLogs({ abi: usdcAbi, logs: receipt.logs, eventName: 'AuthorizationUsed' });
    expect(used[0]!.args).toEqual({ authorizer: address, nonce: auth.nonce });
  });

  it('pays via the bytes-signature form, and signTypedData by the owner is the same signature', async () => {
    const { owner, address } = await fundedAccount('pay-bytes');
    const seller = dev.buyers[2]!.address;
    const auth = authorization({ from: address, to: seller, value: 2n * ONE_USDC });
    const signature = await owner.signTypedData({
      domain: domainOf(dev),
      types: transferWithAuthorizationTypes,
      primaryType: 'TransferWithAuthorization',
      message: auth,
    });
    expect(signature).toBe(await owner.sign({ hash: transferDigest(auth) }));

    const hash = await dev.relayer.writeContract({
      address: token(),
      abi: usdcAbi,
      functionName: 'transferWithAuthorization',
      args: [auth.from, auth.to, auth.value, auth.validAfter, auth.validBefore, auth.nonce, signature],
    });
    expect((await dev.publicClient.waitForTransactionReceipt({ hash })).status).toBe('success');
    expect(await balance(address)).toBe(98n * ONE_USDC);
  });

  it('refuses a signature by another key ("FiatTokenV2: invalid signature") and keeps the funds', async () => {
    const { address } = await fundedAccount('pay-wrong-key');
    const intruder = privateKeyToAccount(generatePrivateKey());
    const auth = authorization({ from: address, to: intruder.address, value: 50n * ONE_USDC });
    const signature = await intruder.sign({ hash: transferDigest(auth) });

    const reason = await revertReason(
      submitTransferWithAuthorization({ walletClient: dev.relayer, publicClient: dev.publicClient, token: token(), authorization: auth, signature }),
    );
    expect(reason).toBe('FiatTokenV2: invalid signature');
    expect(await balance(address)).toBe(100n * ONE_USDC);
  });

  it('refuses an owner signature made for a different account of the same owner', async () => {
    const owner = privateKeyToAccount(generatePrivateKey());
    const saltA = keccak256(toHex('a'));
    const saltB = keccak256(toHex('b'));
    const accountA = await counterfactualAddress(owner.address, saltA);
    const accountB = await counterfactualAddress(owner.address, saltB);
    await createAccount(owner.address, saltA);
    await createAccount(owner.address, saltB);

    const forA = authorization({ from: accountA, to: dev.buyers[0]!.address, value: 0n });
    const signature = await owner.sign({ hash: transferDigest(forA) });
    const reason = await revertReason(
      submitTransferWithAuthorization({
        walletClient: dev.relayer,
        publicClient: dev.publicClient,
        token: token(),
        authorization: { ...forA, from: accountB },
        signature,
      }),
    );
    expect(reason).toBe('FiatTokenV2: invalid signature');
  });

  it('execute: the owner can move funds directly; anyone else is refused', async () => {
    const { owner, address } = await fundedAccount('execute');
    await dev.relayer.sendTransaction({ to: owner.address, value: 10n ** 18n }); // gas for the owner key
    const recipient = dev.buyers[1]!.address;
    const recipientBefore = await balance(recipient);
    const data = encodeFunctionData({ abi: usdcAbi, functionName: 'transfer', args: [recipient, 10n * ONE_USDC] });

    const hash = await dev.walletFor(owner).writeContract({
      address,
      abi: artifacts.SmartAccount.abi,
      functionName: 'execute',
      args: [token(), 0n, data],
    });
    expect((await dev.publicClient.waitForTransactionReceipt({ hash })).status).toBe('success');
    expect(await balance(address)).toBe(90n * ONE_USDC);
    expect(await balance(recipient)).toBe(recipientBefore + 10n * ONE_USDC);

    const reason = await revertReason(
      dev.relayer.writeContract({ address, abi: artifacts.SmartAccount.abi, functionName: 'execute', args: [token(), 0n, data] }),
    );
    expect(reason).toBe('SmartAccount: caller is not the owner');

    // A failing inner call bubbles up the token's own revert reason.
    const tooMuch = encodeFunctionData({ abi: usdcAbi, functionName: 'transfer', args: [recipient, 1000n * ONE_USDC] });
    expect(
      await revertReason(
        dev.walletFor(owner).writeContract({ address, abi: artifacts.SmartAccount.abi, functionName: 'execute', args: [token(), 0n, tooMuch] }),
      ),
    ).toBe('ERC20: transfer amount exceeds balance');
  });
});
