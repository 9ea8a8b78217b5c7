import type { Address } from 'viem';
import type { Connection, Model } from 'mongoose';
import type { ChainService } from '../../../../chain/chain-service.js';
import { AppError } from '../../../../platform/errors.js';
import type { Config } from '../../../../platform/config.js';
import type { Logger } from '../../../../platform/logger.js';
import type { SecretBox } from '../../../../platform/secret-box.js';
import type { SettleOutcome } from '../../../../settlement/settler.js';
import type { WorkExecutor } from '../../../../settlement/work.js';
import type { PaymentDoc, SellerAccountDoc } from '../../../models.js';
import type { PaymentSettlement } from '../../../payment-settlement.js';
import type { ReceiptSigner } from '../../../receipts.js';
import { requireChain } from '../../../chain-required.js';
import type { FacilitatorAnswer, FacilitatorRequest } from '../../../facilitator-api.js';
import type { HoldablePayment, PaymentScheme, Reconciled, SupportedKind } from '../../scheme.js';
import { ReceiverAuthorizer } from './receiver-authorizer.js';
import { actionExecutors, channelActionModel, type ChannelActionDoc } from './settle.js';
import { BatchSettlementFacilitator } from './facilitator.js';
import { VoucherBook } from './voucher-book.js';
import { ChannelSweep } from './sweep.js';
import { ChannelClaimOutbox } from './claim-webhooks.js';
import type { Endpoints } from '../../../endpoints.js';
import type { DeliveryQueue } from '../../../../webhooks/webhook-service.js';
import { ChannelCalls } from './calls.js';
import { isBatchSettlementPayload } from './wire.js';
import { BATCH_SETTLEMENT_CONTRACTS } from './chain.js';

// The x402 `batch-settlement` scheme on EVM (v2): payment channels on the x402BatchSettlement contract. A
// buyer deposits once into a channel and signs a cumulative voucher per call, which the seller checks off
// chain; the seller claims many channels' vouchers in one transaction, sweeps them with `settle`, and
// refunds what is left. As a facilitator, agentgate verifies deposits and vouchers, sends deposits, claims,
// settles and refunds (settle.ts, as settlement work of the engine), and signs claims and refunds with
// its receiver authorizer for sellers that delegate it (what /supported advertises).
//
// Each network has a scheme of its own (its facilitator, its executors on that network's settlement engine,
// its sweep rounds) over what every network shares (BatchSettlementChannels: one voucher book, since a
// channel id is per chain, one receiver authorizer, one set of call records and claim webhooks).
//
// Its on-chain work is not payments of the shared path: a deposit moves the buyer's money into the
// channel, not to the seller, so it is no payment record. Each call paid with a voucher has a record of its
// own with a signed receipt (calls.ts), read from the accepted voucher and the claim that carried it.

/**
 * What every network's batch-settlement scheme shares, built once: the receiver authorizer (one key; its
 * signatures name the chain), the action records, the voucher book that keeps every network's channels
 * sold through our middleware (channel ids are per chain), those channels' calls as records, and the
 * channel.claimed webhooks.
 */
export class BatchSettlementChannels {
  readonly authorizer: ReceiverAuthorizer;
  /** Channels sold through our own middleware, on every network: their state and accepted vouchers (voucher-book.ts). */
  readonly book: VoucherBook;
  /** channel.claimed: what each claim carried, told to the sellers' webhooks (claim-webhooks.ts). */
  readonly claimWebhooks: ChannelClaimOutbox;
  /** Those channels and their paid calls as records (read-only: the API, the console, the CLI, the claim webhooks). */
  readonly calls: ChannelCalls;
  /** The recorded deposits, claims, settles and refunds of every network (each names its chain). */
  readonly actions: () => Model<ChannelActionDoc>;
  /** The receiver authorizer's address once loaded (/supported is answered synchronously). */
  address?: Address;

  constructor(readonly conn: Connection, config: Config, secrets: SecretBox, private readonly log: Logger, signer: () => ReceiptSigner, endpoints: Endpoints, deliveries: DeliveryQueue) {
    this.authorizer = new ReceiverAuthorizer(conn, config, secrets);
    const actions = () => channelActionModel(conn);
    this.actions = actions;
    this.book = new VoucherBook({ conn, receiverAuthorizer: () => this.receiverAuthorizer(), signer, log });
    this.calls = new ChannelCalls(this.book, actions);
    this.claimWebhooks = new ChannelClaimOutbox({ conn, actions, calls: this.calls, endpoints, deliveries });
  }

  /** Loads the key in the background (a deployment with a chain). */
  load(): void {
    this.receiverAuthorizer().catch((err) => this.log.warn({ err: (err as Error).message }, 'the batch-settlement receiver authorizer could not be loaded yet'));
  }

  /** The receiver authorizer's address (loading it if need be). */
  async receiverAuthorizer(): Promise<Address> {
    this.address ??= await this.authorizer.address();
    return this.address;
  }
}

