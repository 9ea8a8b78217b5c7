import {
  BackendRequestError,
  createBackendClient,
  FacilitatorUnavailable,
  Paywall,
  type BackendPaywallOptions,
  type BackendTransport,
  type PaywallOptions,
  type PaywallOutcome,
  type PaywallRequest,
  type SellerSettings,
} from '../middleware/index.js';

/**
 * What both framework adapters accept:
 * - the usual production wiring: `{ backendUrl, apiKey, routes, trustProxy?, publicOrigin? }`, where
 *   seller settings come from the backend once (see `backendPaywall`);
 * - a facilitator and settings of your own (self-hosted facilitator, tests): `{ routes, facilitator, settings }`;
 * - a ready `{ paywall }`.
 */
export type PaymentMiddlewareOptions =
  | (BackendPaywallOptions & { readonly onError?: (error: unknown) => void })
  | PaywallOptions
  | { readonly paywall: Paywall };

/** The one call an adapter makes per request. */
export interface PaywallSource {
  handle(request: PaywallRequest): Promise<PaywallOutcome>;
}

/** `transport`: how this adapter reaches the backend when the seller gave neither `fetch` nor `transport` (Node adapters: node:http). */
export function paywallSource(options: PaymentMiddlewareOptions, defaults: { transport?: BackendTransport } = {}): PaywallSource {
  if ('paywall' in options) return options.paywall;
  if ('facilitator' in options) return new Paywall(options);
  return backendPaywall({ ...options, transport: options.transport ?? defaults.transport });
}

// Settings for the routing-only Paywall below; nothing is ever offered or redeemed with them.
const NO_SETTINGS: SellerSettings = {
  network: 'unconfigured',
  chainId: 1,
  asset: '0x0000000000000000000000000000000000000000',
  payTo: '0x0000000000000000000000000000000000000000',
  assetName: 'unconfigured',
  assetVersion: '0',
  uptoFacilitator: '0x0000000000000000000000000000000000000000',
  channelReceiverAuthorizer: '0x0000000000000000000000000000000000000000',
  authCaptureOperator: '0x0000000000000000000000000000000000000000',
};
const notLoaded = () => Promise.reject(new FacilitatorUnavailable('seller settings not loaded'));
const NO_FACILITATOR = { redeem: notLoaded, hold: notLoaded, capture: notLoaded, release: notLoaded, channelPay: notLoaded, channelCapture: notLoaded, channelRelease: notLoaded };

/**
 * Seller settings are fetched from the backend once: the fetch starts at construction, concurrent
 * first requests share it, and a failure is forgotten so a later request tries again. Until settings
 * exist, a routing-only Paywall (same routes, same path rules) decides what needs them: free routes
 * pass and path tricks get their 400 as usual; protected routes answer 502/503 and never reach a handler.
 */
function backendPaywall(options: BackendPaywallOptions & { readonly onError?: (error: unknown) => void }): PaywallSource {
  const { backendUrl, apiKey, fetch, transport, timeoutMs, onError = reportSettingsError, ...paywallOptions } = options;
  const backend = createBackendClient({ backendUrl, apiKey, fetch, transport, timeoutMs });
  // Built now, so a bad route pattern or price fails at start-up rather than on the first request.
  const routingOnly = new Paywall({ ...paywallOptions, facilitator: NO_FACILITATOR, settings: NO_SETTINGS });
  let ready: Paywall | undefined;
  let loading: Promise<Paywall> | undefined;

  const load = (): Promise<Paywall> =>
    (loading ??= backend.fetchSellerSettings().then(
      (settings) => (ready = new Paywall({ ...paywallOptions, facilitator: backend, settings })),
      (error: unknown) => {
        loading = undefined;
        onError(error);
        throw error;
      },
    ));
  load().catch(() => {}); // start-up fetch; already reported, and retried by the next protected request

  return {
    async handle(request) {
      if (ready) return ready.handle(request);
      const routed = await routingOnly.handle(request);
      if (routed.kind === 'pass' || routed.kind === 'reject') return routed;
      let paywall: Paywall;
      try {
        paywall = await load();
      } catch (error) {
        return settingsUnavailable(error);
      }
      return paywall.handle(request);
    },
  };
}

function settingsUnavailable(error: unknown): PaywallOutcome {
  // Unreachable backend: 503 (try again later). Wrong key or payments not enabled: 502, a seller-side fault.
  const status = error instanceof FacilitatorUnavailable ? error.status : 502;
  const message = 'payment settings could not be loaded from the payment backend';
  return { kind: 'unavailable', status, body: { error: 'facilitator_unavailable', message, status } };
}

function reportSettingsError(error: unknown): void {
  const detail = error instanceof BackendRequestError ? `${error.status} ${error.error}: ${error.message}` : String((error as Error)?.message ?? error);
  console.warn(`[agentgate] could not load seller settings (will retry on the next paid-route request): ${detail}`);
}
