import { getAddress, parseUnits, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { faucetConfig, testChain, usdcBalance } from '../support/chain.js';
import { smartAccountFactoryAbi } from '../../server/wallet/smart-account-abi.js';
import { walletSalt } from '../../server/wallet/wallet-service.js';
import { transferWithAuthorizationTypes, usdcDomain } from '../../server/chain/usdc.js';
import { DEV_CHAIN_ID, DEV_USDC_NAME, DEV_USDC_VERSION } from '../../server/dev/chain/dev-chain.js';

let server: TestServer;
beforeAll(async () => { server = await startTestServer({ TRUST_PROXY: 'true', ...(await faucetConfig('1000')) }); });
afterAll(async () => { await server.close(); });

const walletOf = (key: string) => server.request('GET', '/v0/wallet', { key });

describe('GET /v0/wallet', () => {
  it('gives every identity a counterfactual smart-account address on first use, without deploying it', async () => {
    const agent = await signUp(server);
    const res = await walletOf(agent.identity.rawKey);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      address: expect.stringMatching(/^0x[0-9a-fA-F]{40}$/), network: 'base-sepolia', deployed: false, balanceUsdc: '0', balanceUsdcRaw: '0',
      networks: [{ network: 'base-sepolia', caip2: 'eip155:84532', deployed: false, balanceUsdc: '0', balanceUsdcRaw: '0' }],
    });
    expect(getAddress(res.body.address)).toBe(res.body.address);

    // The address is the factory's CREATE2 address for (owner, salt-from-identity-id), and nothing is there yet.
    const record = await server.app.db.collection('wallets').findOne({ identityId: agent.identity.identityId });
    const { publicClient, factory } = testChain();
    const expected = await publicClient.readContract({ address: factory, abi: smartAccountFactoryAbi, functionName: 'getAddress', args: [record!.ownerAddress as Address, walletSalt(agent.identity.identityId)] });
    expect(res.body.address).toBe(expected);
    expect(await publicClient.getCode({ address: res.body.address })).toBeUndefined();

    expect((await walletOf(agent.identity.rawKey)).body.address).toBe(res.body.address);
  });

  it('shows the address in whoami and in the platform identity view', async () => {
    const agent = await signUp(server);
    const whoami = await server.request('GET', '/v0/whoami', { key: agent.identity.rawKey });
    const wallet = await walletOf(agent.identity.rawKey);
    expect(whoami.body.wallet).toEqual({ address: wallet.body.address, network: 'base-sepolia' });
    const platform = await server.request('GET', `/v0/platform/identities/${agent.identity.identityId}`, { key: agent.platform_key });
    expect(platform.body.wallet).toEqual({ address: wallet.body.address, network: 'base-sepolia' });
  });

  it('creates exactly one wallet when first calls race', async () => {
    const agent = await signUp(server);
    const results = await Promise.all(Array.from({ length: 12 }, () => walletOf(agent.identity.rawKey)));
    expect(results.every((r) => r.status === 200)).toBe(true);
    expect(new Set(results.map((r) => r.body.address)).size).toBe(1);
    expect(await server.app.db.collection('wallets').countDocuments({ identityId: agent.identity.identityId })).toBe(1);
  });

  it('keeps the owner key sealed at rest and bound to its identity', async () => {
    const agent = await signUp(server);
    const other = await signUp(server);
    await walletOf(agent.identity.rawKey);
    const record = await server.app.db.collection('wallets').findOne({ identityId: agent.identity.identityId });
    expect(record!.ownerKey).toMatchObject({ v: 1, keyVersion: 1, ciphertext: expect.any(String) });
    const key = server.app.secrets.openText(record!.ownerKey, `wallet:${agent.identity.identityId}`) as Hex;
    expect(privateKeyToAccount(key).address).toBe(record!.ownerAddress);
    // The raw key appears nowhere in the stored document or in what the API returns.
    expect(JSON.stringify(record)).not.toContain(key.slice(2));
    expect(JSON.stringify((await walletOf(agent.identity.rawKey)).body)).not.toContain(key.slice(2));
    expect(() => server.app.secrets.openText(record!.ownerKey, `wallet:${other.identity.identityId}`)).toThrow();
  });

  it('needs an identity key with wallet:read', async () => {
    const agent = await signUp(server);
    expect((await walletOf(agent.platform_key)).status).toBe(403);
    const narrowed = await server.request('PATCH', `/v0/platform/identities/${agent.identity.identityId}`, { key: agent.platform_key, body: { removeScopes: ['wallet:read'] } });
    expect(narrowed.status).toBe(200);
    const res = await walletOf(agent.identity.rawKey);
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ error: 'forbidden', status: 403 });
    expect(await server.request('GET', '/v0/wallet')).toMatchObject({ status: 401 });
  });
});