export class BatchSettlementScheme implements PaymentScheme {
  readonly name = 'batch-settlement';
  readonly pricedByUsage = false;
  readonly paidInV1 = false;
  readonly extensions: readonly string[] = [];
  readonly contracts = BATCH_SETTLEMENT_CONTRACTS;
  readonly otherWork: Readonly<Record<string, WorkExecutor>>;
  private readonly facilitator: BatchSettlementFacilitator;
  /** The rounds that claim, settle and refund this network's channels (sweep.ts). */
  readonly sweep: ChannelSweep;

  /** One per network (its chain, its settlement path), over the channels every network shares. */
  constructor(
    readonly channels: BatchSettlementChannels,
    private readonly chain: ChainService | undefined,
    config: Config,
    path: PaymentSettlement,
    private readonly log: Logger,
    /** The default network's scheme names its rounds as before many networks (a rolling upgrade runs each round once). */
    isDefault: boolean,
  ) {
    const { actions, authorizer, book } = channels;
    const chainOf = () => requireChain(this.chain);
    this.otherWork = actionExecutors(chainOf, actions, log);
    this.facilitator = new BatchSettlementFacilitator({
      chain: chainOf, authorizer, actions, submit: (work) => path.submit(work),
      ensureCanSend: () => path.ensureCanSend('facilitator'), settlementTimeoutMs: config.SETTLEMENT_TIMEOUT_MS, log,
      screen: (payer, receiver, orgId, counted) => path.screenParties([{ role: 'payer', address: payer }, { role: 'payTo', address: receiver }], { orgId, network: chainOf().network, scheme: 'batch-settlement', door: 'facilitator' }, counted),
    });
    if (chain) book.serve({ chain, facilitator: this.facilitator });
    // channel.claimed right after a round that claimed; the webhook outbox sweep dispatches what a crash left.
    this.sweep = new ChannelSweep({
      conn: channels.conn, chain: chainOf, book, facilitator: this.facilitator, receiverAuthorizer: () => channels.receiverAuthorizer(), log,
      onClaimed: () => channels.claimWebhooks.sweep(0), isDefault,
    });
  }

  /** /supported offers the scheme once the key is loaded; a key that cannot be loaded leaves it out (and says why in the log). */
  async ready(): Promise<void> {
    if (this.chain) await this.channels.receiverAuthorizer().catch((err) => this.log.error({ err: (err as Error).message }, 'the batch-settlement receiver authorizer cannot be loaded: /supported leaves the scheme out'));
  }

  /** Offered with agentgate's receiver authorizer, which sellers name in their channels to delegate claims and refunds. */
  supportedKinds(chain: ChainService): SupportedKind[] {
    const address = this.channels.address;
    if (!address) return [];
    return [{ x402Version: 2, scheme: 'batch-settlement', network: chain.caip2, extra: { receiverAuthorizer: address } }];
  }

  /** Our middleware names agentgate's receiver authorizer in a batch-settlement 402. */
  async sellerSettings(): Promise<Record<string, unknown>> {
    if (!this.chain) return {};
    try {
      return { channelReceiverAuthorizer: await this.channels.receiverAuthorizer() };
    } catch {
      return {};
    }
  }

  // --- the facilitator API ---------------------------------------------------------------------

  handlesRequest(request: FacilitatorRequest): boolean {
    const accepted = request.paymentPayload.accepted as { scheme?: unknown } | undefined;
    return request.paymentRequirements.scheme === 'batch-settlement' || accepted?.scheme === 'batch-settlement' || isBatchSettlementPayload(request.paymentPayload.payload);
  }

  verifyRequest(request: FacilitatorRequest, seller: SellerAccountDoc): Promise<FacilitatorAnswer> {
    requireChain(this.chain);
    return this.facilitator.verify(request, seller);
  }

  settleRequest(request: FacilitatorRequest, seller: SellerAccountDoc, network: string): Promise<FacilitatorAnswer> {
    requireChain(this.chain);
    return this.facilitator.settle(request, seller, network);
  }

  // --- payments of the shared path: none yet (our middleware's channel calls will be) -----------

  laneOf(): undefined {
    return undefined;
  }

  async send(payment: PaymentDoc): Promise<SettleOutcome> {
    return { ok: false, reason: 'settle_failed', message: `payment ${payment._id}: batch-settlement calls are claimed with their channel, not settled one by one` };
  }

  handlesPayload(): boolean {
    return false;
  }

  holdable(): HoldablePayment {
    return { ok: false, reason: 'unsupported_scheme', message: 'a batch-settlement voucher is not held' };
  }

  captureCharge(): bigint | undefined {
    throw new AppError(400, 'unsupported_scheme', 'a batch-settlement voucher is not captured');
  }

  async ensureCanSettle(): Promise<void> {}

  async reconcile(): Promise<Reconciled> {
    return undefined;
  }
}
