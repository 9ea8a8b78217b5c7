import type { SolanaWallets } from './solana-wallets.js';
import { encodeFunctionData, getAddress, keccak256, maxUint256, toHex, type Address, type Hex, type TransactionReceipt } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import type { Connection, Model } from 'mongoose';
import type { SecretBox } from '../platform/secret-box.js';
import type { ChainService } from '../chain/chain-service.js';
import type { Settler } from '../settlement/settler.js';
import type { ActivityLog } from '../platform/activity-log.js';
import { AppError, isDuplicateKey } from '../platform/errors.js';
import { networkVariablePrefix } from '../platform/config.js';
import { newId } from '../platform/ids.js';
import { balanceOf, cancelAuthorizationTypes, transferWithAuthorizationTypes, receiveWithAuthorizationTypes, usdcDomain, type Authorization } from '../chain/usdc.js';
import { formatUsdc } from 'agentgate-x402-wire';
import { smartAccountFactoryAbi } from './smart-account-abi.js';
import { permit2Allowance, PERMIT2_ADDRESS } from '../chain/permit2.js';
import { exactTypedData, type ExactPermit } from '../payments/schemes/exact/evm/chain.js';
import { uptoTypedData, type UptoPermit } from '../payments/schemes/upto/evm/chain.js';
import { depositPermit2TypedData, voucherTypedData, type ChannelDepositPermit } from '../payments/schemes/batch-settlement/evm/chain.js';
import { walletSchema, type WalletDoc } from './wallet-model.js';
import { Turns } from '../platform/turns.js';

export interface WalletOwner { orgId: string; identityId: string }

/** An owner-key transaction, mined: its receipt, and the relayer's transaction that gave the owner its gas (null: it had enough). */
export interface OwnerSent { receipt: TransactionReceipt; fundingTxHash: Hex | null }

/** The owner key's transaction pays at most this many times the current max fee (the base fee may rise before it is mined). */
const OWNER_FEE_MARGIN = 2n;

/** One network the wallets pay on: its chain, the relayer that sends its deployments and approvals, its factory. */
export interface WalletNetwork {
  chain: ChainService;
  /** Sends deployments and cancellations from a relayer this process leases (one nonce sequence per account). */
  relayer: Pick<Settler, 'sendTransaction'> | undefined;
  /** The SmartAccount factory on this network (WALLET_FACTORY_ADDRESS, or <NAME>_WALLET_FACTORY_ADDRESS). */
  factory: string | undefined;
}

/** The wallet on one network: whether it is deployed there and what it holds (null: that network's RPC did not answer). */
export interface NetworkBalance {
  network: string;
  caip2: string;
  /** On a Solana network: the wallet's Solana address (a Solana account needs no deployment: `deployed` is true). */
  address?: string;
  deployed: boolean | null;
  balanceUsdc: string | null;
  balanceUsdcRaw: string | null;
  /** Why the balance is missing (the RPC's error), when it is. */
  unavailable?: string;
}

/** The wallet: its address and, at the top level, the default network's balance; `networks`: every network's. */
export interface WalletView {
  address: string;
  network: string;
  deployed: boolean;
  balanceUsdc: string;
  balanceUsdcRaw: string;
  networks: NetworkBalance[];
}


/** The CREATE2 salt: fixed by the identity id, so the address is reproducible from (factory, owner, id). */
export const walletSalt = (identityId: string): Hex => keccak256(toHex(`agentgate:wallet:${identityId}`));

/**
 * Server-held smart-account wallets. The agent sees an address and a balance, never a key: the owner
 * key is generated here, sealed at rest, and opened only to sign a payment authorization.
 *
 * One wallet per identity, on every configured network at one address: the address is CREATE2's of
 * (factory, owner key, salt), so a network whose factory sits at the default network's factory address
 * gives the same account, deployed there when first needed. The service is bound to one network (the
 * default one); `on(network)` is the same wallets on another network.
 */
