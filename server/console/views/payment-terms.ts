import { html, type SafeHtml } from '../html.js';
import type { PaymentDoc } from '../../payments/models.js';
import { unixTime, usdc } from './format.js';

// What the buyer signed, as the payment page shows it for each kind of payment. The record keeps every
// kind in one shape (models.ts: `authorization`, `authorizationNonce`), but the kinds differ in what the
// numbers mean: an EIP-3009 nonce is 32 bytes written in hex, a Permit2 nonce a uint256 the buyer's
// permit carries in decimal, an auth-capture nonce the escrow payment's payer-agnostic hash (kept as the
// decimal BigInt it was read as), and a validAfter of 0 means no lower bound, not "1970-01-01". Some
// kinds have fields of their own: upto's signed maximum, auth-capture's escrow payment and deadlines.

/** The kind of payment, as a person names it: the x402 scheme and how the money moved. */
export function schemeOf(p: Pick<PaymentDoc, 'scheme' | 'assetTransferMethod' | 'escrow'>): string {
  if (p.scheme === 'upto') return 'upto (Permit2): charged what was used, at most the signed maximum';
  if (p.scheme === 'auth-capture') return `auth-capture (escrow, collected through ${p.escrow?.method === 'permit2' ? 'Permit2' : 'ERC-3009'})`;
  return p.assetTransferMethod === 'permit2' ? 'exact (Permit2)' : 'exact (EIP-3009)';
}

/** A Permit2 permit's nonce (upto, exact through Permit2): a uint256, in decimal as the buyer's permit carries it. */
const isPermit2 = (p: Pick<PaymentDoc, 'scheme' | 'assetTransferMethod'>) => p.scheme === 'upto' || p.assetTransferMethod === 'permit2';

/** 32 bytes as 0x and 64 hex digits, whichever way the record wrote them (hex, or a decimal BigInt). */
export function bytes32Hex(value: string): string | undefined {
  try {
    const n = BigInt(value);
    return n >= 0n && n < 1n << 256n ? `0x${n.toString(16).padStart(64, '0')}` : undefined;
  } catch {
    return undefined;
  }
}

/** The nonce's label and value: hex for EIP-3009 and escrow hashes, decimal for a Permit2 permit. */
export function nonceOf(p: Pick<PaymentDoc, 'scheme' | 'assetTransferMethod' | 'authorizationNonce'>): { label: string; value: SafeHtml } {
  if (isPermit2(p)) return { label: 'Permit2 nonce', value: html`<code class="break">${p.authorizationNonce}</code>` };
  // EIP-3009 nonces are stored in hex already; auth-capture's as the decimal of the payment's hash.
  const hex = bytes32Hex(p.authorizationNonce);
  return { label: 'Authorization nonce', value: html`<code class="break">${hex ?? p.authorizationNonce}</code>` };
}

/** validAfter: 0 is "valid at once" (what the v2 clients and our own buyer sign), not the Unix epoch. */
export function validAfter(seconds: string): SafeHtml {
  let zero = false;
  try { zero = BigInt(seconds) === 0n; } catch { /* not a number: shown as it is below */ }
  return zero ? html`<span class="muted" data-no-lower-bound>no lower bound (valid as soon as signed)</span>` : unixTime(seconds);
}

type Row = [label: string, value: SafeHtml | string | null];

/** upto: the most the buyer allowed, beside what was charged (the amount). */
export const maximumRows = (p: PaymentDoc): Row[] =>
  (p.scheme === 'upto' && p.maxAmountUsdcRaw ? [['Signed maximum', `${usdc(p.maxAmountUsdcRaw)} USDC (${p.maxAmountUsdcRaw} atomic units)`]] : []);

/** auth-capture: the escrow payment (its hash), the authorization and void transactions, and its deadlines. */
export function escrowRows(p: PaymentDoc): Row[] {
  const escrow = p.escrow;
  if (p.scheme !== 'auth-capture' || !escrow) return [];
  return [
    ['Escrow payment', html`<code class="break">${escrow.hash}</code>`],
    ['Authorization transaction', escrow.authorizeTx ? html`<code class="break">${escrow.authorizeTx}</code>` : null],
    ...(escrow.voidTx ? [['Void transaction', html`<code class="break">${escrow.voidTx}</code>`] as Row] : []),
    ['Capture deadline', unixTime(escrow.paymentInfo.authorizationExpiry)],
    ['Refundable until', unixTime(escrow.paymentInfo.refundExpiry)],
  ];
}