describe('owner signatures', () => {
  it('verify through ERC-1271 once the relayer has deployed the account', async () => {
    const agent = await signUp(server);
    const owner = { orgId: agent.org_id, identityId: agent.identity.identityId };
    const wallet = await server.app.wallets.forIdentity(owner);
    const now = BigInt(Math.floor(Date.now() / 1000));
    const authorization = {
      from: wallet.address as Address, to: privateKeyToAccount(generatePrivateKey()).address, value: 1000n,
      validAfter: now - 60n, validBefore: now + 300n, nonce: `0x${'ab'.repeat(32)}` as Hex,
    };
    const signature = await server.app.wallets.signTransfer(wallet, authorization);
    const { publicClient, usdc } = testChain();
    const check = () => publicClient.verifyTypedData({
      address: wallet.address as Address,
      domain: usdcDomain({ name: DEV_USDC_NAME, version: DEV_USDC_VERSION, chainId: DEV_CHAIN_ID, verifyingContract: usdc }),
      types: transferWithAuthorizationTypes, primaryType: 'TransferWithAuthorization', message: authorization, signature,
    });
    // Not an EOA signature of the account address: without code at the address it cannot verify.
    expect(await check()).toBe(false);
    await Promise.all([server.app.wallets.ensureDeployed(wallet), server.app.wallets.ensureDeployed(wallet)]);
    expect((await walletOf(agent.identity.rawKey)).body.deployed).toBe(true);
    expect(await check()).toBe(true);
  });
});

describe('POST /v0/dev/faucet (dev mode)', () => {
  it('sends test USDC to the caller’s wallet', async () => {
    const agent = await signUp(server);
    const res = await server.request('POST', '/v0/dev/faucet', { key: agent.identity.rawKey, body: { amountUsdc: '12.5' } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ txHash: expect.stringMatching(/^0x[0-9a-f]{64}$/), amountUsdc: '12.5', wallet: { balanceUsdc: '12.5', balanceUsdcRaw: '12500000' } });
    expect(await usdcBalance(res.body.wallet.address)).toBe(parseUnits('12.5', 6));
    const wallet = await walletOf(agent.identity.rawKey);
    expect(wallet.body).toMatchObject({ balanceUsdc: '12.5', balanceUsdcRaw: '12500000', deployed: false });
  });

  it('takes amounts only as decimal strings with at most 6 decimals', async () => {
    const agent = await signUp(server);
    for (const amountUsdc of [12.5, '1.1234567', '-1', '0', 'abc', '1e3']) {
      const res = await server.request('POST', '/v0/dev/faucet', { key: agent.identity.rawKey, body: { amountUsdc } });
      expect({ amountUsdc, status: res.status, field: res.body.message.startsWith('body.amountUsdc') }).toEqual({ amountUsdc, status: 400, field: true });
    }
  });
});

describe('production mode', () => {
  it('has no faucet route', async () => {
    const prod = await startTestServer({ TRUST_PROXY: 'true', AGENTGATE_MODE: 'production' });
    try {
      const agent = await signUp(prod);
      const res = await prod.request('POST', '/v0/dev/faucet', { key: agent.identity.rawKey, body: { amountUsdc: '1' } });
      expect(res.status).toBe(404);
      expect((await prod.request('GET', '/v0/wallet', { key: agent.identity.rawKey })).status).toBe(200);
    } finally {
      await prod.close();
    }
  });
});
