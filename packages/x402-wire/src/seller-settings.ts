import { z } from 'zod';
import { networkByName } from './networks.js';
import { EvmAddress } from './evm.js';
import { SOLANA_ADDRESS } from './svm-networks.js';

/**
 * Where and in what a seller is paid: fetched once from the backend at start-up
 * (`GET /v0/payments/settings`) and cached by the adapter, never per request.
 */
export const SellerSettingsSchema = z.object({
  /** v1 network name ("base", "base-sepolia", "anvil"). */
  network: z.string().min(1),
  chainId: z.number().int().positive(),
  /** The EIP-3009 token (USDC) contract. */
  asset: EvmAddress,
  payTo: EvmAddress,
  /** EIP-712 domain of the token, which buyers sign against. */
  assetName: z.string().min(1),
  assetVersion: z.string().min(1),
  maxTimeoutSeconds: z.number().int().positive().optional(),
  /** The facilitator account that settles x402 `upto` payments (buyers bind it into their permits). */
  uptoFacilitator: EvmAddress.optional(),
  /** The operator (captureAuthorizer) of x402 `auth-capture` payments: the backend's relayer that calls the escrow. */
  authCaptureOperator: EvmAddress.optional(),
  /** The Commerce Payments escrow auth-capture payments are authorized into. */
  authCaptureEscrow: EvmAddress.optional(),
  /** agentgate's batch-settlement receiver authorizer, which the channels of our middleware's routes name. */
  channelReceiverAuthorizer: EvmAddress.optional(),
  /**
   * The backend's other networks (its NETWORKS after the first): a route offers each of them too, in that
   * network's token, besides the network above (auth-capture and batch-settlement where the backend names
   * their operator or receiver authorizer there).
   */
  networks: z.array(z.object({
    network: z.string().min(1),
    chainId: z.number().int().positive(),
    asset: EvmAddress,
    assetName: z.string().min(1),
    assetVersion: z.string().min(1),
    uptoFacilitator: EvmAddress.optional(),
    /** auth-capture's operator and escrow on this network (absent: the backend does not settle auth-capture there). */
    authCaptureOperator: EvmAddress.optional(),
    authCaptureEscrow: EvmAddress.optional(),
    /** batch-settlement's receiver authorizer on this network (absent: the backend does not sell channels there). */
    channelReceiverAuthorizer: EvmAddress.optional(),
    /** Where this network's payments go (absent: payTo above). */
    payTo: EvmAddress.optional(),
  })).optional(),
  /**
   * The Solana networks the backend settles `exact` on where this seller has an address: an exact route
   * offers each of them too, with the fee payer that co-signs the buyer's transfer.
   */
  solanaNetworks: z.array(z.object({
    /** CAIP-2 id ("solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1"). */
    network: z.string().regex(/^solana:/),
    /** USDC's mint. */
    asset: z.string().regex(SOLANA_ADDRESS),
    feePayer: z.string().regex(SOLANA_ADDRESS),
    payTo: z.string().regex(SOLANA_ADDRESS),
  })).optional(),
});
export type SolanaOffer = NonNullable<z.infer<typeof SellerSettingsSchema>['solanaNetworks']>[number];
export type SellerSettings = z.infer<typeof SellerSettingsSchema>;

export const DEFAULT_MAX_TIMEOUT_SECONDS = 60;

/** Validates settings and their consistency with the network table; throws a TypeError naming the field. */
export function parseSellerSettings(input: unknown): SellerSettings {
  const parsed = SellerSettingsSchema.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new TypeError(`invalid seller settings: ${issue.path.join('.') || '(root)'}: ${issue.message}`);
  }
  // A v1 client derives the EIP-712 chain id from the network name, so name and chain must agree.
  for (const { network, chainId } of [parsed.data, ...(parsed.data.networks ?? [])]) {
    const known = networkByName(network);
    if (known && known.chainId !== chainId) {
      throw new TypeError(`invalid seller settings: network "${known.name}" is chain ${known.chainId}, not ${chainId}`);
    }
  }
  return parsed.data;
}

/**
 * The settings on each network the backend settles on: these first (the default network), then one per
 * entry of `networks`, in that network's token, to its payTo and with its upto facilitator, auth-capture
 * operator and channel receiver authorizer. What every scheme's offer is made on.
 */
export function settingsOnEveryNetwork(settings: SellerSettings): SellerSettings[] {
  return [settings, ...(settings.networks ?? []).map((n) => ({
    ...settings, network: n.network, chainId: n.chainId, asset: n.asset, assetName: n.assetName, assetVersion: n.assetVersion, uptoFacilitator: n.uptoFacilitator,
    authCaptureOperator: n.authCaptureOperator, authCaptureEscrow: n.authCaptureEscrow, channelReceiverAuthorizer: n.channelReceiverAuthorizer, payTo: n.payTo ?? settings.payTo,
  }))];
}
