import { PUBLIC_SANCTIONS_ORACLE_ADDRESS } from '../screening/oracle-source.js';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Address } from 'viem';
import { loadConfig, networkVariablePrefix } from '../platform/config.js';
import { provideMongoServer } from './database/mongo-server.js';
import { devSolanaSecretKey, devSolanaSigner, startDevSolana } from './solana/dev-solana.js';
import { getBase58Decoder } from '@solana/kit';
import { startDevChain, DEV_NETWORK, DEV_NETWORKS, DEV_USDC_NAME, DEV_USDC_VERSION, type DevNetwork } from './chain/dev-chain.js';
import { DEV_ACCOUNTS, DEV_DEPLOYER } from './chain/dev-accounts.js';
import { startServer } from '../server.js';
import { devExtension } from './routes.js';
import { MailCatcher } from './mail-catcher.js';
import { devStateDir, persistentSecret, readJson, savedValue, saveValue, writeJson } from '../cli/local-state.js';
import { DEV_SERVER_FILE, runningDevServer } from '../cli/backend.js';
import { ensureDevSeller } from './dev-seller.js';
import { DevChatPlatform } from './chat-platform.js';

interface SavedChain { usdcAddress: Address; factoryAddress: Address }

/** Where dev's SMTP server listens unless SMTP_PORT says otherwise. */
const DEV_SMTP_PORT = 2525;

/**
 * `agentgate dev`: the backend on embedded defaults — a local MongoDB-wire database, a local chain
 * (anvil) with Circle's USDC contract (FiatTokenV2_2), test USDC for dev accounts 1 to 9 and for the
 * relayer (account 0, which funds escrow refunds), and a dev seller for the examples. Every value can
 * still be overridden from the environment. State lives in `.agentgate/`.
 */
