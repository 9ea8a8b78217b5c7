import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

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
    backendUrl: env.AGENTGATE_BACKEND_URL ?? file.backendUrl,
    sellerKey: env.AGENTGATE_SELLER_KEY ?? file.sellerKey,
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

/** True when this module is the script node/tsx was asked to run (not imported by a test). */
export function isMain(moduleUrl: string): boolean {
  const script = process.argv[1];
  return script !== undefined && fileURLToPath(moduleUrl) === resolve(script);
}
