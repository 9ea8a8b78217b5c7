import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { syncEndpoints, type SyncedEndpoint, type SyncEndpointsOptions } from '../middleware/index.js';

/**
 * What `agentgate dev` writes to `.agentgate/dev-seller.json`: a backend on the local chain with a seller
 * already set up (acceptance on, a seller key, the example endpoints registered) and a funded buyer.
 */
export interface DevSeller {
  backendUrl: string;
  sellerKey: string;
  platformKey?: string;
  orgId?: string;
  payTo?: string;
  usdcAddress: string;
  rpcUrl: string;
  chainId: number;
  network: string;
  buyerPrivateKey: string;
  endpoints: { express?: string; koa?: string };
}

export const DEV_SELLER_FILE = process.env.AGENTGATE_DEV_SELLER_FILE ?? resolve('.agentgate', 'dev-seller.json');

/**
 * The backend URL from the environment: AGENTGATE_URL, the name the `agentgate` CLI reads too, or the
 * examples' old name AGENTGATE_BACKEND_URL, which still works and says once that it is deprecated.
 */
export function backendUrlFromEnv(env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (env.AGENTGATE_URL) return env.AGENTGATE_URL;
  if (env.AGENTGATE_BACKEND_URL) {
    console.warn('AGENTGATE_BACKEND_URL is deprecated: set AGENTGATE_URL (the name the agentgate command reads too)');
    return env.AGENTGATE_BACKEND_URL;
  }
  return undefined;
}

/** The dev file with environment overrides; a field neither gives is left out for the caller to demand. */
export function loadDevSeller(env: NodeJS.ProcessEnv = process.env): Partial<DevSeller> {
  let file: Partial<DevSeller> = {};
  try {
    file = JSON.parse(readFileSync(DEV_SELLER_FILE, 'utf8')) as Partial<DevSeller>;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const chainId = env.CHAIN_ID ? Number(env.CHAIN_ID) : file.chainId;
  return {
    ...file,
    backendUrl: backendUrlFromEnv(env) ?? file.backendUrl,
    sellerKey: env.AGENTGATE_SELLER_KEY ?? file.sellerKey,
    platformKey: env.AGENTGATE_PLATFORM_KEY ?? file.platformKey,
    usdcAddress: env.USDC_ADDRESS ?? file.usdcAddress,
    rpcUrl: env.CHAIN_RPC_URL ?? file.rpcUrl,
    chainId,
    network: env.CHAIN_NETWORK ?? file.network,
    buyerPrivateKey: env.BUYER_PRIVATE_KEY ?? file.buyerPrivateKey,
  };
}

/** Exits with a message that says where the value comes from, instead of a stack trace. */
export function required<K extends keyof DevSeller>(config: Partial<DevSeller>, key: K, envName: string): DevSeller[K] {
  const value = config[key];
  if (value === undefined || value === '') {
    console.error(`missing ${key}: run \`npm run dev\` (writes ${DEV_SELLER_FILE}) or set ${envName}`);
    process.exit(1);
  }
  return value as DevSeller[K];
}

/**
 * When the example's port cannot be listened on: one line that says what to do, and exit 1. Without it
 * Koa, Hono and Fastify print Node's stack trace, and Express 5, which hands the error to the listen
 * callback, would go on to say it listens and register routes for a port that another process answers.
 */
export function listenFailed(port: number, error: NodeJS.ErrnoException): never {
  const reason = error.code === 'EADDRINUSE' ? `port ${port} is already in use` : error.code === 'EACCES' ? `port ${port} needs privileges` : error.message;
  console.error(`could not listen: ${reason}; start it on another port, e.g. PORT=${port === 5055 ? 5056 : 5055}`);
  process.exit(1);
}

/** True when this module is the script node/tsx was asked to run (not imported by a test). */
export function isMain(moduleUrl: string): boolean {
  const script = process.argv[1];
  return script !== undefined && fileURLToPath(moduleUrl) === resolve(script);
}

/**
 * Registers the example's paid routes at the backend for the origin it is reached at, once it listens
 * (the backend fetches each new URL for its 402). Without a platform key it only warns: the routes may
 * have been registered some other way. The origin is PUBLIC_ORIGIN, else http://localhost:<port>; in dev
 * mode the backend takes 127.0.0.1 and [::1] on that port for the same endpoint.
 */
export async function syncExampleEndpoints(dev: Partial<DevSeller>, routes: SyncEndpointsOptions['routes'], port: number): Promise<void> {
  const publicOrigin = process.env.PUBLIC_ORIGIN ?? `http://localhost:${port}`;
  if (!dev.platformKey || !dev.backendUrl) {
    console.warn(`no platform key (${DEV_SELLER_FILE} or AGENTGATE_PLATFORM_KEY): not registering ${publicOrigin} routes; payments redeem only if they are registered`);
    return;
  }
  try {
    const report = await syncEndpoints({ backendUrl: dev.backendUrl, platformKey: dev.platformKey, publicOrigin, routes });
    // A route priced per request is registered by its cap: say "up to", as the backend's own line does.
    const perRequest = (patterns: readonly string[]) => patterns.some((p) => typeof (routes as Record<string, { price?: unknown }>)[p]?.price === 'function');
    const line = (kind: string, list: readonly SyncedEndpoint[]) => list.map((e) => `${kind} ${e.url} at ${perRequest(e.patterns) ? 'up to ' : ''}${e.priceUsdc} USDC`);
    for (const text of [...line('registered', report.created), ...line('updated', report.updated), ...line('already registered', report.unchanged)]) console.log(text);
    for (const skip of report.skipped) console.warn(`not registered: ${skip.pattern} ${skip.reason}`);
  } catch (error) {
    // The server keeps running (its free routes work), but say plainly that payments will not redeem.
    console.error(`could not register the paid routes: ${(error as Error).message}`);
  }
}