export class WalletService {
  readonly wallets: Model<WalletDoc>;
  /** The identities' Solana wallets (solana-wallets.ts), shown with the rest; undefined: no Solana network. */
  solana: SolanaWallets | undefined;
  /** The network this instance signs and sends on. */
  private readonly here: WalletNetwork | undefined;
  /** One instance per network, shared by every instance (the default network's is the first). */
  private readonly siblings: Map<string, WalletService>;
  /** Wallets whose address this network's factory was seen to give (so it is asked once per process). */
  private readonly addressChecked = new Set<string>();
  /** One deployment in flight per account in this process; concurrent first payments share it. */
  private readonly deploying = new Map<string, Promise<void>>();
  /** One Permit2 approval in flight per account in this process. */
  private readonly approving = new Map<string, Promise<void>>();
  /** One owner-key transaction at a time per owner in this process (its nonce sequence). */
  private readonly ownerSends = new Turns();

  constructor(
    conn: Connection,
    /** Every network with a chain, the default one first. */
    networks: WalletNetwork[],
    private readonly secrets: SecretBox,
    private readonly logs: ActivityLog,
    bound?: { here: WalletNetwork; siblings: Map<string, WalletService> },
  ) {
    this.wallets = conn.models.Wallet ?? conn.model<WalletDoc>('Wallet', walletSchema, 'wallets');
    if (bound) {
      this.here = bound.here;
      this.siblings = bound.siblings;
      return;
    }
    this.here = networks[0];
    this.siblings = new Map([[this.here?.chain.caip2 ?? '', this]]);
    for (const other of networks.slice(1)) {
      this.siblings.set(other.chain.caip2, new WalletService(conn, [], secrets, logs, { here: other, siblings: this.siblings }));
    }
  }

  /** The default network's instance: wallets are created there. */
  private get home(): WalletService {
    return this.siblings.values().next().value!;
  }

  /** The same wallets on `caip2` (a configured network with a factory), or undefined. */
  on(caip2: string): WalletService | undefined {
    const sibling = this.siblings.get(caip2);
    return sibling?.available ? sibling : undefined;
  }

  /** Every network the wallets pay on, the default one first. */
  get everywhere(): WalletService[] {
    return [...this.siblings.values()].filter((w) => w.available);
  }

  get available(): boolean {
    return Boolean(this.here && this.here.factory);
  }

  requireChain(): ChainService & { factory: Address } {
    if (!this.here || !this.here.factory) {
      throw new AppError(503, 'wallet_unavailable', 'Wallets are not configured on this server (CHAIN_RPC_URL, WALLET_FACTORY_ADDRESS)');
    }
    return { ...this.here.chain, factory: getAddress(this.here.factory) };
  }

  /** Whether this instance is the default network's (where the wallet record names the deployment). */
  private get isHome(): boolean {
    return this.home === this;
  }

  /** The org's wallet at `address`, if it is one (a payment's payTo a refund would be paid from). */
  async ofOrg(orgId: string, address: Address): Promise<WalletDoc | null> {
    return this.wallets.findOne({ orgId, address: getAddress(address) }).lean();
  }

  async find(identityId: string): Promise<WalletDoc | null> {
    return this.wallets.findOne({ identityId }).lean();
  }

