// The dev chain's relayer (account 0) is the auth-capture escrow's operator and funds refunds from its own
// test USDC. A start that finds it holding none mints it again: a chain saved before it was funded, or
// one whose refunds used it up, refunds again after `agentgate dev` restarts. One that holds some is left
// as it is.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPublicClient, createWalletClient, http, parseUnits } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { balanceOf, usdcAbi } from '../../server/chain/usdc.js';
import { DEV_ACCOUNTS, DEV_DEPLOYER } from '../../server/dev/chain/dev-accounts.js';
import { localChain } from '../../server/dev/chain/deploy.js';
import { startDevChain } from '../../server/dev/chain/dev-chain.js';

/** The relayer's test USDC on the chain at `rpcUrl`, and a transfer of it to dev account 1 (as refunds pay buyers). */
const relayerOf = (rpcUrl: string, chainId: number, usdc: `0x${string}`) => {
  const chain = localChain({ chainId, rpcUrl });
  const client = createPublicClient({ chain, transport: http(rpcUrl) });
  const wallet = createWalletClient({ chain, account: privateKeyToAccount(DEV_DEPLOYER.privateKey), transport: http(rpcUrl) });
  return {
    usdc: () => balanceOf({ client, token: usdc, account: DEV_DEPLOYER.address }),
    spend: async (amount: string) => {
      const hash = await wallet.writeContract({ address: usdc, abi: usdcAbi, functionName: 'transfer', args: [DEV_ACCOUNTS[1]!.address, parseUnits(amount, 6)] });
      await client.waitForTransactionReceipt({ hash });
    },
  };
};

test('a dev chain restarted with its relayer empty funds it again; one with funds keeps what it has', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'agentgate-relayer-funding-'));
  const stateFile = join(dir, 'anvil-state.json');
  const running: Array<{ stop(): Promise<void> }> = [];
  // Each start from the state the previous one saved when it stopped.
  const start = async (deployed?: { usdcAddress: `0x${string}`; factoryAddress: `0x${string}` }) => {
    await running.pop()?.stop();
    const chain = await startDevChain({ stateFile, ...(deployed ? { deployed } : {}) });
    running.push(chain);
    return { chain, relayer: relayerOf(chain.rpcUrl, chain.chainId, deployed?.usdcAddress ?? chain.usdcAddress) };
  };
  try {
    const first = await start();
    const deployed = { usdcAddress: first.chain.usdcAddress, factoryAddress: first.chain.factoryAddress };
    expect(await first.relayer.usdc()).toBe(parseUnits('10000', 6));
    await first.relayer.spend('10000');

    const second = await start(deployed);
    expect(second.chain.freshlyDeployed).toBe(false);
    expect(await second.relayer.usdc()).toBe(parseUnits('10000', 6));
    await second.relayer.spend('9999.75');

    const third = await start(deployed);
    expect(await third.relayer.usdc()).toBe(parseUnits('0.25', 6));
  } finally {
    await running.pop()?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);
