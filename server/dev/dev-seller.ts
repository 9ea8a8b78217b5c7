import { join } from 'node:path';
import type { Address } from 'viem';
import type { RunningServer } from '../server.js';
import { DEV_ACCOUNTS } from './chain/dev-accounts.js';
import { readJson, writeJson } from '../cli/local-state.js';

/** What the examples read to run against `agentgate dev` with no other set-up (.agentgate/dev-seller.json). */
export interface DevSellerFile {
  backendUrl: string;
  orgId: string;
  platformKey: string;
  sellerKey: string;
  payTo: Address;
  usdcAddress: Address;
  factoryAddress: Address;
  rpcUrl: string;
  chainId: number;
  network: string;
  /** Dev account 1, funded with test USDC: the examples' buyer. */
  buyerPrivateKey: `0x${string}`;
  endpoints: { express: string; koa: string; mcp: string };
}

export const EXAMPLE_PORTS = { express: 4021, koa: 4022, mcp: 4023 } as const;

/**
 * The dev seller: an org with payment acceptance on (paid to dev account 9), a seller key and the
 * example endpoints registered. Created on the first `agentgate dev` and reused while its keys work.
 */
export async function ensureDevSeller(server: RunningServer, stateDir: string, chain: { rpcUrl: string; usdcAddress: Address; factoryAddress: Address }, solanaPayTo?: string): Promise<DevSellerFile> {
  const file = join(stateDir, 'dev-seller.json');
  const base = server.app.config.BASE_URL;
  const saved = readJson<DevSellerFile>(file);
  const call = async (method: string, path: string, key: string | undefined, body?: unknown) => {
    const res = await fetch(`${server.url}${path}`, {
      method, headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() as any };
  };
  const endpoints = {
    express: `http://localhost:${EXAMPLE_PORTS.express}/weather`,
    koa: `http://localhost:${EXAMPLE_PORTS.koa}/weather`,
    mcp: 'mcp://tool/forecast',
  };
  // The examples' paid resources: $0.01 each, and the dynamically priced /forecast?days=N (at most $0.07).
  const registrations = [
    ...Object.entries(endpoints).map(([name, url]) => ({ url, priceUsdc: '0.01', description: `${name} example` })),
    ...(['express', 'koa'] as const).map((name) => ({ url: `http://localhost:${EXAMPLE_PORTS[name]}/forecast`, maxPriceUsdc: '0.07', description: `${name} example, $0.01 a day` })),
  ];
  // Registers the example endpoints the org does not have yet (all of them for a new dev seller).
  const registerExamples = async (platformKey: string) => {
    const existing = (await call('GET', '/v0/payments/endpoints', platformKey)).body.endpoints as Array<{ url: string }>;
    for (const registration of registrations) {
      if (existing.some((e) => e.url === registration.url)) continue;
      const res = await call('POST', '/v0/payments/endpoints', platformKey, { ...registration, skipUrlCheck: true });
      if (res.status !== 201) throw new Error(`registering ${registration.url} failed: ${JSON.stringify(res.body)}`);
    }
  };
  // Paid on the local Solana too (its dev seller key's address), when it runs.
  const acceptance = (payTo: string) => ({ enabled: true, payTo, ...(solanaPayTo ? { payToByNetwork: { 'solana-devnet': solanaPayTo } } : {}) });
  if (saved && (await call('GET', '/v0/payments/settings', saved.sellerKey)).status === 200) {
    await call('PUT', '/v0/payments/acceptance', saved.platformKey, acceptance(saved.payTo));
    await registerExamples(saved.platformKey);
    const refreshed = { ...saved, backendUrl: base, rpcUrl: chain.rpcUrl, usdcAddress: chain.usdcAddress, factoryAddress: chain.factoryAddress, endpoints };
    writeJson(file, refreshed);
    return refreshed;
  }
  const signup = await call('POST', '/v0/agent-signup', undefined, {});
  if (signup.status !== 201) throw new Error(`dev seller signup failed: ${signup.status} ${JSON.stringify(signup.body)}`);
  const platformKey = signup.body.platform_key as string;
  const payTo = DEV_ACCOUNTS[9]!.address;
  await call('PUT', '/v0/payments/acceptance', platformKey, acceptance(payTo));
  const sellerKey = (await call('POST', '/v0/payments/seller-keys', platformKey, { name: 'dev examples' })).body.apiKey as string;
  await registerExamples(platformKey);
  const chainId = server.app.chain!.chainId;
  const seller: DevSellerFile = {
    backendUrl: base, orgId: signup.body.org_id, platformKey, sellerKey, payTo,
    usdcAddress: chain.usdcAddress, factoryAddress: chain.factoryAddress, rpcUrl: chain.rpcUrl, chainId, network: server.app.chain!.network,
    buyerPrivateKey: DEV_ACCOUNTS[1]!.privateKey, endpoints,
  };
  writeJson(file, seller);
  return seller;
}