  /**
   * The identity's wallet, created on first use. Concurrent first calls may each generate a key, but the
   * unique index on identityId lets exactly one record in; the others read it back.
   */
  async forIdentity(owner: WalletOwner): Promise<WalletDoc> {
    const existing = await this.find(owner.identityId);
    if (existing) return this.here === undefined || this.isHome ? existing : this.checkAddressHere(existing);
    if (!this.isHome) return this.checkAddressHere(await this.home.forIdentity(owner));
    const chain = this.requireChain();
    const ownerKey = generatePrivateKey();
    const ownerAddress = privateKeyToAccount(ownerKey).address;
    const salt = walletSalt(owner.identityId);
    const address = await chain.publicClient.readContract({
      address: chain.factory, abi: smartAccountFactoryAbi, functionName: 'getAddress', args: [ownerAddress, salt],
    });
    const doc: WalletDoc = {
      _id: newId('wal'), orgId: owner.orgId, identityId: owner.identityId, address: getAddress(address), ownerAddress,
      ownerKey: this.secrets.seal(ownerKey, this.keyContext(owner.identityId)), salt, factoryAddress: chain.factory,
      network: chain.network, chainId: chain.chainId, createdAt: new Date(),
    };
    try {
      await this.wallets.create(doc);
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
      const winner = await this.find(owner.identityId);
      if (winner) return winner;
      throw err;
    }
    await this.logs.record({ orgId: owner.orgId, identityId: owner.identityId, action: 'wallet.created', category: 'wallet', description: `Wallet ${doc.address} created on ${doc.network}`, targetType: 'wallet', targetId: doc._id, metadata: { address: doc.address } });
    return doc;
  }

  /**
   * The wallet on this network is the default network's account: this network's factory must give the
   * same address (the same factory address and code do), else a payment here would come from an account
   * nobody controls as this one. Asked once per wallet and process.
   */
  private async checkAddressHere(wallet: WalletDoc): Promise<WalletDoc> {
    if (this.addressChecked.has(wallet._id)) return wallet;
    const chain = this.requireChain();
    const code = await chain.publicClient.getCode({ address: chain.factory });
    if (!code || code === '0x') throw new AppError(503, 'wallet_unavailable', `there is no wallet factory at ${chain.factory} on ${chain.network}: deploy it there at the default network's factory address (through the CREATE2 deployer), or set ${networkVariablePrefix(chain.network)}_WALLET_FACTORY_ADDRESS`);
    const address = await chain.publicClient.readContract({
      address: chain.factory, abi: smartAccountFactoryAbi, functionName: 'getAddress', args: [wallet.ownerAddress as Address, wallet.salt as Hex],
    });
    if (getAddress(address) !== getAddress(wallet.address)) {
      throw new AppError(503, 'wallet_unavailable', `the wallet factory on ${chain.network} (${chain.factory}) gives this wallet another address (${address}, not ${wallet.address}): wallets pay there only from a factory at the default network's factory address`);
    }
    this.addressChecked.add(wallet._id);
    return wallet;
  }

  /**
   * The wallet's address with every network's deployment and balance; the top-level fields are the default
   * network's. A network whose RPC does not answer shows nulls and why, and the others are still shown.
   */
  async view(owner: WalletOwner): Promise<WalletView> {
    const wallet = await this.home.forIdentity(owner);
    const [networks, solana] = await Promise.all([
      Promise.all(this.everywhere.map((w) => w.balanceHere(wallet))),
      this.solana?.available ? this.solana.forIdentity(owner).then((w) => this.solana!.balances(w)) : [],
    ]);
    const home = networks[0]!;
    if (home.unavailable) throw new AppError(503, 'chain_unavailable', `the wallet's balance on ${home.network} cannot be read: ${home.unavailable}`);
    return { address: wallet.address, network: wallet.network, deployed: home.deployed!, balanceUsdc: home.balanceUsdc!, balanceUsdcRaw: home.balanceUsdcRaw!, networks: [...networks, ...solana] };
  }

  private async balanceHere(wallet: WalletDoc): Promise<NetworkBalance> {
    const chain = this.requireChain();
    try {
      const [deployed, balance] = await Promise.all([this.isDeployed(wallet.address as Address), this.balance(wallet.address as Address)]);
      return { network: chain.network, caip2: chain.caip2, deployed, balanceUsdc: formatUsdc(balance), balanceUsdcRaw: balance.toString() };
    } catch (err) {
      const message = ((err as { shortMessage?: string }).shortMessage ?? (err as Error).message).slice(0, 200);
      return { network: chain.network, caip2: chain.caip2, deployed: null, balanceUsdc: null, balanceUsdcRaw: null, unavailable: message };
    }
  }

