// Screening's parts on their own: the list file's formats; verdicts shared by two processes (two
// connections to one database), each answer kept no longer than one TTL after its source gave it; and
// the operator's policy for a source that cannot answer, with the provider as a real HTTP server.
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ActivityLog } from '../../server/platform/activity-log.js';
import { createLogger } from '../../server/platform/logger.js';
import { Metrics } from '../../server/platform/metrics.js';
import { parseAddressList } from '../../server/screening/address-list.js';
import { createPublicClient, http } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { listOnDevOracle } from '../../server/dev/chain/sanctions-oracle.js';
import { freePort } from '../../server/platform/net.js';
import { PUBLIC_SANCTIONS_ORACLE_ADDRESS, SanctionsOracles } from '../../server/screening/oracle-source.js';
import { testChain } from '../support/chain.js';
import { ScreeningProvider } from '../../server/screening/provider-source.js';
import { Screening } from '../../server/screening/screening.js';
import { SharedVerdicts } from '../../server/screening/shared-verdicts.js';
import { screenedNetwork } from '../../server/screening/sources.js';
import { processConnections } from '../support/connections.js';

const connections = processConnections(2);

it('reads a list file one address per line with notes and comments, or as JSON; EVM addresses in any case, Solana as written', () => {
  const text = '# OFAC SDN, ETH\n0x8589427373D6D84E98730D7795D8f6f8731FDA16 Tornado Cash\n\n0x722122dF12D4e14e13Ac3b6895a86e84145b6967,Tornado Router\nFepMTtLpvUc1zNZhR5yUJNtkxrYSeFJkUXT2w2Wd1Kf8\n';
  const list = parseAddressList(text);
  expect([...list]).toEqual([
    ['0x8589427373d6d84e98730d7795d8f6f8731fda16', 'Tornado Cash'],
    ['0x722122df12d4e14e13ac3b6895a86e84145b6967', 'Tornado Router'],
    ['FepMTtLpvUc1zNZhR5yUJNtkxrYSeFJkUXT2w2Wd1Kf8', ''],
  ]);
  expect([...parseAddressList('["0xABCDEF0123456789abcdef0123456789ABCDEF01", { "address": "0x0000000000000000000000000000000000000001", "note": "test" }]')]).toEqual([
    ['0xabcdef0123456789abcdef0123456789abcdef01', ''], ['0x0000000000000000000000000000000000000001', 'test'],
  ]);
  expect(() => parseAddressList('[{ "note": "no address" }]')).toThrow('each entry of a JSON screening list must be an address');
});

it('a verdict one process asked its source for is used by another without asking, until its TTL from the source\'s answer', async () => {
  // Both processes read one clock the test moves: a slow machine cannot expire a verdict mid-test. The
  // TTL is short of a minute so no sweep of expired verdicts (once a minute) runs beside the writes.
  let now = Date.now();
  const clock = () => now;
  const [first, second] = [new SharedVerdicts(connections()[0]!, 30_000, clock), new SharedVerdicts(connections()[1]!, 30_000, clock)];
  let asked = 0;
  const source = async () => { asked++; return { listed: true, detail: 'from the source' }; };
  expect(await first.through('provider|base|0xabc', source)).toEqual({ listed: true, detail: 'from the source' });
  // The first process's write is on its way (a request does not wait for it): once it has landed, the
  // second process reads the verdict instead of asking.
  for (let i = 0; i < 500 && !(await connections()[1]!.collection('screening_verdicts').findOne({ _id: 'provider|base|0xabc' as never })); i++) await new Promise((r) => setTimeout(r, 20));
  expect(await second.through('provider|base|0xabc', source)).toEqual({ listed: true, detail: 'from the source' });
  expect(asked).toBe(1);
  // Concurrent misses in one process share one ask.
  await Promise.all([second.through('provider|base|0xdef', source), second.through('provider|base|0xdef', source)]);
  expect(asked).toBe(2);
  // Just before the TTL of the source's answer, no process asks; past it, every process asks again.
  now += 29_999;
  await first.through('provider|base|0xabc', source);
  await second.through('provider|base|0xabc', source);
  expect(asked).toBe(2);
  now += 2;
  await second.through('provider|base|0xabc', source);
  expect(asked).toBe(3);
  // The second's fresh answer reaches the first through the database, with its own expiry.
  for (let i = 0; i < 500 && (await connections()[0]!.collection('screening_verdicts').findOne({ _id: 'provider|base|0xabc' as never }))?.expiresAt.getTime() !== now + 30_000; i++) await new Promise((r) => setTimeout(r, 20));
  await first.through('provider|base|0xabc', source);
  expect(asked).toBe(3);
});

