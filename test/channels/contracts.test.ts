/**
 * The dev chain's batch-settlement contracts where the official SDK expects them, with the interface it
 * expects: the addresses @x402/evm signs for and sends to, every entry of the ABI it ships, the EIP-712
 * domain and type hashes it signs with, and the channel id it computes. Checked on a private node and on the
 * suite's shared chain, which the global setup starts through the same code as `agentgate dev`.
 */
import {
  BATCH_SETTLEMENT_ADDRESS as SDK_SETTLEMENT,
  BATCH_SETTLEMENT_DOMAIN,
  ERC3009_DEPOSIT_COLLECTOR_ADDRESS as SDK_ERC3009_COLLECTOR,
  claimBatchTypes as sdkClaimBatchTypes,
  refundTypes as sdkRefundTypes,
  voucherTypes as sdkVoucherTypes,
} from '@x402/evm';
import { computeChannelId } from '@x402/evm/batch-settlement/client';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { createPublicClient, hashTypedData, http, keccak256, toHex, zeroAddress, type Abi, type AbiParameter, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { loadArtifacts } from '../../contracts/compile.js';
import {
  BATCH_SETTLEMENT_ADDRESS,
  ERC3009_DEPOSIT_COLLECTOR_ADDRESS,
  PERMIT2_DEPOSIT_COLLECTOR_ADDRESS,
  batchSettlementAbi,
  batchSettlementDomain,
  channelIdOf,
  depositCollectorAbi,
  type ChannelConfig,
} from '../../server/payments/schemes/batch-settlement/evm/chain.js';
import { PERMIT2_ADDRESS } from '../../server/chain/permit2.js';
import { startDevChain } from '../../server/dev/chain/dev-chain.js';
import { DEV_DEPLOYER } from '../../server/dev/chain/dev-accounts.js';
import { testChain } from '../support/chain.js';
import { startChannelWorld, WITHDRAW_DELAY, type ChannelWorld } from './support.js';

let world: ChannelWorld;
beforeAll(async () => { world = await startChannelWorld(); });
afterAll(async () => { await world?.stop(); });

const addresses = [BATCH_SETTLEMENT_ADDRESS, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS];

/**
 * A value the installed @x402/evm defines but does not export from a public entry point (its batch-settlement
 * ABI, the Permit2 collector's address): read from the build chunk that defines it.
 */
async function sdkInternal<T>(name: string): Promise<T> {
  // Its package.json is not exported: find the esm build folder from the main entry point.
  const entry = createRequire(import.meta.url).resolve('@x402/evm');
  const dir = path.join(entry.slice(0, entry.lastIndexOf(`${path.sep}dist${path.sep}`)), 'dist', 'esm');
  for (const file of (await readdir(dir)).filter((f) => f.endsWith('.mjs'))) {
    if (!(await readFile(path.join(dir, file), 'utf8')).includes(`var ${name} = `)) continue;
    const module = (await import(pathToFileURL(path.join(dir, file)).href)) as Record<string, T>;
    if (module[name] !== undefined) return module[name];
  }
  throw new Error(`${name} not found in the installed @x402/evm`);
}

/** An ABI entry as the wire sees it: types, names and component layout; solc's internalType left out. */
function normalized(entry: Abi[number]): string {
  const param = (p: AbiParameter & { indexed?: boolean }): unknown => ({
    name: p.name ?? '',
    type: p.type,
    ...(p.indexed ? { indexed: true } : {}),
    ...('components' in p && p.components ? { components: p.components.map(param) } : {}),
  });
  const e = entry as { type: string; name?: string; inputs?: AbiParameter[]; outputs?: AbiParameter[]; stateMutability?: string; anonymous?: boolean };
  return JSON.stringify({
    type: e.type,
    name: e.name,
    inputs: (e.inputs ?? []).map(param),
    ...(e.type === 'function' ? { outputs: (e.outputs ?? []).map(param), stateMutability: e.stateMutability } : {}),
    ...(e.type === 'event' ? { anonymous: e.anonymous ?? false } : {}),
  });
}

describe('the batch-settlement contracts on the dev chain', () => {
  it('sit at the addresses @x402/evm signs for and sends to, on a private node and on the shared dev chain', async () => {
    const sdkPermit2Collector = await sdkInternal<Address>('PERMIT2_DEPOSIT_COLLECTOR_ADDRESS');
    expect([BATCH_SETTLEMENT_ADDRESS, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS]).toEqual([SDK_SETTLEMENT, SDK_ERC3009_COLLECTOR, sdkPermit2Collector]);
    const shared = testChain().publicClient;
    for (const address of addresses) {
      const code = await world.dev.publicClient.getCode({ address });
      expect(code).toMatch(/^0x[0-9a-f]{1000,}$/);
      // The suite's shared chain comes from server/dev/chain/dev-chain.ts, as `npm run dev`'s does: same code.
      expect(await shared.getCode({ address })).toBe(code);
    }
  });

  it('a dev chain restarted from state saved before they existed gets them (as `agentgate dev` restarts it)', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'agentgate-channel-contracts-'));
    const stateFile = path.join(dir, 'anvil-state.json');
    try {
      const first = await startDevChain({ stateFile });
      const saved = { usdcAddress: first.usdcAddress, factoryAddress: first.factoryAddress };
      const client = createPublicClient({ transport: http(first.rpcUrl) });
      for (const address of addresses) await client.request({ method: 'anvil_setCode' as never, params: [address, '0x'] as never });
      const deployerNonce = await client.getTransactionCount({ address: DEV_DEPLOYER.address });
      await first.stop();

      const second = await startDevChain({ stateFile, deployed: saved });
      try {
        expect(second.freshlyDeployed).toBe(false);
        const restarted = createPublicClient({ transport: http(second.rpcUrl) });
        for (const address of addresses) expect(await restarted.getCode({ address })).toBe(await world.dev.publicClient.getCode({ address }));
        // Placed anew (three deployments to learn the code), not kept from the saved state.
        expect(await restarted.getTransactionCount({ address: DEV_DEPLOYER.address })).toBe(deployerNonce + 3);
      } finally {
        await second.stop();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('collectors serve the canonical settlement contract only; the Permit2 one uses canonical Permit2 with the published witness', async () => {
    const read = (address: Address, functionName: 'x402BatchSettlement' | 'PERMIT2' | 'DEPOSIT_WITNESS_TYPE_STRING' | 'DEPOSIT_WITNESS_TYPEHASH') =>
      world.dev.publicClient.readContract({ address, abi: depositCollectorAbi, functionName });
    expect(await read(ERC3009_DEPOSIT_COLLECTOR_ADDRESS, 'x402BatchSettlement')).toBe(BATCH_SETTLEMENT_ADDRESS);
    expect(await read(PERMIT2_DEPOSIT_COLLECTOR_ADDRESS, 'x402BatchSettlement')).toBe(BATCH_SETTLEMENT_ADDRESS);
    expect(await read(PERMIT2_DEPOSIT_COLLECTOR_ADDRESS, 'PERMIT2')).toBe(PERMIT2_ADDRESS);
    expect(await read(PERMIT2_DEPOSIT_COLLECTOR_ADDRESS, 'DEPOSIT_WITNESS_TYPE_STRING')).toBe('DepositWitness witness)DepositWitness(bytes32 channelId)TokenPermissions(address token,uint256 amount)');
    expect(await read(PERMIT2_DEPOSIT_COLLECTOR_ADDRESS, 'DEPOSIT_WITNESS_TYPEHASH')).toBe(keccak256(toHex('DepositWitness(bytes32 channelId)')));
  });

  it('have every function and event of the ABI @x402/evm ships, with the same layout; our own ABI is exactly what solc compiles', async () => {
    const artifacts = await loadArtifacts();
    const compiled = new Set(artifacts.X402BatchSettlement.abi.map(normalized));
    const sdk = await sdkInternal<Abi>('batchSettlementABI');
    expect(sdk.length).toBeGreaterThanOrEqual(19); // 18 functions and the Settled event in 2.27
    for (const entry of sdk) expect(compiled).toContain(normalized(entry));
    expect(new Set(batchSettlementAbi.map(normalized))).toEqual(compiled);

    const collectorEntries = new Set([...artifacts.ERC3009DepositCollector.abi, ...artifacts.Permit2DepositCollector.abi].filter((e) => e.type !== 'constructor').map(normalized));
    expect(new Set(depositCollectorAbi.map(normalized))).toEqual(collectorEntries);
  });

  it('sign with the EIP-712 domain and type hashes the official SDK uses', async () => {
    const read = <T>(functionName: 'CHANNEL_CONFIG_TYPEHASH' | 'VOUCHER_TYPEHASH' | 'REFUND_TYPEHASH' | 'CLAIM_ENTRY_TYPEHASH' | 'CLAIM_BATCH_TYPEHASH' | 'MIN_WITHDRAW_DELAY' | 'MAX_WITHDRAW_DELAY' | 'eip712Domain') =>
      world.dev.publicClient.readContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName }) as Promise<T>;
    const hash = (s: string) => keccak256(toHex(s));
    expect(await read('CHANNEL_CONFIG_TYPEHASH')).toBe(hash('ChannelConfig(address payer,address payerAuthorizer,address receiver,address receiverAuthorizer,address token,uint40 withdrawDelay,bytes32 salt)'));
    expect(await read('VOUCHER_TYPEHASH')).toBe(hash('Voucher(bytes32 channelId,uint128 maxClaimableAmount)'));
    expect(await read('REFUND_TYPEHASH')).toBe(hash('Refund(bytes32 channelId,uint256 nonce,uint128 amount)'));
    expect(await read('CLAIM_ENTRY_TYPEHASH')).toBe(hash('ClaimEntry(bytes32 channelId,uint128 maxClaimableAmount,uint128 totalClaimed)'));
    expect(await read('CLAIM_BATCH_TYPEHASH')).toBe(hash('ClaimBatch(ClaimEntry[] claims)ClaimEntry(bytes32 channelId,uint128 maxClaimableAmount,uint128 totalClaimed)'));
    expect([await read('MIN_WITHDRAW_DELAY'), await read('MAX_WITHDRAW_DELAY')]).toEqual([900, 2_592_000]);
    const [fields, name, version, chainId, verifyingContract] = await read<readonly [Hex, string, string, bigint, Address]>('eip712Domain');
    expect({ fields, name, version, chainId: Number(chainId), verifyingContract }).toEqual({ fields: '0x0f', ...BATCH_SETTLEMENT_DOMAIN, chainId: world.chainId, verifyingContract: SDK_SETTLEMENT });
    expect(batchSettlementDomain(world.chainId)).toEqual({ ...BATCH_SETTLEMENT_DOMAIN, chainId: world.chainId, verifyingContract: SDK_SETTLEMENT });
  });

  it('compute the channel id and the voucher, refund and claim-batch digests exactly as the official SDK does', async () => {
    const config: ChannelConfig = {
      payer: privateKeyToAccount(generatePrivateKey()).address,
      payerAuthorizer: zeroAddress,
      receiver: world.receiver,
      receiverAuthorizer: world.authorizer.address,
      token: world.usdc,
      withdrawDelay: WITHDRAW_DELAY,
      salt: keccak256(toHex('salt')),
    };
    const view = <T>(functionName: 'getChannelId' | 'getVoucherDigest' | 'getRefundDigest' | 'getClaimBatchDigest', args: readonly unknown[]) =>
      world.dev.publicClient.readContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName, args: args as never }) as Promise<T>;
    const channelId = await view<Hex>('getChannelId', [config]);
    expect(channelId).toBe(computeChannelId(config, world.network));
    expect(channelId).toBe(channelIdOf(config, world.chainId));
    // Another chain, another id: the domain binds the chain id.
    expect(computeChannelId(config, 'eip155:8453')).not.toBe(channelId);

    const domain = batchSettlementDomain(world.chainId);
    expect(await view('getVoucherDigest', [channelId, 1234n])).toBe(hashTypedData({ domain, types: sdkVoucherTypes, primaryType: 'Voucher', message: { channelId, maxClaimableAmount: 1234n } }));
    expect(await view('getRefundDigest', [channelId, 7n, 99n])).toBe(hashTypedData({ domain, types: sdkRefundTypes, primaryType: 'Refund', message: { channelId, nonce: 7n, amount: 99n } }));

    const other = { ...config, salt: keccak256(toHex('other')) };
    const rows = [
      { voucher: { channel: config, maxClaimableAmount: 500n }, signature: '0x' as Hex, totalClaimed: 400n },
      { voucher: { channel: other, maxClaimableAmount: 70n }, signature: '0x' as Hex, totalClaimed: 70n },
    ];
    const claims = rows.map((r) => ({ channelId: channelIdOf(r.voucher.channel, world.chainId), maxClaimableAmount: r.voucher.maxClaimableAmount, totalClaimed: r.totalClaimed }));
    expect(await view('getClaimBatchDigest', [rows])).toBe(hashTypedData({ domain, types: sdkClaimBatchTypes, primaryType: 'ClaimBatch', message: { claims } }));
    expect(await view('getClaimBatchDigest', [[]])).toBe(hashTypedData({ domain, types: sdkClaimBatchTypes, primaryType: 'ClaimBatch', message: { claims: [] } }));
  });
});
