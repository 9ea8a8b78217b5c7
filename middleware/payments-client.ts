import { createBackendClient, type BackendClientOptions, type BackendRedeemResponse, type PaymentList, type PaymentRecord } from './backend-client.js';
import { buildPaymentRequired, formatUsdc, parsePrice, type PaymentRequiredBody, type Price, type Receipt, type ReceiptVerification, type SellerSettings, type TrustedKey, verifyReceipt } from 'agentgate-x402-wire';

/**
 * The seller SDK (`payments.*` in the spec): build a 402 challenge, redeem a payment header, list and
 * read payments, and check a signed receipt offline. For sellers who do not use an adapter, e.g. a
 * custom server or a queue worker.
 */
export interface PaymentsClient {
  /** The 402 body for a resource and a decimal USDC amount. Fetches seller settings once, then local. */
  challenge(input: { amount: Price; resource: string; description?: string; mimeType?: string }): Promise<PaymentRequiredBody>;
  redeem(input: { paymentHeader: string; resource: string; amount: Price }): Promise<BackendRedeemResponse>;
  list(input?: { limit?: number; pageToken?: string }): Promise<PaymentList>;
  get(paymentId: string): Promise<PaymentRecord>;
  verifyReceipt(receipt: Receipt, trusted: TrustedKey): Promise<ReceiptVerification>;
  settings(): Promise<SellerSettings>;
}

export function createPaymentsClient(options: BackendClientOptions): PaymentsClient {
  const backend = createBackendClient(options);
  let settings: Promise<SellerSettings> | undefined;
  const cachedSettings = () => {
    // Cache the promise so concurrent first calls share one request; forget a failure so it can retry.
    settings ??= backend.fetchSellerSettings().catch((error: unknown) => {
      settings = undefined;
      throw error;
    });
    return settings;
  };

  return {
    async challenge({ amount, resource, description, mimeType }) {
      const offer = { amountAtomic: parsePrice(amount), resource, description, mimeType };
      return buildPaymentRequired(await cachedSettings(), offer).body;
    },
    redeem({ paymentHeader, resource, amount }) {
      // Normalise "$0.01" / 0.01 / {atomic} to the decimal string the backend expects.
      return backend.redeemPayment({ paymentHeader, resource, amount: formatUsdc(parsePrice(amount)) });
    },
    list: (input) => backend.listPayments(input),
    get: (paymentId) => backend.getPayment(paymentId),
    verifyReceipt,
    settings: cachedSettings,
  };
}
