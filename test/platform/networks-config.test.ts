// NETWORKS and each network's own variables, as an operator writes them: what the backend reads, and the
// one-line refusal naming the variable when something is missing or contradicts itself.
import { randomBytes } from 'node:crypto';
import { generatePrivateKey } from 'viem/accounts';
import { configFor, loadConfig } from '../../server/platform/config.js';

const BASE_ENV = {
  BASE_URL: 'https://pay.example.com', MAIL_DOMAIN: 'agents.example.com', DID_DOMAIN: 'pay.example.com',
  MASTER_KEY: randomBytes(32).toString('hex'), MONGODB_URI: 'mongodb://127.0.0.1:27017',
};
const shared = generatePrivateKey();
const own = generatePrivateKey();

test('without NETWORKS, CHAIN_NETWORK alone, from today\'s variables', () => {
  const config = loadConfig({ ...BASE_ENV, CHAIN_NETWORK: 'eip155:84532', CHAIN_RPC_URL: 'https://sepolia.base.example', RELAYER_PRIVATE_KEY: shared });
  expect(config.networks.map((n) => ({ network: n.network, rpcUrl: n.rpcUrl, keys: n.relayerKeys }))).toEqual([{ network: 'base-sepolia', rpcUrl: 'https://sepolia.base.example', keys: [shared] }]);
});

test('several networks: CHAIN_NETWORK\'s reads CHAIN_*, each other its own <NAME>_* (keys shared unless it names its own)', () => {
  const config = loadConfig({
    ...BASE_ENV, NETWORKS: 'base,eip155:137,arbitrum', CHAIN_RPC_URL: 'https://base.example', RELAYER_PRIVATE_KEY: shared,
    POLYGON_RPC_URL: 'https://polygon.example', POLYGON_RPC_URLS: 'https://polygon-2.example', POLYGON_RELAYER_PRIVATE_KEYS: own,
    ARBITRUM_RPC_URL: 'https://arbitrum.example', ARBITRUM_USDC_EIP712_NAME: 'USD Coin',
  });
  expect(config.networks.map((n) => [n.network, n.rpcUrl, n.rpcUrls, n.relayerKeys, n.usdcEip712Name])).toEqual([
    ['base', 'https://base.example', [], [shared], undefined],
    ['polygon', 'https://polygon.example', ['https://polygon-2.example'], [own], undefined],
    ['arbitrum', 'https://arbitrum.example', [], [shared], 'USD Coin'],
  ]);
  expect(config.networks[1]!.variable('RPC_URL')).toBe('POLYGON_RPC_URL');
});

test('a Solana network reads its own variables, its RPC timeout falling back to CHAIN_RPC_TIMEOUT_MS', () => {
  const key = '4'.repeat(88);
  const config = loadConfig({
    ...BASE_ENV, NETWORKS: 'base,solana-devnet,solana', CHAIN_RPC_URL: 'https://base.example', CHAIN_RPC_TIMEOUT_MS: '7000',
    SOLANA_DEVNET_RPC_URL: 'https://devnet.example', SOLANA_DEVNET_FEE_PAYER_KEYS: key, SOLANA_DEVNET_CHAIN_RPC_TIMEOUT_MS: '2500',
    SOLANA_RPC_URL: 'https://mainnet.example', SOLANA_FEE_PAYER_KEYS: `${key},${key}`,
  });
  expect(config.solanaNetworks.map((n) => [n.network, n.rpcUrl, n.feePayerKeys, n.rpcTimeoutMs])).toEqual([
    ['solana-devnet', 'https://devnet.example', [key], 2500],
    ['solana', 'https://mainnet.example', [key], 7000],
  ]);
});

