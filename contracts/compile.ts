/**
 * Compiles the Solidity sources in this folder with solc-js (the `solc` npm package, no downloads) and
 * caches ABI + bytecode per contract in `node_modules/.cache/agentgate-contracts/`, keyed by a hash of
 * the compiler version, the compiler settings and every source file. A cache hit costs one file read;
 * a miss costs a few seconds of solc-js, once per source change.
 *
 * Several processes (jest workers, `agentgate dev`) may miss at the same time: each compiles and writes
 * its result to a temp file that is then renamed over the cache file, so readers never see half a file.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Abi, Hex } from 'viem';

export interface ContractArtifact {
  abi: Abi;
  /** Creation bytecode, 0x-prefixed. */
  bytecode: Hex;
}

/**
 * SmartAccount and its factory are deployed everywhere; the x402 contracts only on the dev chain, at the
 * addresses the real ones have on every network: Permit2, X402UptoPermit2Proxy and X402ExactPermit2Proxy
 * (server/dev/chain/permit2-contracts.ts), Commerce Payments' escrow, its token store and its token collectors
 * (server/dev/chain/escrow.ts), X402BatchSettlement and its two deposit collectors
 * (server/dev/chain/channel-contracts.ts), and a sanctions oracle at the public oracle's address
 * (server/dev/chain/sanctions-oracle.ts).
 */
export const CONTRACT_NAMES = [
  'SmartAccount', 'SmartAccountFactory', 'Permit2', 'X402UptoPermit2Proxy', 'X402ExactPermit2Proxy',
  'AuthCaptureEscrow', 'TokenStore', 'ERC3009PaymentCollector', 'Permit2PaymentCollector', 'OperatorRefundCollector',
  'X402BatchSettlement', 'ERC3009DepositCollector', 'Permit2DepositCollector', 'SanctionsOracle',
] as const;
export type ContractName = (typeof CONTRACT_NAMES)[number];
export type Artifacts = Record<ContractName, ContractArtifact>;

export interface LoadArtifactsOptions {
  /** Folder holding the .sol files. Default: `<package root>/contracts`. */
  contractsDir?: string;
  /** Cache folder. Default: `<package root>/node_modules/.cache/agentgate-contracts`. */
  cacheDir?: string;
}

interface CacheFile {
  key: string;
  compilerVersion: string;
  contracts: Artifacts;
}

/** Compiler settings; part of the cache key. `cancun` bytecode runs on anvil and on every L2 we target. */
const SETTINGS = {
  optimizer: { enabled: true, runs: 200 },
  evmVersion: 'cancun',
  outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } },
} as const;

const require = createRequire(import.meta.url);
const memo = new Map<string, Promise<Artifacts>>();

/**
 * ABI and creation bytecode of the contracts above (compiled at most once). USDC is not
 * compiled here: the dev chain runs Circle's FiatTokenV2_2 from its published artifacts (server/platform/chain/fiat-token.ts).
 */
export function loadArtifacts(options: LoadArtifactsOptions = {}): Promise<Artifacts> {
  const root = packageRoot();
  const contractsDir = options.contractsDir ?? path.join(root, 'contracts');
  const cacheDir = options.cacheDir ?? path.join(root, 'node_modules', '.cache', 'agentgate-contracts');
  const memoKey = `${contractsDir}\0${cacheDir}`;
  let pending = memo.get(memoKey);
  if (!pending) {
    pending = loadOrCompile(contractsDir, cacheDir);
    memo.set(memoKey, pending);
    pending.catch(() => memo.delete(memoKey));
  }
  return pending;
}

async function loadOrCompile(contractsDir: string, cacheDir: string): Promise<Artifacts> {
  const sources = await readSources(contractsDir);
  const compilerVersion = solcPackageVersion();
  const key = cacheKey(compilerVersion, sources);
  const cacheFile = path.join(cacheDir, `artifacts-${key.slice(0, 24)}.json`);

  const cached = await readCache(cacheFile, key);
  if (cached) return cached;

  const contracts = await compile(sources);
  await writeCacheAtomically(cacheFile, { key, compilerVersion, contracts });
  return contracts;
}

/** Every `*.sol` file in the folder, keyed by file name (the import path the sources use). */
async function readSources(contractsDir: string): Promise<Record<string, string>> {
  const names = (await readdir(contractsDir)).filter((n) => n.endsWith('.sol')).sort();
  if (names.length === 0) throw new Error(`no .sol files in ${contractsDir}`);
  const sources: Record<string, string> = {};
  for (const name of names) sources[name] = await readFile(path.join(contractsDir, name), 'utf8');
  return sources;
}

function cacheKey(compilerVersion: string, sources: Record<string, string>): string {
  const hash = createHash('sha256');
  hash.update(`solc ${compilerVersion}\n${JSON.stringify(SETTINGS)}\n`);
  for (const [name, content] of Object.entries(sources)) hash.update(`${name}\0${content}\0`);
  return hash.digest('hex');
}

async function readCache(file: string, key: string): Promise<Artifacts | undefined> {
  try {
    const parsed = JSON.parse(await readFile(file, 'utf8')) as CacheFile;
    if (parsed.key !== key) return undefined;
    if (!CONTRACT_NAMES.every((n) => parsed.contracts?.[n]?.bytecode?.startsWith('0x'))) return undefined;
    return parsed.contracts;
  } catch {
    return undefined; // missing or unreadable: recompile
  }
}

async function writeCacheAtomically(file: string, content: CacheFile): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    await writeFile(tmp, JSON.stringify(content));
    await rename(tmp, file);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

interface SolcOutput {
  errors?: { severity: 'error' | 'warning' | 'info'; formattedMessage: string }[];
  contracts?: Record<string, Record<string, { abi: Abi; evm: { bytecode: { object: string } } }>>;
}

async function compile(sources: Record<string, string>): Promise<Artifacts> {
  // Loaded lazily: requiring solc instantiates the ~8 MB emscripten compiler, which a cache hit never needs.
  const solc = (await import('solc')).default;
  const input = {
    language: 'Solidity',
    sources: Object.fromEntries(Object.entries(sources).map(([n, content]) => [n, { content }])),
    settings: SETTINGS,
  };
  const output = JSON.parse(
    solc.compile(JSON.stringify(input), { import: (p: string) => ({ error: `import not found: ${p}` }) }),
  ) as SolcOutput;

  const errors = (output.errors ?? []).filter((e) => e.severity === 'error');
  if (errors.length > 0) {
    throw new Error(`solc failed:\n${errors.map((e) => e.formattedMessage).join('\n')}`);
  }

  const artifacts = {} as Artifacts;
  for (const name of CONTRACT_NAMES) {
    const compiled = output.contracts?.[`${name}.sol`]?.[name];
    if (!compiled) throw new Error(`solc output has no contract ${name} in ${name}.sol`);
    artifacts[name] = { abi: compiled.abi, bytecode: `0x${compiled.evm.bytecode.object}` };
  }
  return artifacts;
}

function solcPackageVersion(): string {
  return (require('solc/package.json') as { version: string }).version;
}

/** The nearest folder above this file holding a package.json (works from `contracts/` and `dist/contracts/`). */
function packageRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(path.join(dir, 'package.json'))) return dir;
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error('agentgate package root not found');
    dir = parent;
  }
}
