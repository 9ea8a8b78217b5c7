import {
  concat,
  domainSeparator,
  hashStruct,
  hashTypedData,
  keccak256,
  parseEventLogs,
  size,
  sliceHex,
  toFunctionSelector,
  toHex,
  hexToBigInt,
  numberToHex,
  type Hex,
} from 'viem';
import { loadFiatTokenArtifacts, type FiatTokenArtifacts } from '../../server/dev/chain/fiat-token.js';
import {
  authorizationState,
  balanceOf,
  cancelAuthorizationTypes,
  receiveWithAuthorizationTypes,
  splitSignature,
  submitTransferWithAuthorization,
  transferWithAuthorizationArgs,
  transferWithAuthorizationTypes,
  usdcAbi,
} from '../../server/chain/usdc.js';
import {
  authorization,
  domainOf,
  FUNDED_USDC,
  ONE_USDC,
  randomNonce,
  revertReason,
  signTransfer,
  startDevChain,
  type DevChain,
} from './dev-chain.js';

let dev: DevChain;
let artifacts: FiatTokenArtifacts;

beforeAll(async () => {
  artifacts = await loadFiatTokenArtifacts();
  dev = await startDevChain();
});

afterAll(async () => {
  await dev?.stop();
});

const token = () => dev.deployment.usdcAddress;
const balance = (account: Hex) => balanceOf({ client: dev.publicClient, token: token(), account });
const read = <T>(functionName: 'name' | 'symbol' | 'decimals' | 'version' | 'DOMAIN_SEPARATOR' | 'totalSupply') =>
  dev.publicClient.readContract({ address: token(), abi: usdcAbi, functionName }) as Promise<T>;

describe('USDC on the dev chain (Circle\'s FiatTokenV2_2 behind its proxy): basics', () => {
  it('has USDC metadata: "USD Coin", "USDC", 6 decimals, version "2"', async () => {
    expect(await read('name')).toBe('USD Coin');
    expect(await read('symbol')).toBe('USDC');
    expect(await read('decimals')).toBe(6);
    expect(await read('version')).toBe('2');
  });

  it('minted 10,000 USDC to each funded buyer', async () => {
    for (const buyer of dev.buyers) expect(await balance(buyer.address)).toBe(FUNDED_USDC);
    expect(await read('totalSupply')).toBe(FUNDED_USDC * BigInt(dev.buyers.length));
  });

  it('DOMAIN_SEPARATOR equals the domain viem hashes for EIP-712 signing', async () => {
    const onChain = await read<Hex>('DOMAIN_SEPARATOR');
    expect(onChain).toBe(domainSeparator({ domain: domainOf(dev) }));

    // And the digest viem signs is "\x19\x01" || DOMAIN_SEPARATOR || structHash with our typehash.
    const message = authorization({ from: dev.buyers[0]!.address, to: dev.buyers[1]!.address, value: ONE_USDC });
    const digest = hashTypedData({
      domain: domainOf(dev),
      types: transferWithAuthorizationTypes,
      primaryType: 'TransferWithAuthorization',
      message,
    });
    const structHash = hashStruct({ data: message, types: transferWithAuthorizationTypes, primaryType: 'TransferWithAuthorization' });
    expect(digest).toBe(keccak256(concat(['0x1901', onChain, structHash])));
  });

  it('exposes the EIP-3009 typehashes', async () => {
    const typehash = (functionName: string) =>
      dev.publicClient.readContract({ address: token(), abi: artifacts.FiatTokenV2_2.abi, functionName });
    const hash = (s: string) => keccak256(toHex(s));
    expect(await typehash('TRANSFER_WITH_AUTHORIZATION_TYPEHASH')).toBe(
      hash('TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)'),
    );
    expect(await typehash('RECEIVE_WITH_AUTHORIZATION_TYPEHASH')).toBe(
      hash('ReceiveWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)'),
    );
    expect(await typehash('CANCEL_AUTHORIZATION_TYPEHASH')).toBe(hash('CancelAuthorization(address authorizer,bytes32 nonce)'));
  });

  it('only a configured minter (the deployer) can mint', async () => {
    const buyerWallet = dev.walletFor(dev.buyers[0]!);
    const reason = await revertReason(
      buyerWallet.writeContract({
        address: token(),
        abi: artifacts.FiatTokenV2_2.abi,
        functionName: 'mint',
        args: [dev.buyers[0]!.address, ONE_USDC],
      }),
    );
    expect(reason).toBe('FiatToken: caller is not a minter');
  });
});