test('refusals name the variable', () => {
  const refusal = (env: Record<string, string>) => { try { loadConfig({ ...BASE_ENV, ...env }); return ''; } catch (err) { return (err as Error).message; } };
  expect(refusal({ NETWORKS: 'base,polygon-amoy', CHAIN_RPC_URL: 'https://base.example' })).toBe('configuration error: POLYGON_AMOY_RPC_URL is required: NETWORKS lists polygon-amoy');
  expect(refusal({ NETWORKS: 'base,starknet', CHAIN_RPC_URL: 'https://base.example' })).toMatch(/^configuration error: NETWORKS names starknet, not a network of the table/);
  // A Solana network needs its RPC and fee payers, and comes after an EVM default.
  expect(refusal({ NETWORKS: 'base,solana', CHAIN_RPC_URL: 'https://base.example' })).toBe('configuration error: SOLANA_RPC_URL is required: NETWORKS lists solana; SOLANA_FEE_PAYER_KEYS is required: NETWORKS lists solana');
  expect(refusal({ NETWORKS: 'base,solana', CHAIN_RPC_URL: 'https://base.example', SOLANA_RPC_URL: 'https://sol.example', SOLANA_FEE_PAYER_KEYS: 'not-a-key' })).toBe('configuration error: SOLANA_FEE_PAYER_KEYS must be comma-separated base58 64-byte secret keys');
  expect(refusal({ NETWORKS: 'solana-devnet,base', CHAIN_RPC_URL: 'https://base.example', SOLANA_DEVNET_RPC_URL: 'https://sol.example', SOLANA_DEVNET_FEE_PAYER_KEYS: '4'.repeat(88) })).toMatch(/NETWORKS starts with solana-devnet: the default network \(the first\) is an EVM network/);
  expect(refusal({ NETWORKS: 'base,eip155:8453', CHAIN_RPC_URL: 'https://base.example' })).toBe('configuration error: NETWORKS names base twice');
  expect(refusal({ NETWORKS: 'polygon', POLYGON_RPC_URL: 'https://polygon.example', CHAIN_RPC_URL: 'https://base.example' }))
    .toBe('configuration error: CHAIN_RPC_URL is for CHAIN_NETWORK base, which NETWORKS (polygon) does not list: set CHAIN_NETWORK to the network it serves');
  expect(refusal({ NETWORKS: 'base,polygon', CHAIN_RPC_URL: 'https://base.example', POLYGON_RPC_URL: 'not a url' })).toMatch(/^configuration error: POLYGON_RPC_URL /);
});

test('a network sets its own pace and price (<NAME>_SETTLEMENT_CONFIRMATIONS, _RELAYER_MAX_FEE_GWEI, ...); the others keep the global settings', () => {
  const config = loadConfig({
    ...BASE_ENV, NETWORKS: 'base,polygon', CHAIN_RPC_URL: 'https://base.example', RELAYER_PRIVATE_KEY: shared, SETTLEMENT_STUCK_BLOCKS: '4',
    POLYGON_RPC_URL: 'https://polygon.example', POLYGON_SETTLEMENT_CONFIRMATIONS: '5', POLYGON_RELAYER_MAX_FEE_GWEI: '300', POLYGON_CHAIN_POLL_MS: '500',
    POLYGON_WALLET_FACTORY_ADDRESS: '0x00000000000000000000000000000000000000aa',
  });
  const [base, polygon] = config.networks.map((n) => configFor(config, n));
  expect([base!.SETTLEMENT_CONFIRMATIONS, base!.RELAYER_MAX_FEE_GWEI, base!.CHAIN_POLL_MS, base!.SETTLEMENT_STUCK_BLOCKS]).toEqual([1, undefined, 100, 4]);
  expect([polygon!.SETTLEMENT_CONFIRMATIONS, polygon!.RELAYER_MAX_FEE_GWEI, polygon!.CHAIN_POLL_MS, polygon!.SETTLEMENT_STUCK_BLOCKS, polygon!.WALLET_FACTORY_ADDRESS])
    .toEqual([5, 300, 500, 4, '0x00000000000000000000000000000000000000aa']);
  expect(() => loadConfig({ ...BASE_ENV, NETWORKS: 'base,polygon', CHAIN_RPC_URL: 'https://base.example', POLYGON_RPC_URL: 'https://polygon.example', POLYGON_SETTLEMENT_CONFIRMATIONS: '0' }))
    .toThrow(/POLYGON_SETTLEMENT_CONFIRMATIONS/);
});
