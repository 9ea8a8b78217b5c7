import { createHmac, timingSafeEqual } from 'node:crypto';

/** How far a request's timestamp may be from our clock; older signed requests are replays. */
export const MAX_EVENT_AGE_SECONDS = 5 * 60;

/**
 * Checks the chat platform's request signature (Slack's v0 scheme): `v0=` + hex HMAC-SHA256 of
 * `v0:<timestamp>:<raw body>` under the app's signing secret, with the timestamp within five minutes.
 * Constant-time; an empty secret or a missing header fails closed.
 */
export function verifyPlatformSignature(input: {
  rawBody: Buffer; timestamp: string | undefined; signature: string | undefined; signingSecret: string | undefined; now?: number;
}): boolean {
  const { rawBody, timestamp, signature, signingSecret } = input;
  if (!signingSecret || !timestamp || !signature || !/^\d{1,12}$/.test(timestamp) || !/^v0=[0-9a-f]{64}$/.test(signature)) return false;
  const nowSeconds = Math.floor((input.now ?? Date.now()) / 1000);
  if (Math.abs(nowSeconds - Number(timestamp)) > MAX_EVENT_AGE_SECONDS) return false;
  const expected = createHmac('sha256', signingSecret).update(`v0:${timestamp}:`).update(rawBody).digest();
  return timingSafeEqual(expected, Buffer.from(signature.slice(3), 'hex'));
}