describe('transferWithAuthorization (EOA signer)', () => {
  it('(v, r, s) form: moves the amount, marks the nonce used and emits AuthorizationUsed + Transfer', async () => {
    const [payer, payee] = [dev.buyers[0]!, dev.buyers[1]!];
    const before = { payer: await balance(payer.address), payee: await balance(payee.address) };
    const auth = authorization({ from: payer.address, to: payee.address, value: 3n * ONE_USDC });
    const signature = await signTransfer(dev, payer, auth);
    expect(transferWithAuthorizationArgs(auth, signature).form).toBe('vrs');
    expect(await authorizationState({ client: dev.publicClient, token: token(), authorizer: payer.address, nonce: auth.nonce })).toBe(false);

    const result = await submitTransferWithAuthorization({
      walletClient: dev.relayer,
      publicClient: dev.publicClient,
      token: token(),
      authorization: auth,
      signature,
    });

    expect(result.status).toBe('success');
    const tx = await dev.publicClient.getTransaction({ hash: result.txHash });
    expect(sliceHex(tx.input, 0, 4)).toBe(
      toFunctionSelector('transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,bytes32)'),
    );
    expect(await balance(payer.address)).toBe(before.payer - 3n * ONE_USDC);
    expect(await balance(payee.address)).toBe(before.payee + 3n * ONE_USDC);
    expect(await authorizationState({ client: dev.publicClient, token: token(), authorizer: payer.address, nonce: auth.nonce })).toBe(true);

    const receipt = await dev.publicClient.getTransactionReceipt({ hash: result.txHash });
    const events = parseEventLogs({ abi: usdcAbi, logs: receipt.logs });
    expect(events.map((e) => e.eventName)).toEqual(['AuthorizationUsed', 'Transfer']);
    expect(events[0]!.args).toEqual({ authorizer: payer.address, nonce: auth.nonce });
    expect(events[1]!.args).toEqual({ from: payer.address, to: payee.address, value: 3n * ONE_USDC });
  });

  it('bytes-signature form: moves the amount', async () => {
    const [payer, payee] = [dev.buyers[1]!, dev.buyers[2]!];
    const before = { payer: await balance(payer.address), payee: await balance(payee.address) };
    const auth = authorization({ from: payer.address, to: payee.address, value: ONE_USDC / 2n });
    const signature = await signTransfer(dev, payer, auth);

    const hash = await dev.relayer.writeContract({
      address: token(),
      abi: usdcAbi,
      functionName: 'transferWithAuthorization',
      args: [auth.from, auth.to, auth.value, auth.validAfter, auth.validBefore, auth.nonce, signature],
    });
    const receipt = await dev.publicClient.waitForTransactionReceipt({ hash });

    expect(receipt.status).toBe('success');
    expect(await balance(payer.address)).toBe(before.payer - ONE_USDC / 2n);
    expect(await balance(payee.address)).toBe(before.payee + ONE_USDC / 2n);
  });

  it('replaying the same authorization reverts "authorization is used or canceled" and moves nothing', async () => {
    const [payer, payee] = [dev.buyers[0]!, dev.buyers[2]!];
    const auth = authorization({ from: payer.address, to: payee.address, value: ONE_USDC });
    const signature = await signTransfer(dev, payer, auth);
    const submit = () =>
      submitTransferWithAuthorization({ walletClient: dev.relayer, publicClient: dev.publicClient, token: token(), authorization: auth, signature });
    expect((await submit()).status).toBe('success');
    const after = await balance(payer.address);

    expect(await revertReason(submit())).toBe('FiatTokenV2: authorization is used or canceled');
    expect(await balance(payer.address)).toBe(after);
  });

  it('an expired authorization reverts "authorization is expired"', async () => {
    const payer = dev.buyers[0]!;
    const block = await dev.publicClient.getBlock();
    const auth = authorization({ from: payer.address, to: dev.buyers[1]!.address, value: ONE_USDC, validBefore: block.timestamp - 1n });
    const signature = await signTransfer(dev, payer, auth);
    const reason = await revertReason(
      submitTransferWithAuthorization({ walletClient: dev.relayer, publicClient: dev.publicClient, token: token(), authorization: auth, signature }),
    );
    expect(reason).toBe('FiatTokenV2: authorization is expired');
  });

  it('a not-yet-valid authorization reverts "authorization is not yet valid"', async () => {
    const payer = dev.buyers[0]!;
    const block = await dev.publicClient.getBlock();
    const auth = authorization({
      from: payer.address,
      to: dev.buyers[1]!.address,
      value: ONE_USDC,
      validAfter: block.timestamp + 3600n,
      validBefore: block.timestamp + 7200n,
    });
    const signature = await signTransfer(dev, payer, auth);
    const reason = await revertReason(
      submitTransferWithAuthorization({ walletClient: dev.relayer, publicClient: dev.publicClient, token: token(), authorization: auth, signature }),
    );
    expect(reason).toBe('FiatTokenV2: authorization is not yet valid');
  });

  it('a signature by someone other than `from` reverts "invalid signature" (both forms)', async () => {
    const [payer, thief] = [dev.buyers[0]!, dev.buyers[1]!];
    const before = await balance(payer.address);
    const auth = authorization({ from: payer.address, to: thief.address, value: ONE_USDC });
    const signature = await signTransfer(dev, thief, auth);

    expect(
      await revertReason(
        submitTransferWithAuthorization({ walletClient: dev.relayer, publicClient: dev.publicClient, token: token(), authorization: auth, signature }),
      ),
    ).toBe('FiatTokenV2: invalid signature');
    expect(
      await revertReason(
        dev.relayer.writeContract({
          address: token(),
          abi: usdcAbi,
          functionName: 'transferWithAuthorization',
          args: [auth.from, auth.to, auth.value, auth.validAfter, auth.validBefore, auth.nonce, signature],
        }),
      ),
    ).toBe('FiatTokenV2: invalid signature');
    expect(await balance(payer.address)).toBe(before);
  });

  it('a signed authorization with a changed amount reverts "invalid signature"', async () => {
    const payer = dev.buyers[0]!;
    const auth = authorization({ from: payer.address, to: dev.buyers[1]!.address, value: ONE_USDC });
    const signature = await signTransfer(dev, payer, auth);
    const reason = await revertReason(
      submitTransferWithAuthorization({
        walletClient: dev.relayer,
        publicClient: dev.publicClient,
        token: token(),
        authorization: { ...auth, value: 100n * ONE_USDC },
        signature,
      }),
    );
    expect(reason).toBe('FiatTokenV2: invalid signature');
  });

  it('rejects the malleable twin (high s) of a valid signature', async () => {
    const payer = dev.buyers[0]!;
    const auth = authorization({ from: payer.address, to: dev.buyers[1]!.address, value: ONE_USDC });
    const { v, r, s } = splitSignature(await signTransfer(dev, payer, auth));
    const n = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
    const twin = concat([r, numberToHex(n - hexToBigInt(s), { size: 32 }), toHex(v === 27 ? 28 : 27, { size: 1 })]);
    expect(size(twin)).toBe(65);

    const reason = await revertReason(
      submitTransferWithAuthorization({ walletClient: dev.relayer, publicClient: dev.publicClient, token: token(), authorization: auth, signature: twin }),
    );
    expect(reason).toBe("ECRecover: invalid signature 's' value");
  });

  it('an amount above the balance reverts "ERC20: transfer amount exceeds balance" and leaves the nonce unused', async () => {
    const payer = dev.buyers[2]!;
    const auth = authorization({ from: payer.address, to: dev.buyers[0]!.address, value: (await balance(payer.address)) + 1n });
    const signature = await signTransfer(dev, payer, auth);
    const reason = await revertReason(
      submitTransferWithAuthorization({ walletClient: dev.relayer, publicClient: dev.publicClient, token: token(), authorization: auth, signature }),
    );
    expect(reason).toBe('ERC20: transfer amount exceeds balance');
    expect(await authorizationState({ client: dev.publicClient, token: token(), authorizer: payer.address, nonce: auth.nonce })).toBe(false);
  });
});