  async balance(address: Address): Promise<bigint> {
    const chain = this.requireChain();
    return balanceOf({ client: chain.publicClient, token: chain.usdc.address, account: address });
  }

  async isDeployed(address: Address): Promise<boolean> {
    const code = await this.requireChain().publicClient.getCode({ address });
    return Boolean(code && code !== '0x');
  }

  /**
   * Deploys the smart account from the relayer when it has no code yet: the token asks `from` for an
   * ERC-1271 answer, and only a deployed account can give one.
   */
  async ensureDeployed(wallet: WalletDoc): Promise<void> {
    if (this.deployedAtHere(wallet)) return;
    let pending = this.deploying.get(wallet.address);
    if (!pending) {
      pending = this.deploy(wallet).finally(() => this.deploying.delete(wallet.address));
      this.deploying.set(wallet.address, pending);
    }
    await pending;
  }

  private async deploy(wallet: WalletDoc): Promise<void> {
    this.requireChain();
    if (!(await this.isDeployed(wallet.address as Address))) {
      const receipt = await this.send({
        to: wallet.factoryAddress as Address,
        data: encodeFunctionData({ abi: smartAccountFactoryAbi, functionName: 'createAccount', args: [wallet.ownerAddress as Address, wallet.salt as Hex] }),
      }, { walletDeploy: wallet.address });
      const hash = receipt.transactionHash;
      // Another process may have deployed it meanwhile (CREATE2 reverts then): the code is what counts.
      if (receipt.status !== 'success' && !(await this.isDeployed(wallet.address as Address))) throw new AppError(502, 'wallet_deploy_failed', `deploying the wallet ${wallet.address} reverted (${hash})`);
      const { network } = this.requireChain();
      await this.logs.record({ orgId: wallet.orgId, identityId: wallet.identityId, action: 'wallet.deployed', category: 'wallet', description: `Wallet ${wallet.address} deployed on ${network}`, targetType: 'wallet', targetId: wallet._id, metadata: { txHash: hash, network } });
    }
    // The default network's deployment is deployedAt (as before many networks); another's, deployedOn.eip155_<chain id> (a key, never a number an engine may read as an array index).
    const field = this.isHome ? 'deployedAt' : `deployedOn.eip155_${this.requireChain().chainId}`;
    await this.wallets.updateOne({ _id: wallet._id, [field]: null }, { $set: { [field]: new Date() } });
  }

  private deployedAtHere(wallet: WalletDoc): Date | undefined {
    return this.isHome ? wallet.deployedAt : wallet.deployedOn?.[`eip155_${this.requireChain().chainId}`];
  }

  /**
   * EIP-3009 TransferWithAuthorization from the smart account, signed by its owner key over the token's
   * EIP-712 digest. The SmartAccount's ERC-1271 check recovers the owner from that raw digest, so a
   * plain typed-data signature by the owner is what the token and any viem-based verifier accept.
   */
  async signTransfer(wallet: WalletDoc, authorization: Authorization): Promise<Hex> {
    if (getAddress(authorization.from) !== getAddress(wallet.address)) throw new Error('authorization.from is not this wallet');
    const chain = this.requireChain();
    return this.withOwner(wallet, (owner) => owner.signTypedData({
      domain: usdcDomain({ name: chain.usdc.name, version: chain.usdc.version, chainId: chain.chainId, verifyingContract: chain.usdc.address }),
      types: transferWithAuthorizationTypes,
      primaryType: 'TransferWithAuthorization',
      message: authorization,
    }));
  }

  /**
   * x402 `upto` pays through Permit2, which moves USDC only with the account's allowance (so do `exact`
   * and channel deposits when the seller asks for Permit2). The first such payment gives it once: the owner key signs USDC's EIP-2612 permit (FiatTokenV2_2 checks it through
   * the account's ERC-1271), and the relayer sends it, paying the gas; the approval is recorded on the
   * wallet and in the activity log. Later payments find the allowance on chain and send nothing.
   */
  async ensurePermit2Allowance(wallet: WalletDoc, needed: bigint): Promise<void> {
    const chain = this.requireChain();
    if ((await permit2Allowance(chain.publicClient, chain.usdc.address, wallet.address as Address)) >= needed) return;
    let pending = this.approving.get(wallet.address);
    if (!pending) {
      pending = this.approvePermit2(wallet).finally(() => this.approving.delete(wallet.address));
      this.approving.set(wallet.address, pending);
    }
    await pending;
  }