it('a provider that is down refuses payments (screening_unavailable) under the default policy and lets them through under SCREENING_ON_ERROR=allow, counted either way', async () => {
  const http = createServer((_req, res) => res.writeHead(502).end('bad gateway'));
  http.listen(0, '127.0.0.1');
  await once(http, 'listening');
  try {
    const provider = new ScreeningProvider({ url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/`, timeoutMs: 500 });
    const metrics = new Metrics();
    const log = createLogger({ level: 'silent' });
    const logs = new ActivityLog(connections()[0]!, log);
    const parties = [{ role: 'payer' as const, address: '0x0000000000000000000000000000000000000abc' }];
    const at = { orgId: 'org_screening_test', network: screenedNetwork('base-sepolia'), door: 'redeem' };
    const refusing = new Screening([provider], undefined, 'refuse', { logs, log, metrics });
    expect(await refusing.screen(parties, at)).toMatchObject({ reason: 'screening_unavailable', source: 'provider', role: 'payer' });
    const allowing = new Screening([provider], undefined, 'allow', { logs, log, metrics });
    expect(await allowing.screen(parties, at)).toBeUndefined();
    expect((await metrics.screeningSourceErrors.get()).values).toEqual([expect.objectContaining({ labels: { source: 'provider', network: 'base-sepolia' }, value: 2 })]);
    await logs.flush();
  } finally {
    http.close();
  }
});

it('a network no source covers (an oracle only on other chains) is not screened at all: its source is not asked', async () => {
  const metrics = new Metrics();
  const log = createLogger({ level: 'silent' });
  let asked = 0;
  const oracle = new (class extends SanctionsOracles { override check(...args: Parameters<SanctionsOracles['check']>) { asked++; return super.check(...args); } })(new Map());
  const screening = new Screening([oracle], new SharedVerdicts(connections()[0]!, 60_000), 'refuse', { logs: new ActivityLog(connections()[0]!, log), log, metrics });
  const at = { orgId: 'org_screening_test', network: screenedNetwork('solana-devnet'), door: 'redeem' };
  expect(await screening.screen([{ role: 'payer', address: 'FepMTtLpvUc1zNZhR5yUJNtkxrYSeFJkUXT2w2Wd1Kf8' }], at)).toBeUndefined();
  expect(asked).toBe(0);
});

it('each network asks its own chain\'s oracle: with one network\'s RPC dead, its payments are refused as unscreened and the other network\'s are screened as usual', async () => {
  const log = createLogger({ level: 'silent' });
  const dead = createPublicClient({ transport: http(`http://127.0.0.1:${await freePort()}`, { retryCount: 0, timeout: 1_000 }) });
  const oracles = new SanctionsOracles(new Map([
    ['polygon-amoy', { client: dead as never, address: PUBLIC_SANCTIONS_ORACLE_ADDRESS }],
    ['base-sepolia', { client: testChain().publicClient as never, address: PUBLIC_SANCTIONS_ORACLE_ADDRESS }],
  ]));
  const screening = new Screening([oracles], new SharedVerdicts(connections()[0]!, 60_000), 'refuse', { logs: new ActivityLog(connections()[0]!, log), log, metrics: new Metrics() });
  const payer = [{ role: 'payer' as const, address: privateKeyToAccount(generatePrivateKey()).address }];
  const on = (network: string) => screening.screen(payer, { orgId: 'org_screening_test', network: screenedNetwork(network), door: 'redeem' });
  expect(await on('polygon-amoy')).toMatchObject({ reason: 'screening_unavailable', source: 'oracle' });
  expect(await on('base-sepolia')).toBeUndefined();
  await listOnDevOracle(testChain().rpcUrl, [payer[0]!.address]);
  expect(await screening.screen(payer, { orgId: 'org_screening_test', network: screenedNetwork('base-sepolia'), door: 'redeem' })).toBeUndefined(); // cached clear verdict, within its TTL
  const fresh = new Screening([oracles], new SharedVerdicts(connections()[1]!, 0), 'refuse', { logs: new ActivityLog(connections()[0]!, log), log, metrics: new Metrics() });
  expect(await fresh.screen(payer, { orgId: 'org_screening_test', network: screenedNetwork('base-sepolia'), door: 'redeem' })).toMatchObject({ reason: 'sanctioned_address', source: 'oracle' });
});