describe('receiveWithAuthorization', () => {
  const signReceive = (payerIndex: number, auth: ReturnType<typeof authorization>) =>
    dev.buyers[payerIndex]!.signTypedData({
      domain: domainOf(dev),
      types: receiveWithAuthorizationTypes,
      primaryType: 'ReceiveWithAuthorization',
      message: auth,
    });

  it('the payee can submit it (v, r, s and bytes forms)', async () => {
    const [payer, payee] = [dev.buyers[0]!, dev.buyers[1]!];
    const payeeWallet = dev.walletFor(payee);
    const before = await balance(payee.address);

    const first = authorization({ from: payer.address, to: payee.address, value: ONE_USDC });
    const { v, r, s } = splitSignature(await signReceive(0, first));
    const h1 = await payeeWallet.writeContract({
      address: token(),
      abi: usdcAbi,
      functionName: 'receiveWithAuthorization',
      args: [first.from, first.to, first.value, first.validAfter, first.validBefore, first.nonce, v, r, s],
    });
    expect((await dev.publicClient.waitForTransactionReceipt({ hash: h1 })).status).toBe('success');

    const second = authorization({ from: payer.address, to: payee.address, value: 2n * ONE_USDC });
    const h2 = await payeeWallet.writeContract({
      address: token(),
      abi: usdcAbi,
      functionName: 'receiveWithAuthorization',
      args: [second.from, second.to, second.value, second.validAfter, second.validBefore, second.nonce, await signReceive(0, second)],
    });
    expect((await dev.publicClient.waitForTransactionReceipt({ hash: h2 })).status).toBe('success');

    expect(await balance(payee.address)).toBe(before + 3n * ONE_USDC);
  });

  it('anyone but the payee gets "caller must be the payee"', async () => {
    const [payer, payee] = [dev.buyers[0]!, dev.buyers[1]!];
    const auth = authorization({ from: payer.address, to: payee.address, value: ONE_USDC });
    const signature = await signReceive(0, auth);
    const reason = await revertReason(
      dev.relayer.writeContract({
        address: token(),
        abi: usdcAbi,
        functionName: 'receiveWithAuthorization',
        args: [auth.from, auth.to, auth.value, auth.validAfter, auth.validBefore, auth.nonce, signature],
      }),
    );
    expect(reason).toBe('FiatTokenV2: caller must be the payee');
  });

  it('a TransferWithAuthorization signature is not accepted as a ReceiveWithAuthorization', async () => {
    const [payer, payee] = [dev.buyers[0]!, dev.buyers[1]!];
    const auth = authorization({ from: payer.address, to: payee.address, value: ONE_USDC });
    const reason = await revertReason(
      dev.walletFor(payee).writeContract({
        address: token(),
        abi: usdcAbi,
        functionName: 'receiveWithAuthorization',
        args: [auth.from, auth.to, auth.value, auth.validAfter, auth.validBefore, auth.nonce, await signTransfer(dev, payer, auth)],
      }),
    );
    expect(reason).toBe('FiatTokenV2: invalid signature');
  });
});

