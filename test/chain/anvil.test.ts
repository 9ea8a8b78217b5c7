import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createPublicClient, http, parseEther, toHex } from 'viem';
import { mnemonicToAccount } from 'viem/accounts';
import { startAnvil } from '../../server/dev/chain/anvil.js';
import { deployDevChain } from '../../server/dev/chain/deploy.js';
import { DEV_ACCOUNTS, DEV_BUYERS, DEV_DEPLOYER, DEV_MNEMONIC, DEV_PROXY_ADMIN } from '../../server/dev/chain/dev-accounts.js';
import { balanceOf } from '../../server/chain/usdc.js';

async function rpc(rpcUrl: string, method: string, params: unknown[] = []): Promise<unknown> {
  const res = await fetch(rpcUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return ((await res.json()) as { result: unknown }).result;
}

describe('dev accounts', () => {
  it('are the ten accounts of the default test mnemonic (m/44\'/60\'/0\'/0/i)', () => {
    expect(DEV_ACCOUNTS).toHaveLength(10);
    DEV_ACCOUNTS.forEach((account, i) => {
      const derived = mnemonicToAccount(DEV_MNEMONIC, { addressIndex: i });
      expect(account.index).toBe(i);
      expect(account.address).toBe(derived.address);
      expect(toHex(derived.getHdKey().privateKey!)).toBe(account.privateKey);
    });
    expect(DEV_DEPLOYER).toBe(DEV_ACCOUNTS[0]);
    expect(DEV_BUYERS.map((b) => b.index)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });

  it('the token proxy\'s admin is account 10 of the same mnemonic, outside the funded ten', () => {
    const derived = mnemonicToAccount(DEV_MNEMONIC, { addressIndex: 10 });
    expect(DEV_PROXY_ADMIN.address).toBe(derived.address);
    expect(toHex(derived.getHdKey().privateKey!)).toBe(DEV_PROXY_ADMIN.privateKey);
    expect(DEV_ACCOUNTS.map((a) => a.address)).not.toContain(DEV_PROXY_ADMIN.address);
  });
});

describe('startAnvil', () => {
  it('starts on a free 127.0.0.1 port with chain id 31337, funds the dev accounts, and stops', async () => {
    const node = await startAnvil();
    try {
      expect(node.rpcUrl).toBe(`http://127.0.0.1:${node.port}`);
      expect(node.port).toBeGreaterThan(0);
      expect(node.chainId).toBe(31337);
      const client = createPublicClient({ transport: http(node.rpcUrl) });
      expect(await client.getChainId()).toBe(31337);
      expect(((await rpc(node.rpcUrl, 'eth_accounts')) as string[]).map((a) => a.toLowerCase())).toEqual(
        DEV_ACCOUNTS.map((a) => a.address.toLowerCase()),
      );
      expect(await client.getBalance({ address: DEV_BUYERS[8]!.address })).toBe(parseEther('10000'));
    } finally {
      await node.stop();
    }
    await expect(fetch(node.rpcUrl, { method: 'POST', body: '{}' })).rejects.toThrow();
    await node.stop(); // stopping twice is harmless
  });

  it('runs several nodes side by side on different ports, with a custom chain id', async () => {
    const [a, b] = await Promise.all([startAnvil(), startAnvil({ chainId: 84532 })]);
    try {
      expect(a.port).not.toBe(b.port);
      expect(await rpc(b.rpcUrl, 'eth_chainId')).toBe(toHex(84532));
      expect(b.chainId).toBe(84532);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });

  it('mines on a timer with blockTime', async () => {
    const node = await startAnvil({ blockTime: 1 });
    try {
      const client = createPublicClient({ transport: http(node.rpcUrl) });
      const start = await client.getBlockNumber({ cacheTime: 0 });
      // Two blocks appear with no transaction sent (polled with a deadline, not timed).
      const deadline = Date.now() + 30_000;
      let now = start;
      while (now < start + 2n && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
        now = await client.getBlockNumber({ cacheTime: 0 });
      }
      expect(now).toBeGreaterThanOrEqual(start + 2n);
    } finally {
      await node.stop();
    }
  });

  it('fails clearly when the port is taken', async () => {
    const first = await startAnvil();
    try {
      await expect(startAnvil({ port: first.port, startTimeoutMs: 10_000 })).rejects.toThrow(/anvil exited/);
    } finally {
      await first.stop();
    }
  });

  it('keeps chain state across restarts with stateFile', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'agentgate-anvil-'));
    const stateFile = path.join(dir, 'chain-state.json');
    try {
      const first = await startAnvil({ stateFile });
      const buyer = DEV_BUYERS[0]!.address;
      let usdcAddress: `0x${string}`;
      try {
        ({ usdcAddress } = await deployDevChain({
          rpcUrl: first.rpcUrl,
          deployerKey: DEV_DEPLOYER.privateKey,
          mintTo: [buyer],
          mintAmountUsdc: '250.5',
        }));
      } finally {
        await first.stop();
      }
      expect((await stat(stateFile)).size).toBeGreaterThan(0);

      const second = await startAnvil({ stateFile });
      try {
        const client = createPublicClient({ transport: http(second.rpcUrl) });
        expect(await client.getCode({ address: usdcAddress })).toMatch(/^0x[0-9a-f]+$/);
        expect(await balanceOf({ client, token: usdcAddress, account: buyer })).toBe(250_500_000n);
      } finally {
        await second.stop();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