export async function runDev(env: NodeJS.ProcessEnv = process.env): Promise<{ stop(): Promise<void> }> {
  const stateDir = devStateDir(env);
  const port = env.PORT ?? '3000';
  const log = (line: string) => console.log(`[agentgate] ${line}`);
  // One dev server per data folder: a second would start another database and chain on the same files.
  const running = runningDevServer(env);
  if (running && running.pid !== process.pid) {
    throw new Error(`agentgate dev is already running (pid ${running.pid}, ${running.url}) with the data in ${stateDir}; stop it first, or use another AGENTGATE_STATE_DIR`);
  }
  const master = env.MASTER_KEY ? { value: env.MASTER_KEY, created: false } : persistentSecret(stateDir, 'master.key');
  if (master.created) {
    console.warn(`[agentgate] generated a development master key in ${join(stateDir, 'master.key')}; set MASTER_KEY in production`);
  }
  const chainFile = join(stateDir, 'chain.json');
  const chatPort = Number(env.CHAT_DEV_PORT ?? 3400);
  const mailCatcherPort = Number(env.MAIL_CATCHER_PORT ?? 0);
  const smtpPort = Number(env.SMTP_PORT ?? DEV_SMTP_PORT);
  // The database starts first and draws free ports: none of those the servers below will bind.
  const ownPorts = [Number(port), chatPort, mailCatcherPort, smtpPort].filter((p) => Number.isInteger(p) && p > 0);
  // One local chain per dev network (DEV_NETWORKS), side by side; the default network's keeps the files it
  // always had, so a saved chain of an earlier version stays as it was.
  const chainFiles = (dev: DevNetwork, i: number) => (i === 0
    ? { state: join(stateDir, 'anvil-state.json'), saved: chainFile }
    : { state: join(stateDir, `anvil-state-${dev.network}.json`), saved: join(stateDir, `chain-${dev.network}.json`) });
  const [mongo, ...chains] = await Promise.all([
    provideMongoServer({ env, dataDir: join(stateDir, 'db'), avoidPorts: ownPorts, log }),
    ...(env.CHAIN_RPC_URL ? [] : DEV_NETWORKS.map((dev, i) => startDevChain({ network: dev, stateFile: chainFiles(dev, i).state, deployed: readJson<SavedChain>(chainFiles(dev, i).saved) }))),
  ]);
  const chain = chains[0];
  // The local Solana (LiteSVM behind the Solana JSON-RPC API, standing in for Devnet), unless a Solana RPC
  // is configured. Its ledger lives in memory: it starts fresh each time.
  const solanaPort = Number(env.SOLANA_DEV_PORT ?? 8899);
  const solana = env.SOLANA_DEVNET_RPC_URL || env.CHAIN_RPC_URL ? undefined : await startDevSolana({ port: solanaPort })
    .catch(nameThePortSetting('the local Solana', solanaPort, 'SOLANA_DEV_PORT'))
    .catch(async (err: unknown) => { await Promise.allSettled([mongo.stop(), ...chains.map((c) => c.stop())]); throw err; });
  const solanaFeePayer = solana && await devSolanaSigner('fee-payer');
  const solanaSeller = solana && await devSolanaSigner('seller');
  if (solana) {
    solana.ledger.airdrop(solanaFeePayer!.address, 1_000n * 1_000_000_000n);
    // The dev seller's USDC account (a transfer needs it), and test USDC for the dev buyer.
    await solana.fund(solanaSeller!.address, 0n, 0n);
    await solana.fund((await devSolanaSigner('buyer')).address, 1_000_000_000n);
  }
  chains.forEach((c, i) => writeJson(chainFiles(DEV_NETWORKS[i]!, i).saved, { usdcAddress: c.usdcAddress, factoryAddress: c.factoryAddress }));
  // A local Slack-compatible workspace for the chat integration, unless a real chat app is configured.
  // Either listener's port in use: stop what this start began, and name the variable that moves the port.
  const stopEarly = async (err: unknown): Promise<never> => {
    await Promise.allSettled([mongo.stop(), ...chains.map((c) => c.stop())]);
    throw err;
  };
  const chat = env.CHAT_CLIENT_ID ? undefined : await new DevChatPlatform({
    port: chatPort, stateFile: join(stateDir, 'chat-platform.json'),
    clientSecret: persistentSecret(stateDir, 'chat-client.secret').value, signingSecret: persistentSecret(stateDir, 'chat-signing.secret').value,
    eventsUrl: `http://127.0.0.1:${port}/v0/chat/events`,
  }).start().catch(nameThePortSetting('the local chat workspace', chatPort, 'CHAT_DEV_PORT')).catch(stopEarly);
  // The outside world's mail servers, locally: mail to outside addresses lands in a catcher that a person
  // answers from /dev/mail, unless a real relay is configured.
  const mailCatcher = env.SMTP_RELAY_URL ? undefined : await new MailCatcher({
    port: mailCatcherPort, stateFile: join(stateDir, 'mail-catcher.json'),
  }).start().catch(nameThePortSetting('the mail catcher', mailCatcherPort, 'MAIL_CATCHER_PORT')).catch(async (err: unknown) => {
    await chat?.stop();
    return stopEarly(err);
  });
  // The DID domain is fixed at the first start that actually serves, and kept: every identity's DID, and
  // every receipt signed under it, stays the same when the server later moves to another port. A start
  // that fails (its port in use) fixes nothing, or the DID would name a port nobody ever answered on.
  const fixedDidDomain = savedValue(stateDir, 'did-domain');
  const portDidDomain = `localhost%3A${port}`;
  const config = loadConfig({
    AGENTGATE_MODE: 'dev',
    HOST: '127.0.0.1',
    PORT: port,
    BASE_URL: `http://localhost:${port}`,
    MAIL_DOMAIN: 'agents.localhost',
    DID_DOMAIN: fixedDidDomain ?? portDidDomain,
    SMTP_PORT: String(DEV_SMTP_PORT),
    // Every local org may try the admin previews (team chat); set ADMIN_ORG_IDS to try the gate.
    ADMIN_ORG_IDS: '*',
    // The terminal shows one readable line per event (below); JSON logs only for what went wrong.
    LOG_LEVEL: 'warn',
    ...(chain ? {
      CHAIN_RPC_URL: chain.rpcUrl, CHAIN_NETWORK: DEV_NETWORK, USDC_ADDRESS: chain.usdcAddress, USDC_EIP712_NAME: DEV_USDC_NAME, USDC_EIP712_VERSION: DEV_USDC_VERSION,
      RELAYER_PRIVATE_KEY: DEV_DEPLOYER.privateKey, WALLET_FACTORY_ADDRESS: chain.factoryAddress, FAUCET_PRIVATE_KEY: DEV_DEPLOYER.privateKey,
      // Screening asks each local chain's sanctions oracle (server/dev/chain/sanctions-oracle.ts), as a deployment would its chain's.
      SANCTIONS_ORACLE_ADDRESS: PUBLIC_SANCTIONS_ORACLE_ADDRESS,
      // The other local chains, each in its own token; one relayer key (account 0, which anvil funds on each).
      NETWORKS: [...DEV_NETWORKS.map((dev) => dev.network), ...(solana ? ['solana-devnet'] : [])].join(','),
      ...(solana ? { SOLANA_DEVNET_RPC_URL: solana.rpcUrl, SOLANA_DEVNET_FEE_PAYER_KEYS: getBase58Decoder().decode(await devSolanaSecretKey('fee-payer')) } : {}),
      ...Object.fromEntries(chains.slice(1).flatMap((other, i) => {
        const prefix = networkVariablePrefix(DEV_NETWORKS[i + 1]!.network);
        return [[`${prefix}_RPC_URL`, other.rpcUrl], [`${prefix}_USDC_ADDRESS`, other.usdcAddress], [`${prefix}_USDC_EIP712_NAME`, DEV_NETWORKS[i + 1]!.tokenName], [`${prefix}_USDC_EIP712_VERSION`, DEV_USDC_VERSION]];
      })),
    } : {}),
    // The catcher's people answer as outside addresses whose domains publish no records here: their mail
    // is admitted, its verdict (unverified) shown; MAIL_ADMIT_UNVERIFIED=false in the environment keeps it out.
    ...(mailCatcher ? { SMTP_RELAY_URL: mailCatcher.relayUrl, MAIL_ADMIT_UNVERIFIED: 'true' } : {}),
    ...env,
    ...(chat ? chat.backendConfig() : {}),
    MASTER_KEY: master.value,
    MONGODB_URI: mongo.uri,
  });
  let server: Awaited<ReturnType<typeof startServer>>;
  try {
    server = await startServer(config, { extension: devExtension({ mailCatcher }) });
  } catch (err) {
    // Its port in use, say: stop what this start began, so the message is the last thing it does.
    await Promise.allSettled([mongo.stop(), ...chains.map((c) => c.stop()), chat?.stop(), mailCatcher?.stop(), solana?.stop()]);
    throw err;
  }
  if (!env.DID_DOMAIN && fixedDidDomain === undefined) saveValue(stateDir, 'did-domain', portDidDomain);
  // Mail to an undeliverable outside address (bounce@..., *.invalid) comes back as a bounce, as in production.
  mailCatcher?.returnBouncesTo(server.app.mail.delivery.inboundListener());
  // One line per payment, mail in and out, webhook attempt and chat message, unless asked to be quiet.
  if (!['1', 'true', 'yes'].includes(env.AGENTGATE_QUIET ?? '')) server.app.events.on((event) => log(event.line));
  log(`dev backend on ${config.BASE_URL} (database: ${mongo.engine}; SMTP on 127.0.0.1:${server.smtpPort})`);
  if (chain) {
    const seller = await ensureDevSeller(server, stateDir, chain, solanaSeller?.address);
    chains.forEach((c, i) => log(`local chain ${c.rpcUrl} (chain id ${c.chainId}, "${DEV_NETWORKS[i]!.network}"${i === 0 ? ', the default' : ''}), USDC ${c.usdcAddress}${c.freshlyDeployed ? ' (deployed now)' : ''}`));
    log(`dev accounts 1-9 hold test USDC; buyer = account 1 ${DEV_ACCOUNTS[1]!.address}; account 0 relays and funds auth-capture refunds`);
    log(`dev seller org ${seller.orgId}, paid to ${seller.payTo}; keys and endpoints in ${join(stateDir, 'dev-seller.json')}`);
    if (solana) log(`local Solana ${solana.rpcUrl} ("solana-devnet", ${solana.network.caip2}, fresh each start), USDC ${solana.usdcMint}; the dev seller is paid there at ${solanaSeller!.address}; fund a wallet with wallet_faucet {"network":"solana-devnet"}`);
  }
  if (chat) log(`local chat workspace on ${chat.url} (invite the bot and post as a person there)`);
  if (mailCatcher) log(`mail to outside addresses is caught on 127.0.0.1:${mailCatcher.port}: read and answer it on ${config.BASE_URL}/dev/mail (mail to bounce@... or *.invalid bounces)`);
  if (!env.DID_DOMAIN && fixedDidDomain !== undefined && fixedDidDomain !== portDidDomain) {
    const didUrl = `http://${decodeURIComponent(fixedDidDomain)}/.well-known/did.json`;
    log(`the service DID stays did:web:${fixedDidDomain} (fixed at the first start): third-party verifiers resolve it at ${didUrl}, which this server on port ${port} does not answer, so buyers cannot verify receipts until it runs there again (\`agentgate dev --port ${decodeURIComponent(fixedDidDomain).split(':')[1] ?? '80'}\`)`);
  }
  log(`sign up an agent:  curl -s -X POST ${config.BASE_URL}/v0/agent-signup -H 'content-type: application/json' -d '{}'`);
  let stopping: Promise<void> | undefined;
  const record = join(stateDir, DEV_SERVER_FILE);
  writeJson(record, { pid: process.pid, url: config.BASE_URL, startedAt: new Date().toISOString() });
  const stop = () => (stopping ??= (async () => {
    rmSync(record, { force: true });
    await server.close();
    await Promise.all([mongo.stop(), ...chains.map((c) => c.stop()), chat?.stop(), mailCatcher?.stop(), solana?.stop()]);
  })());
  exitWhenAChildDies([
    ...(mongo.exited ? [{ name: `the database (${mongo.engine})`, exited: mongo.exited }] : []),
    ...chains.map((c, i) => ({ name: `the local chain of ${DEV_NETWORKS[i]!.network} (anvil)`, exited: c.exited })),
  ], () => stopping !== undefined, stop);
  return { stop };
}

/**
 * A dev listener that cannot listen: its port in use says which listener and which variable moves it (as
 * PORT and SMTP_PORT do), not Node's bare "listen EADDRINUSE". The error and its code are kept.
 */
function nameThePortSetting(what: string, port: number, variable: string) {
  return (err: NodeJS.ErrnoException): never => {
    if (err.code === 'EADDRINUSE') err.message = `${what}'s port ${port} on 127.0.0.1 is already in use: set ${variable} to another port`;
    throw err;
  };
}

/**
 * The dev stack is one unit: when a process it cannot run without ends on its own, say which in one
 * line and stop the rest, rather than leave a backend answering 500s over a dead chain or database.
 */
function exitWhenAChildDies(children: Array<{ name: string; exited: Promise<string> }>, isStopping: () => boolean, stop: () => Promise<void>): void {
  for (const child of children) {
    void child.exited.then((reason) => {
      if (isStopping()) return;
      console.error(`[agentgate] ${child.name} exited unexpectedly (${reason}); stopping agentgate dev`);
      stop().catch(() => {}).finally(() => process.exit(1));
    });
  }
}