describe('cancelAuthorization', () => {
  const signCancel = (payerIndex: number, nonce: Hex) =>
    dev.buyers[payerIndex]!.signTypedData({
      domain: domainOf(dev),
      types: cancelAuthorizationTypes,
      primaryType: 'CancelAuthorization',
      message: { authorizer: dev.buyers[payerIndex]!.address, nonce },
    });

  it('(v, r, s) form: flips authorizationState, emits AuthorizationCanceled, and the transfer then reverts', async () => {
    const payer = dev.buyers[0]!;
    const auth = authorization({ from: payer.address, to: dev.buyers[1]!.address, value: ONE_USDC });
    const transferSignature = await signTransfer(dev, payer, auth);
    const { v, r, s } = splitSignature(await signCancel(0, auth.nonce));

    const hash = await dev.relayer.writeContract({
      address: token(),
      abi: usdcAbi,
      functionName: 'cancelAuthorization',
      args: [payer.address, auth.nonce, v, r, s],
    });
    const receipt = await dev.publicClient.waitForTransactionReceipt({ hash });
    const events = parseEventLogs({ abi: usdcAbi, logs: receipt.logs, eventName: 'AuthorizationCanceled' });
    expect(events).toHaveLength(1);
    expect(events[0]!.args).toEqual({ authorizer: payer.address, nonce: auth.nonce });
    expect(await authorizationState({ client: dev.publicClient, token: token(), authorizer: payer.address, nonce: auth.nonce })).toBe(true);

    const reason = await revertReason(
      submitTransferWithAuthorization({
        walletClient: dev.relayer,
        publicClient: dev.publicClient,
        token: token(),
        authorization: auth,
        signature: transferSignature,
      }),
    );
    expect(reason).toBe('FiatTokenV2: authorization is used or canceled');
  });

  it('bytes form: cancels; canceling twice or with a foreign signature reverts', async () => {
    const payer = dev.buyers[1]!;
    const nonce = randomNonce();
    const cancel = (signature: Hex) =>
      dev.relayer.writeContract({
        address: token(),
        abi: usdcAbi,
        functionName: 'cancelAuthorization',
        args: [payer.address, nonce, signature],
      });

    expect(await revertReason(cancel(await signCancel(0, nonce)))).toBe('FiatTokenV2: invalid signature');

    const hash = await cancel(await signCancel(1, nonce));
    expect((await dev.publicClient.waitForTransactionReceipt({ hash })).status).toBe('success');
    expect(await authorizationState({ client: dev.publicClient, token: token(), authorizer: payer.address, nonce })).toBe(true);

    expect(await revertReason(cancel(await signCancel(1, nonce)))).toBe('FiatTokenV2: authorization is used or canceled');
  });
});