  private async approvePermit2(wallet: WalletDoc): Promise<void> {
    const chain = this.requireChain();
    const owner = wallet.address as Address;
    const nonce = await chain.publicClient.readContract({ address: chain.usdc.address, abi: eip2612Abi, functionName: 'nonces', args: [owner] });
    const deadline = BigInt(Math.floor(Date.now() / 1000) + 600);
    const signature = await this.withOwner(wallet, (key) => key.signTypedData({
      domain: usdcDomain({ name: chain.usdc.name, version: chain.usdc.version, chainId: chain.chainId, verifyingContract: chain.usdc.address }),
      types: eip2612Types,
      primaryType: 'Permit',
      message: { owner, spender: PERMIT2_ADDRESS, value: maxUint256, nonce, deadline },
    }));
    const receipt = await this.send({
      to: chain.usdc.address,
      data: encodeFunctionData({ abi: eip2612Abi, functionName: 'permit', args: [owner, PERMIT2_ADDRESS, maxUint256, deadline, signature] }),
    }, { permit2Approval: wallet.address });
    // Another process may have approved meanwhile (the permit nonce then reverts ours): the allowance is what counts.
    if (receipt.status !== 'success' && (await permit2Allowance(chain.publicClient, chain.usdc.address, owner)) === 0n) {
      throw new AppError(502, 'permit2_approval_failed', `approving Permit2 for the wallet ${wallet.address} reverted (${receipt.transactionHash})`);
    }
    await this.wallets.updateOne({ _id: wallet._id }, { $set: { permit2ApprovedAt: new Date(), permit2ApprovalTx: receipt.transactionHash } });
    await this.logs.record({
      orgId: wallet.orgId, identityId: wallet.identityId, action: 'wallet.permit2_approved', category: 'wallet',
      description: `Wallet ${wallet.address} approved Permit2 for x402 Permit2 payments (upto, exact or channel deposits; relayer-paid)`, targetType: 'wallet', targetId: wallet._id,
      metadata: { txHash: receipt.transactionHash, spender: PERMIT2_ADDRESS },
    });
  }

  /**
   * x402 `auth-capture` (ERC-3009 method): the wallet's USDC ReceiveWithAuthorization to the escrow's
   * collector, whose nonce is the escrow payment's payer-agnostic hash (the signature commits to every term).
   */
  async signReceiveAuthorization(wallet: WalletDoc, authorization: Authorization): Promise<Hex> {
    if (getAddress(authorization.from) !== getAddress(wallet.address)) throw new Error('authorization.from is not this wallet');
    const chain = this.requireChain();
    return this.withOwner(wallet, (owner) => owner.signTypedData({
      domain: usdcDomain({ name: chain.usdc.name, version: chain.usdc.version, chainId: chain.chainId, verifyingContract: chain.usdc.address }),
      types: receiveWithAuthorizationTypes,
      primaryType: 'ReceiveWithAuthorization',
      message: authorization,
    }));
  }

  /**
   * x402 `batch-settlement`: a channel's cumulative voucher. The wallet's channels name its owner key as
   * their payerAuthorizer (an EOA the account's owner controls, sealed like the rest), so a voucher is a
   * plain ECDSA signature the seller checks without asking the chain, while the deposits come from the account.
   */
  async signVoucher(wallet: WalletDoc, channelId: Hex, maxClaimableAmount: bigint): Promise<Hex> {
    const chain = this.requireChain();
    return this.withOwner(wallet, (owner) => owner.signTypedData(voucherTypedData(channelId, maxClaimableAmount, chain.chainId)));
  }

