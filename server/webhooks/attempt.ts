import { guardedFetch, GuardedFetchError, type AddressPolicy } from '../platform/ssrf.js';
import { WEBHOOK_HEADERS, webhookSignature } from 'agentgate-x402-wire';
import type { DeliveryAttempt } from './models.js';

/** What one POST to a receiver came to: delivered, worth retrying, or never going to work. */
export type AttemptVerdict = 'delivered' | 'retry' | 'give-up';

export interface AttemptResult {
  verdict: AttemptVerdict;
  record: DeliveryAttempt;
}

/** Errors a later attempt can get past; anything else (blocked address, bad URL, redirect) will not change. */
const TRANSIENT: ReadonlySet<string> = new Set(['timeout', 'network_error', 'dns_failed', 'too_large']);

/**
 * One signed POST through the SSRF guard. Redirects are not followed: a receiver answers where it was
 * registered, and following one would hand the signed body to an address the seller never entered.
 */
export async function postWebhook(input: {
  url: string;
  body: string;
  secret: string;
  event: string;
  idempotencyKey: string;
  timeoutMs: number;
  /** The process's outbound address policy (outboundPolicy): loopback in dev, the operator's private ranges. */
  policy: AddressPolicy;
}): Promise<AttemptResult> {
  const at = new Date();
  const started = performance.now();
  const durationMs = () => Math.round(performance.now() - started);
  try {
    const response = await guardedFetch(input.url, {
      method: 'POST',
      body: input.body,
      headers: {
        'content-type': 'application/json',
        [WEBHOOK_HEADERS.signature]: webhookSignature(input.body, input.secret),
        [WEBHOOK_HEADERS.event]: input.event,
        [WEBHOOK_HEADERS.idempotencyKey]: input.idempotencyKey,
      },
      timeoutMs: input.timeoutMs,
      maxBytes: 64 * 1024,
      maxRedirects: 0,
      ...input.policy,
    });
    const record = { at, url: input.url, statusCode: response.status, durationMs: durationMs() };
    if (response.status >= 200 && response.status < 300) return { verdict: 'delivered', record };
    // SPEC 6.1: a 4xx stops retries; 5xx (and anything else odd) is retried.
    if (response.status >= 400 && response.status < 500) return { verdict: 'give-up', record };
    return { verdict: 'retry', record };
  } catch (err) {
    const code = err instanceof GuardedFetchError ? err.code : 'network_error';
    const message = err instanceof GuardedFetchError && code === 'too_many_redirects' ? 'receiver answered with a redirect (not followed)' : (err as Error).message;
    return { verdict: TRANSIENT.has(code) ? 'retry' : 'give-up', record: { at, url: input.url, error: `${code}: ${message}`, durationMs: durationMs() } };
  }
}
