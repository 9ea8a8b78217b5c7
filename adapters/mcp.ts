import type { McpServer, RegisteredTool, ToolCallback } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { ZodRawShapeCompat } from '@modelcontextprotocol/sdk/server/zod-compat.js';
import type { CallToolResult, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import {
  buildAuthCaptureRequirementV2,
  buildRequirementV2,
  buildBatchSettlementRequirementV2,
  buildPermit2RequirementV2,
  DEFAULT_CAPTURE_SECONDS,
  PERMIT2_GAS_SPONSORING_EXTENSIONS,
  DEFAULT_REFUND_SECONDS,
  buildUptoRequirementV2,
  createBackendClient,
  encodeBase64Json,
  FacilitatorUnavailable,
  isUsagePrice,
  parseCharge,
  parsePrice,
  paymentFlowOf,
  type UsagePrice,
  type BackendClientOptions,
  type ChannelPayResult,
  type Facilitator,
  type Price,
  type RedeemResult,
  type SellerSettings,
  type SettleMode,
} from '../middleware/index.js';
import { exactSvmRequirements, isSolanaNetwork, settingsOnEveryNetwork, type PaymentRequiredV2, type PaymentRequirementsV2 } from 'agentgate-x402-wire';

/**
 * Paid MCP tools, following the x402 MCP transport:
 * - unpaid call: a tool result with `isError: true`, the PaymentRequired object (x402 v2) as
 *   `structuredContent`, and the same JSON in `content[0].text`;
 * - paid call: the client puts a PaymentPayload in `params._meta["x402/payment"]`; it is verified by the
 *   backend (resource `mcp://tool/<name>`, registered like an HTTP endpoint) and held while the tool runs;
 *   a result is settled only if the tool succeeded (no `isError`, no throw), and then carries
 *   `_meta["x402/payment-response"]`. A failed tool is not charged: the hold is released and its error goes
 *   back as it is. `settle: 'before-handler'` settles before the tool runs instead.
 * The tool's output is released only after settlement succeeded.
 *
 *   const paid = mcpPaywall({ backendUrl, apiKey });
 *   paid.tool(server, 'forecast', { price: '$0.01', description: '...', inputSchema: { city: z.string() } }, handler);
 *
 * A tool priced `{ upto: '$0.50' }` sells by usage (x402 `upto`): the buyer signs for at most that, the
 * tool reports what the call used with `extra.x402.charge('$0.0123')` (extra: the SDK's last handler
 * argument), and that is settled after the tool; nothing reported is charged `unreported` (default 0).
 * With `scheme: 'batch-settlement'` it is charged so through the buyer's channel: the voucher allows the
 * maximum, and the call is captured for what the tool reported.
 *
 * Do not give a paid tool an `outputSchema`: MCP clients validate `structuredContent` against it, and the
 * payment-required object would not match.
 */

export const PAYMENT_META_KEY = 'x402/payment';
export const PAYMENT_RESPONSE_META_KEY = 'x402/payment-response';

export type McpPaywallOptions =
  | BackendClientOptions
  /** Your own facilitator and settings (self-hosted facilitator, tests). */
  | { readonly facilitator: Facilitator; readonly settings: SellerSettings };

/** What an upto tool finds in `extra.x402`. */
export interface ToolUsage {
  /** Reports what this call used, at most the tool's maximum (more throws a RangeError); the last report counts. */
  charge(price: Price): void;
  readonly maxAmountAtomic: bigint;
}

export interface PaidToolConfig<Args extends ZodRawShapeCompat | undefined> {
  /** Per call, in USDC: "$0.01", "0.01", or atomic units as a bigint; or `{ upto: '$0.50' }` to charge by usage. */
  price: Price | UsagePrice;
  /** Default `after-handler`: only a successful tool result is charged. */
  settle?: SettleMode;
  /**
   * `'auth-capture'`: the buyer's payment is authorized into escrow before the tool runs, captured when it
   * succeeds and voided when it fails, and can be refunded later (POST /v0/payments/{id}/refund).
   * `batch-settlement`: the tool is paid through a payment channel (a deposit once, then a voucher per call,
   * accepted by the backend in milliseconds, held while the tool runs; claimed in bulk later). Default `exact`.
   */
  scheme?: 'exact' | 'auth-capture' | 'batch-settlement';
  /**
   * `exact` only: `'permit2'` asks the buyer for a Permit2 witness transfer to the x402ExactPermit2Proxy
   * instead of an EIP-3009 authorization (x402 v2); its payment-required answer declares the gas sponsoring
   * extensions, so a buyer that never approved Permit2 pays without gas. Default `'eip3009'`.
   */
  assetTransferMethod?: 'eip3009' | 'permit2';
  /** auth-capture: the capture window (default 600 s) and the refund window (default 7 days), in seconds. */
  captureSeconds?: number;
  refundSeconds?: number;
  title?: string;
  description?: string;
  inputSchema?: Args;
  annotations?: ToolAnnotations;
}

export interface McpPaywall {
  tool<Args extends ZodRawShapeCompat | undefined = undefined>(server: McpServer, name: string, config: PaidToolConfig<Args>, handler: ToolCallback<Args>): RegisteredTool;
}

export const mcpToolResource = (name: string) => `mcp://tool/${name}`;

export function mcpPaywall(options: McpPaywallOptions): McpPaywall {
  const backend = 'facilitator' in options ? undefined : createBackendClient(options);
  const facilitator: Facilitator = backend ?? (options as { facilitator: Facilitator }).facilitator;
  const settingsOf = backend ? settingsLoader(() => backend.fetchSellerSettings()) : () => Promise.resolve((options as { settings: SellerSettings }).settings);

  return {
    tool(server, name, config, handler) {
      if (!/^[A-Za-z0-9_.-]{1,128}$/.test(name)) throw new TypeError(`a paid tool name must match [A-Za-z0-9_.-]{1,128} to be a resource mcp://tool/<name>: ${name}`);
      const usage = isUsagePrice(config.price) ? { max: parseCharge(config.price.upto), unreported: config.price.unreported === undefined ? 0n : parseCharge(config.price.unreported) } : undefined;
      if (usage && (usage.max <= 0n || usage.unreported > usage.max)) throw new RangeError(`tool ${name}: an upto price must allow more than 0 and its unreported charge must be within it`);
      const channel = config.scheme === 'batch-settlement';
      const channelHeld = channel && (config.settle ?? 'after-handler') === 'after-handler' && !!facilitator.channelCapture && !!facilitator.channelRelease;
      if (usage && (config.settle === 'before-handler' || !(channel ? channelHeld : facilitator.hold))) throw new TypeError(`tool ${name}: an upto price is settled after the tool, by a facilitator that holds payments`);
      if (channel && !facilitator.channelPay) throw new TypeError(`tool ${name}: a batch-settlement tool is paid through a facilitator that takes channel payments`);
      const escrow = config.scheme === 'auth-capture';
      if (escrow && (usage || config.settle === 'before-handler' || !facilitator.hold)) throw new TypeError(`tool ${name}: an auth-capture tool has a price (not { upto }) and is captured after the tool, by a facilitator that holds payments`);
      if (config.assetTransferMethod !== undefined && !['eip3009', 'permit2'].includes(config.assetTransferMethod)) throw new TypeError(`tool ${name}: assetTransferMethod is 'eip3009' or 'permit2'`);
      const permit2 = config.assetTransferMethod === 'permit2';
      if (permit2 && (usage || escrow || channel)) throw new TypeError(`tool ${name}: assetTransferMethod 'permit2' is for exact tools (an upto price always goes through Permit2)`);
      const amountAtomic = usage ? usage.max : parsePrice(config.price as Price);
      // Held while the tool runs and captured only for a result that is not an error (the 402's
      // authorization flow), or settled before it runs (upfront): one decision for the offer and the call.
      const flow = paymentFlowOf(config.settle ?? 'after-handler', Boolean(facilitator.hold && facilitator.capture && facilitator.release));
      const resource = mcpToolResource(name);
      const run = handler as (...params: unknown[]) => CallToolResult | Promise<CallToolResult>;

      const paidHandler = async (...params: unknown[]): Promise<CallToolResult> => {
        // The SDK passes (args, extra) for tools with an input schema and (extra) for those without.
        const extra = params[params.length - 1] as { _meta?: Record<string, unknown> };
        let settings: SellerSettings;
        try {
          settings = await settingsOf();
        } catch {
          return failure('facilitator_unavailable', 'payment settings could not be loaded from the payment backend');
        }
        const offer = { amountAtomic, resource, description: config.description };
        // An exact or upto tool is offered on every network of the backend, the default one first.
        const requirements = escrow
          ? [buildAuthCaptureRequirementV2(settings, offer, { nowSeconds: Math.floor(Date.now() / 1000), captureSeconds: config.captureSeconds ?? DEFAULT_CAPTURE_SECONDS, refundSeconds: config.refundSeconds ?? DEFAULT_REFUND_SECONDS })]
          : channel ? [buildBatchSettlementRequirementV2(settings, offer)]
            : [
              ...settingsOnEveryNetwork(settings).map((on) => (usage ? buildUptoRequirementV2(on, offer)
                : permit2 ? buildPermit2RequirementV2(on, { ...offer, paymentFlow: flow })
                  : buildRequirementV2(on, { ...offer, paymentFlow: flow }))),
              // A plain exact tool is offered on the backend's Solana networks too, where the seller has an address.
              ...(usage || permit2 ? [] : (settings.solanaNetworks ?? []).map((solana) => exactSvmRequirements({ network: solana.network, amountAtomic, mint: solana.asset, payTo: solana.payTo, feePayer: solana.feePayer }))),
            ];
        const requirement = requirements[0]!;
        const required = (error: string, extraFields: Record<string, unknown> = {}, offerExtra?: Record<string, unknown>) =>
          paymentRequiredResult({
            x402Version: 2, error, resource: { url: resource, description: config.description ?? '', mimeType: 'application/json' },
            accepts: requirements.map((r) => (offerExtra ? { ...r, extra: { ...r.extra, ...offerExtra } } : r) as PaymentRequirementsV2),
            ...(permit2 ? { extensions: PERMIT2_GAS_SPONSORING_EXTENSIONS } : {}),
          }, extraFields);

        const payment = extra._meta?.[PAYMENT_META_KEY];
        if (payment === undefined || payment === null) return required('payment_required');
        if (typeof payment !== 'object' || Array.isArray(payment)) return required('invalid_payload');
        const version = (payment as { x402Version?: unknown }).x402Version === 1 ? 1 : 2;

        const paymentHeader = encodeBase64Json(payment);
        // The requirement of the network the payment names (another is the default's to refuse).
        const named = (payment as { accepted?: { network?: unknown } }).accepted?.network;
        const chosen = requirements.find((r) => r.network === named) ?? requirement;
        const request = { paymentHeader, version, resource, amountAtomic, requirement: chosen as PaymentRequirementsV2 } as const;
        let reported: bigint | undefined;
        if (usage) {
          const x402: ToolUsage = {
            maxAmountAtomic: usage.max,
            charge(price) {
              const amount = parseCharge(price);
              if (amount > usage.max) throw new RangeError(`charge ${String(price)} is above tool ${name}'s maximum of ${usage.max} atomic units: the buyer did not allow it`);
              reported = amount;
            },
          };
          (extra as { x402?: ToolUsage }).x402 = x402;
        }
        const refused = (result: Extract<RedeemResult, { ok: false }>) => required(result.reason, {
          message: result.message,
          [PAYMENT_RESPONSE_META_KEY]: { success: false, errorReason: result.reason, transaction: '', network: requirement.network },
        });
        const paidResult = (result: CallToolResult, settled: Extract<RedeemResult, { ok: true }>): CallToolResult => (
          { ...result, _meta: { ...(result._meta ?? {}), [PAYMENT_RESPONSE_META_KEY]: { ...settled.paymentResponse } } }
        );

        if (channel) {
          // The voucher is accepted (or the deposit sent) before the tool runs, held while it runs by default
          // (captured when it succeeds, released when it fails); a refusal says where the channel stands.
          const channelRefused = (paid: Extract<ChannelPayResult, { ok: false }>) => {
            const where = { ...(paid.channelState ? { channelState: paid.channelState } : {}), ...(paid.voucherState ? { voucherState: paid.voucherState } : {}) };
            return required(paid.reason, { message: paid.message, [PAYMENT_RESPONSE_META_KEY]: { success: false, errorReason: paid.reason, transaction: '', network: requirement.network } }, Object.keys(where).length ? where : undefined);
          };
          let paid;
          try {
            paid = await facilitator.channelPay!({ ...request, ...(channelHeld ? { holdSeconds: 120 } : {}), ...(usage ? { byUsage: true } : {}) });
          } catch (error) {
            if (error instanceof FacilitatorUnavailable) return failure('facilitator_unavailable', error.message);
            throw error;
          }
          if (!paid.ok) return channelRefused(paid);
          let result: CallToolResult;
          try {
            result = await run(...params);
          } catch (error) {
            if (channelHeld) {
              await facilitator.channelRelease!(paid.paymentId).catch(() => {});
              return { isError: true, content: [{ type: 'text', text: `Tool ${name} failed; you were not charged: ${(error as Error).message}` }] };
            }
            return { isError: true, content: [{ type: 'text', text: `Tool ${name} failed after payment: ${(error as Error).message}` }], _meta: { [PAYMENT_RESPONSE_META_KEY]: { ...paid.paymentResponse } } };
          }
          if (!channelHeld) return paidResult(result, paid);
          if (result.isError) {
            await facilitator.channelRelease!(paid.paymentId).catch(() => {});
            return result;
          }
          let captured;
          try {
            // Priced by usage: charged what the tool reported (the answer says it, and the channel's charged total).
            captured = await facilitator.channelCapture!(paid.paymentId, usage ? { amountAtomic: reported ?? usage.unreported } : undefined);
          } catch (error) {
            if (error instanceof FacilitatorUnavailable) return failure('facilitator_unavailable', error.message);
            throw error;
          }
          return captured.ok ? paidResult(result, captured) : channelRefused(captured);
        }

        // A Solana payment is redeemed before the tool runs: its transaction lives only as long as its blockhash.
        if (flow === 'authorization' && !isSolanaNetwork(chosen.network)) {
          const holder = facilitator as Required<Facilitator>;
          let held;
          try {
            // The backend verifies the same bytes an HTTP buyer would send as X-Payment / PAYMENT-SIGNATURE.
            held = await holder.hold(request);
          } catch (error) {
            if (error instanceof FacilitatorUnavailable) return failure('facilitator_unavailable', error.message);
            throw error;
          }
          if (!held.ok) return refused(held);
          let result: CallToolResult;
          try {
            result = await run(...params);
          } catch (error) {
            await holder.release(held.holdId).catch(() => {});
            return { isError: true, content: [{ type: 'text', text: `Tool ${name} failed; you were not charged: ${(error as Error).message}` }] };
          }
          if (result.isError) {
            await holder.release(held.holdId).catch(() => {});
            return result;
          }
          let captured;
          try {
            captured = await holder.capture(held.holdId, usage ? { amountAtomic: reported ?? usage.unreported } : undefined);
          } catch (error) {
            if (error instanceof FacilitatorUnavailable) return failure('facilitator_unavailable', error.message);
            throw error;
          }
          // Not settled: the tool's output is withheld.
          return captured.ok ? paidResult(result, captured) : refused(captured);
        }

        let redeemed;
        try {
          redeemed = await facilitator.redeem(request);
        } catch (error) {
          if (error instanceof FacilitatorUnavailable) return failure('facilitator_unavailable', error.message);
          throw error;
        }
        if (!redeemed.ok) return refused(redeemed);
        let result: CallToolResult;
        try {
          result = await run(...params);
        } catch (error) {
          // Paid, but the tool failed: say so, and still hand over the settlement so the buyer can claim it.
          return { isError: true, content: [{ type: 'text', text: `Tool ${name} failed after payment: ${(error as Error).message}` }], _meta: { [PAYMENT_RESPONSE_META_KEY]: { ...redeemed.paymentResponse } } };
        }
        return paidResult(result, redeemed);
      };

      // The SDK's overloads cannot follow a generic Args through; the runtime shape is the same either way.
      const register = server.registerTool.bind(server) as (name: string, config: Record<string, unknown>, cb: (...params: unknown[]) => Promise<CallToolResult>) => RegisteredTool;
      return register(name, { title: config.title, description: config.description, inputSchema: config.inputSchema, annotations: config.annotations }, paidHandler);
    },
  };
}

function paymentRequiredResult(body: PaymentRequiredV2, extraFields: Record<string, unknown>): CallToolResult {
  const structured = { ...body, ...extraFields } as Record<string, unknown>;
  return { isError: true, structuredContent: structured, content: [{ type: 'text', text: JSON.stringify(structured) }] };
}

function failure(error: string, message: string): CallToolResult {
  return { isError: true, content: [{ type: 'text', text: JSON.stringify({ error, message }) }] };
}

/** Settings fetched once and shared; a failed fetch is forgotten so the next call tries again. */
function settingsLoader(fetchSettings: () => Promise<SellerSettings>): () => Promise<SellerSettings> {
  let loading: Promise<SellerSettings> | undefined;
  return () => (loading ??= fetchSettings().catch((error: unknown) => {
    loading = undefined;
    throw error;
  }));
}