  /** The owner key's signature of an x402 upto permit (Permit2 PermitWitnessTransferFrom) from this account. */
  async signUptoPermit(wallet: WalletDoc, permit: UptoPermit): Promise<Hex> {
    if (getAddress(permit.from) !== getAddress(wallet.address)) throw new Error('permit.from is not this wallet');
    const chain = this.requireChain();
    return this.withOwner(wallet, (owner) => owner.signTypedData(uptoTypedData(permit, chain.chainId)));
  }

  /**
   * x402 `batch-settlement` with a seller asking `assetTransferMethod: "permit2"`: the owner key's
   * signature of a Permit2 PermitWitnessTransferFrom from this account to the Permit2 deposit collector,
   * the witness naming the channel (DepositWitness(bytes32 channelId)). Permit2 checks it through the
   * account's ERC-1271, as it does the other permits; the collector can only put the money into that channel.
   */
  async signChannelDepositPermit(wallet: WalletDoc, permit: ChannelDepositPermit): Promise<Hex> {
    if (getAddress(permit.from) !== getAddress(wallet.address)) throw new Error('permit.from is not this wallet');
    const chain = this.requireChain();
    return this.withOwner(wallet, (owner) => owner.signTypedData(depositPermit2TypedData(permit, chain.chainId)));
  }

  /** The owner key's signature of an x402 `exact` Permit2 permit (the witness names the payee only). */
  async signExactPermit(wallet: WalletDoc, permit: ExactPermit): Promise<Hex> {
    if (getAddress(permit.from) !== getAddress(wallet.address)) throw new Error('permit.from is not this wallet');
    const chain = this.requireChain();
    return this.withOwner(wallet, (owner) => owner.signTypedData(exactTypedData(permit, chain.chainId)));
  }

  /**
   * Cancels an unused authorization on chain (relayer pays the gas). Used when a seller did not take a
   * payment, so a signed authorization cannot be settled later behind the mandate's back. Resolves to
   * false when the token refuses because the nonce was already used (the payment did settle).
   */
  async cancelAuthorization(wallet: WalletDoc, nonce: Hex): Promise<boolean> {
    const chain = this.requireChain();
    const signature = await this.withOwner(wallet, (owner) => owner.signTypedData({
      domain: usdcDomain({ name: chain.usdc.name, version: chain.usdc.version, chainId: chain.chainId, verifyingContract: chain.usdc.address }),
      types: cancelAuthorizationTypes,
      primaryType: 'CancelAuthorization',
      message: { authorizer: wallet.address as Address, nonce },
    }));
    try {
      const receipt = await this.send({
        to: chain.usdc.address,
        data: encodeFunctionData({ abi: cancelAbi, functionName: 'cancelAuthorization', args: [wallet.address as Address, nonce, signature] }),
      }, { cancelAuthorization: nonce });
      return receipt.status === 'success';
    } catch {
      return false;
    }
  }

  /**
   * Sends one transaction from the owner key itself (an EOA that holds no gas of its own): a contract call
   * that only the account or its owner may make, such as a payment channel's timed withdrawal (the channel
   * names the owner key its payerAuthorizer). The relayer first sends the owner just enough ETH for this one
   * transaction (its gas at twice the current max fee, less what the owner already holds); the owner's
   * transaction then pays at most that. One at a time per owner key in this process (one nonce sequence).
   * `onSigned` sees the hash before it is broadcast, so a caller can record it first.
   */
  async sendAsOwner(wallet: WalletDoc, tx: { to: Address; data: Hex }, label: Record<string, unknown>, onSigned?: (hash: Hex) => Promise<void>): Promise<OwnerSent> {
    return this.ownerSends.run(wallet.ownerAddress, () => this.sendAsOwnerNow(wallet, tx, label, onSigned));
  }

