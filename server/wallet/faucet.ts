import { createWalletClient, http, nonceManager, type Account, type Address, type Chain, type Hex, type Transport, type WalletClient } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { AppError } from '../platform/errors.js';
import { balanceOf, usdcAbi } from '../platform/chain/usdc.js';
import type { ChainService } from '../platform/chain/chain-service.js';
import { devTokenAbi } from './smart-account-abi.js';

/**
 * Dev-mode test USDC. The faucet key transfers from its own balance; when that is short and the key is a
 * minter of the token (the dev chain's deployer is), it mints instead. Never mounted in production mode.
 */
export class DevFaucet {
  private readonly wallet: WalletClient<Transport, Chain, Account>;

  constructor(private readonly chain: ChainService, faucetKey: Hex) {
    const account = privateKeyToAccount(faucetKey, { nonceManager });
    this.wallet = createWalletClient({ chain: chain.walletClient.chain, transport: http(chain.rpcUrl, { batch: false }), account, pollingInterval: 100 });
  }

  async fund(to: Address, amount: bigint): Promise<Hex> {
    const { publicClient, usdc } = this.chain;
    const held = await balanceOf({ client: publicClient, token: usdc.address, account: this.wallet.account.address });
    const common = { address: usdc.address, account: this.wallet.account, chain: this.wallet.chain } as const;
    let hash: Hex;
    try {
      hash = held >= amount
        ? await this.wallet.writeContract({ ...common, abi: usdcAbi, functionName: 'transfer', args: [to, amount] })
        : await this.wallet.writeContract({ ...common, abi: devTokenAbi, functionName: 'mint', args: [to, amount] });
    } catch (err) {
      throw new AppError(503, 'faucet_empty', `the faucet could not pay: ${(err as { shortMessage?: string }).shortMessage ?? (err as Error).message}`.slice(0, 300));
    }
    const receipt = await publicClient.waitForTransactionReceipt({ hash, timeout: 60_000 });
    if (receipt.status !== 'success') throw new AppError(503, 'faucet_empty', `the faucet transaction ${hash} reverted`);
    return hash;
  }
}
