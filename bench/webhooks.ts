/**
 * payment.received delivery latency: from the moment a payment is recorded as settled (the receipt's
 * timestamp, written in the same update as the webhook outbox entry) to the moment a receiver on loopback
 * has the whole POST. Real parts: MongoDB-wire database, anvil with Circle's USDC, the backend with its
 * in-process Agenda workers, a plain node:http receiver.
 *
 *   npx tsx bench/webhooks.ts          (BENCH_WEBHOOKS=40 payments; JOBS_PROCESS_EVERY_MS as in production unless set)
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { toHex, type Address } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { encodeBase64Json } from '../middleware/index.js';
import { DEV_ACCOUNTS, DEV_DEPLOYER } from '../server/dev/chain/dev-accounts.js';
import { startDevChain, DEV_CHAIN_ID, DEV_NETWORK, DEV_USDC_NAME, DEV_USDC_VERSION } from '../server/dev/chain/dev-chain.js';
import { transferWithAuthorizationTypes, usdcDomain } from '../server/chain/usdc.js';
import { loadConfig } from '../server/platform/config.js';
import { provideMongoServer } from '../server/dev/database/mongo-server.js';
import { freePort } from '../server/platform/net.js';
import { startServer } from '../server/server.js';

const COUNT = Number(process.env.BENCH_WEBHOOKS ?? 40);
const log = (line: string) => process.stdout.write(`${line}\n`);
const pct = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * p))]!;

async function main() {
  const [mongo, chain] = await Promise.all([provideMongoServer(), startDevChain()]);
  const port = await freePort();
  const config = loadConfig({
    // An access line per request on stdout would bury the results (LOG_LEVEL=info to watch them).
    AGENTGATE_MODE: 'dev', HOST: '127.0.0.1', LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn', PORT: String(port), BASE_URL: `http://127.0.0.1:${port}`,
    MAIL_DOMAIN: 'bench.test', DID_DOMAIN: `127.0.0.1%3A${port}`, SMTP_PORT: '0',
    MASTER_KEY: randomBytes(32).toString('hex'), MONGODB_URI: mongo.uri, MONGODB_DB: `bench_${randomBytes(4).toString('hex')}`,
    CHAIN_RPC_URL: chain.rpcUrl, CHAIN_NETWORK: DEV_NETWORK, USDC_ADDRESS: chain.usdcAddress, USDC_EIP712_NAME: DEV_USDC_NAME, USDC_EIP712_VERSION: DEV_USDC_VERSION,
    RELAYER_PRIVATE_KEY: DEV_DEPLOYER.privateKey,
    ...(process.env.JOBS_PROCESS_EVERY_MS ? { JOBS_PROCESS_EVERY_MS: process.env.JOBS_PROCESS_EVERY_MS } : {}),
  });
  const server = await startServer(config);

  const arrivals = new Map<string, number>();
  const waiting = new Map<string, () => void>();
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c)).on('end', () => {
      const at = Date.now();
      const paymentId = JSON.parse(Buffer.concat(chunks).toString('utf8')).paymentId as string;
      arrivals.set(paymentId, at);
      waiting.get(paymentId)?.();
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const webhookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

  const call = async (method: string, path: string, key: string | undefined, body?: unknown) => {
    const res = await fetch(server.url + path, { method, headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) }, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: res.status, body: await res.json() as any };
  };
  const agent = (await call('POST', '/v0/agent-signup', undefined, {})).body;
  const payTo = privateKeyToAccount(`0x${randomBytes(32).toString('hex')}`).address;
  await call('PUT', '/v0/payments/acceptance', agent.platform_key, { enabled: true, payTo });
  const sellerKey = (await call('POST', '/v0/payments/seller-keys', agent.platform_key, {})).body.apiKey;
  const resource = 'https://api.bench.test/paid';
  await call('POST', '/v0/payments/endpoints', agent.platform_key, { url: resource, priceUsdc: '0.01', webhookUrl, skipUrlCheck: true });

  const buyer = privateKeyToAccount(DEV_ACCOUNTS[1]!.privateKey);
  const fromSettled: number[] = [];
  const fromResponse: number[] = [];
  for (let i = 0; i < COUNT; i++) {
    const now = BigInt(Math.floor(Date.now() / 1000));
    const authorization = { from: buyer.address, to: payTo as Address, value: 10_000n, validAfter: now - 60n, validBefore: now + 300n, nonce: toHex(randomBytes(32)) };
    const signature = await buyer.signTypedData({
      domain: usdcDomain({ name: DEV_USDC_NAME, version: DEV_USDC_VERSION, chainId: DEV_CHAIN_ID, verifyingContract: chain.usdcAddress }),
      types: transferWithAuthorizationTypes, primaryType: 'TransferWithAuthorization', message: authorization,
    });
    const paymentHeader = encodeBase64Json({ x402Version: 1, scheme: 'exact', network: DEV_NETWORK, payload: { signature, authorization: {
      ...authorization, value: authorization.value.toString(), validAfter: authorization.validAfter.toString(), validBefore: authorization.validBefore.toString(),
    } } });
    const redeemed = await call('POST', '/v0/payments/redeem', sellerKey, { paymentHeader, resource, amount: '0.01' });
    const answeredAt = Date.now();
    if (redeemed.status !== 200) throw new Error(`redeem failed: ${JSON.stringify(redeemed.body)}`);
    const paymentId = redeemed.body.paymentId as string;
    if (!arrivals.has(paymentId)) await new Promise<void>((resolve) => waiting.set(paymentId, resolve));
    const payment = (await call('GET', `/v0/payments/${paymentId}`, sellerKey)).body;
    fromSettled.push(arrivals.get(paymentId)! - Date.parse(payment.settledAt));
    fromResponse.push(arrivals.get(paymentId)! - answeredAt);
  }

  log(`payment.received delivery latency over ${COUNT} payments (JOBS_PROCESS_EVERY_MS=${config.JOBS_PROCESS_EVERY_MS}, database ${mongo.kind})`);
  log(`  settled (recorded) -> receiver has the POST: median ${pct(fromSettled, 0.5)} ms, p90 ${pct(fromSettled, 0.9)} ms, max ${Math.max(...fromSettled)} ms`);
  log(`  redeem answered    -> receiver has the POST: median ${pct(fromResponse, 0.5)} ms, p90 ${pct(fromResponse, 0.9)} ms`);

  receiver.closeAllConnections();
  await new Promise<void>((resolve) => receiver.close(() => resolve()));
  await server.app.db.dropDatabase().catch(() => {});
  await server.close();
  await chain.stop();
  await mongo.stop();
}

main().then(() => process.exit(0), (err) => {
  console.error(err);
  process.exit(1);
});