  private async sendAsOwnerNow(wallet: WalletDoc, tx: { to: Address; data: Hex }, label: Record<string, unknown>, onSigned?: (hash: Hex) => Promise<void>): Promise<OwnerSent> {
    const chain = this.requireChain();
    const client = chain.publicClient;
    const owner = getAddress(wallet.ownerAddress);
    // An estimate that reverts says why (a withdrawal already pending, its delay not over): nothing is funded then.
    const gas = (await client.estimateGas({ account: owner, to: tx.to, data: tx.data })) * 12n / 10n;
    const fees = await client.estimateFeesPerGas();
    const maxFeePerGas = fees.maxFeePerGas * OWNER_FEE_MARGIN;
    const maxPriorityFeePerGas = fees.maxPriorityFeePerGas > maxFeePerGas ? maxFeePerGas : fees.maxPriorityFeePerGas;
    const needed = gas * maxFeePerGas;
    const held = await client.getBalance({ address: owner });
    let fundingTxHash: Hex | null = null;
    if (held < needed) {
      const funding = await this.send({ to: owner, data: '0x', value: needed - held }, { ...label, ownerGas: owner });
      if (funding.status !== 'success') throw new AppError(502, 'owner_funding_failed', `sending the wallet's owner key ${owner} its gas reverted (${funding.transactionHash})`);
      fundingTxHash = funding.transactionHash;
    }
    const nonce = await client.getTransactionCount({ address: owner, blockTag: 'pending' });
    const signed = await this.withOwner(wallet, (key) => key.signTransaction({
      type: 'eip1559', chainId: chain.chainId, nonce, to: tx.to, data: tx.data, gas, maxFeePerGas, maxPriorityFeePerGas, value: 0n,
    }));
    const hash = keccak256(signed);
    await onSigned?.(hash);
    await client.sendRawTransaction({ serializedTransaction: signed });
    const receipt = await client.waitForTransactionReceipt({ hash, pollingInterval: 100 });
    return { receipt, fundingTxHash };
  }

  private async send(tx: { to: Address; data: Hex; value?: bigint }, label: Record<string, unknown>) {
    const relayer = this.here?.relayer;
    if (!relayer) throw new AppError(503, 'wallet_unavailable', 'This process sends no transactions (no chain configured)');
    try {
      return await relayer.sendTransaction(tx, label);
    } catch (err) {
      if ((err as Error).name === 'RelayerUnavailableError') throw new AppError(503, 'relayer_unavailable', `This server cannot send transactions now: ${(err as Error).message}`);
      throw err;
    }
  }

  private async withOwner<T>(wallet: WalletDoc, use: (owner: PrivateKeyAccount) => Promise<T>): Promise<T> {
    const key = this.secrets.openText(wallet.ownerKey, this.keyContext(wallet.identityId)) as Hex;
    return use(privateKeyToAccount(key));
  }

  private keyContext(identityId: string): string {
    return `wallet:${identityId}`;
  }
}

/** USDC's EIP-2612 surface: FiatTokenV2_2's permit with a bytes signature (ERC-1271 for contract owners). */
const eip2612Abi = [
  { type: 'function', name: 'nonces', stateMutability: 'view', inputs: [{ name: 'owner', type: 'address' }], outputs: [{ type: 'uint256' }] },
  {
    type: 'function', name: 'permit', stateMutability: 'nonpayable', outputs: [],
    inputs: [{ name: 'owner', type: 'address' }, { name: 'spender', type: 'address' }, { name: 'value', type: 'uint256' }, { name: 'deadline', type: 'uint256' }, { name: 'signature', type: 'bytes' }],
  },
] as const;

const eip2612Types = {
  Permit: [
    { name: 'owner', type: 'address' },
    { name: 'spender', type: 'address' },
    { name: 'value', type: 'uint256' },
    { name: 'nonce', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
  ],
} as const;

const cancelAbi = [{
  type: 'function',
  name: 'cancelAuthorization',
  stateMutability: 'nonpayable',
  inputs: [{ name: 'authorizer', type: 'address' }, { name: 'nonce', type: 'bytes32' }, { name: 'signature', type: 'bytes' }],
  outputs: [],
}] as const;
