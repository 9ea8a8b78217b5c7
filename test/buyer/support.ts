import express from 'express';
import { createWalletClient, http, parseUnits, publicActions, type Address } from 'viem';
import { generatePrivateKey, nonceManager, privateKeyToAccount } from 'viem/accounts';
import { paymentMiddleware as officialPaymentMiddleware, x402ResourceServer } from '@x402/express';
import { ExactEvmScheme as OfficialEvmServerScheme } from '@x402/evm/exact/server';
import { ExactEvmScheme as OfficialEvmFacilitatorScheme } from '@x402/evm/exact/facilitator';
import { toFacilitatorEvmSigner } from '@x402/evm';
import { x402Facilitator } from '@x402/core/facilitator';
import type { FacilitatorClient } from '@x402/core/server';
import type { TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { sendUsdc, setEthBalance, testChain } from '../support/chain.js';
import { registerEndpoint, serve, setUpSeller, type RunningApp } from '../interop/seller.js';
import { createWeatherApp } from '../../examples/express-seller/server.js';
import { DEV_USDC_NAME, DEV_USDC_VERSION } from '../../server/dev/chain/dev-chain.js';

export const inDays = (days: number) => new Date(Date.now() + days * 86_400_000).toISOString();

/**
 * A signed-up agent whose wallet holds `usdc` USDC, sent to the wallet's address on chain as its owner
 * funds it in production (not the dev faucet): by `send`, the suite's chain treasury unless the test runs
 * its own chain.
 */
export async function fundedAgent(server: TestServer, usdc = '1', send: (to: Address, amount: bigint) => Promise<void> = sendUsdc) {
  const agent = await signUp(server);
  const key = agent.identity.rawKey;
  const wallet = await server.request('GET', '/v0/wallet', { key });
  if (wallet.status !== 200) throw new Error(`wallet: ${wallet.status} ${wallet.text}`);
  const address = wallet.body.address as Address;
  if (Number(usdc) > 0) await send(address, parseUnits(usdc, 6));
  return { ...agent, key, owner: { orgId: agent.org_id, identityId: agent.identity.identityId }, address };
}

export async function createMandate(server: TestServer, key: string, body: Record<string, unknown> = {}) {
  const res = await server.request('POST', '/v0/payments/mandates', { key, body: { maxPerCallUsdc: '0.05', dailyCapUsdc: '1', validUntil: inDays(1), ...body } });
  if (res.status !== 201) throw new Error(`mandate: ${res.status} ${res.text}`);
  return res.body as { mandateId: string } & Record<string, unknown>;
}

export const pay = (server: TestServer, key: string, body: Record<string, unknown>) =>
  server.request('POST', '/v0/payments/pay', { key, body });

/** The repository's Express example seller (our adapter), paid through this backend's facilitator. */
export async function ourExpressSeller(server: TestServer) {
  const seller = await setUpSeller(server);
  const app = createWeatherApp({ backendUrl: server.url, apiKey: seller.sellerKey });
  const running = await serve(app);
  const registered = await registerEndpoint(server, seller.platformKey, { url: `${running.url}/weather`, priceUsdc: '0.01' });
  if (registered.status !== 201) throw new Error(`endpoint: ${registered.status} ${registered.text}`);
  return { ...seller, ...running, priceAtomic: 10_000n };
}

/**
 * A seller on the official `@x402/express` (v2) middleware, settled by the official `@x402/evm`
 * facilitator logic in-process with its own relayer: nothing of ours between the buyer and the chain.
 */
export async function officialExpressSeller(options: { priceAtomic?: bigint; network?: `eip155:${number}`; asset?: Address; /** Ask for exact through Permit2. */ assetTransferMethod?: 'permit2' } = {}): Promise<RunningApp & { payTo: Address; priceAtomic: bigint }> {
  const { chain, rpcUrl, usdc } = testChain();
  const relayerKey = generatePrivateKey();
  const relayer = privateKeyToAccount(relayerKey, { nonceManager });
  await setEthBalance(relayer.address, parseUnits('10', 18));
  const client = createWalletClient({ account: relayer, chain, transport: http(rpcUrl), pollingInterval: 100 }).extend(publicActions);
  const signer = toFacilitatorEvmSigner({
    address: relayer.address,
    readContract: (args) => client.readContract(args as never),
    verifyTypedData: (args) => client.verifyTypedData(args as never),
    writeContract: (args) => client.writeContract(args as never),
    sendTransaction: (args) => client.sendTransaction(args),
    waitForTransactionReceipt: (args) => client.waitForTransactionReceipt(args),
    getCode: (args) => client.getCode(args),
  });
  const network = options.network ?? 'eip155:84532';
  const facilitator = new x402Facilitator().register(network, new OfficialEvmFacilitatorScheme(signer));
  // The facilitator object has the client's verify/settle/getSupported, in-process instead of over HTTP.
  const resourceServer = new x402ResourceServer(facilitator as unknown as FacilitatorClient).register(network, new OfficialEvmServerScheme());
  const payTo = privateKeyToAccount(generatePrivateKey()).address;
  const priceAtomic = options.priceAtomic ?? 20_000n;
  const app = express();
  app.use(officialPaymentMiddleware({
    'GET /quote': {
      accepts: {
        scheme: 'exact', network, payTo, maxTimeoutSeconds: 120,
        price: { amount: priceAtomic.toString(), asset: options.asset ?? usdc, extra: { name: DEV_USDC_NAME, version: DEV_USDC_VERSION, ...(options.assetTransferMethod ? { assetTransferMethod: options.assetTransferMethod } : {}) } },
      },
      description: 'A paid quote',
      mimeType: 'application/json',
    },
  }, resourceServer));
  app.get('/quote', (_req, res) => { res.json({ quote: 'Simplicity is prerequisite for reliability.' }); });
  const running = await serve(app);
  return { ...running, payTo, priceAtomic };
}
