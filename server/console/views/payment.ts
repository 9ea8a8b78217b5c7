import { html, type SafeHtml } from '../html.js';
import type { EndpointDoc, PaymentDoc } from '../../payments/models.js';
import { deliveryState } from '../../webhooks/state.js';
import type { DeliveryDoc } from '../../webhooks/models.js';
import type { LiveSession } from '../sessions.js';
import type { ReceiptCheck } from '../receipt-check.js';
import { csrfField, page } from './layout.js';
import { badge, time, unixTime, usdc } from './format.js';
import { escrowRows, maximumRows, nonceOf, schemeOf, validAfter } from './payment-terms.js';

/** A refund as the payment page lists it. */
export interface RefundRow { id: string; amountUsdcRaw: string; reason: string; status: string; txHash: string | null; createdAt: string }

export interface PaymentView {
  session: LiveSession;
  payment: PaymentDoc;
  /** A payment agentgate can refund (auth-capture; exact paid to an org's wallet): its refunds, oldest first. */
  refunds?: RefundRow[];
  /** Whether agentgate can refund it (the Refunds section is shown). */
  refundable?: boolean;
  /** A refund that was refused just now (shown above the form). */
  refundError?: string;
  explorerUrl?: string;
  receiptCheck?: ReceiptCheck;
  offerReceiptCheck?: ReceiptCheck;
  delivery?: DeliveryDoc;
  /** The payment's endpoint, also when it was deleted since. */
  endpoint?: EndpointDoc;
}

const row = (label: string, value: SafeHtml | string | number | null | undefined) =>
  html`<div><dt>${label}</dt><dd>${value === null || value === undefined || value === '' ? html`<span class="muted">—</span>` : value}</dd></div>`;

export function verification(check: ReceiptCheck | undefined): SafeHtml {
  if (!check) return html``;
  return html`<p class="verification ${check.valid ? 'is-valid' : 'is-invalid'}" data-receipt-check="${check.valid ? 'valid' : 'invalid'}">
    ${badge(check.valid ? 'valid' : 'invalid')}
    ${check.valid ? 'Signature verified against' : `Not verified${check.reason ? ` (${check.reason})` : ''}; checked against`}
    <code>${check.keyId}</code> from <a href="/.well-known/did.json">/.well-known/did.json</a>
  </p>`;
}

/**
 * "Retry now", for the platform key only: a pending or failing delivery gets its next attempt at once, a
 * failed or delivered one a new round (webhook-service.ts: retryNow). `back` is where the post returns to.
 */
export function retryForm(session: LiveSession, delivery: Pick<DeliveryDoc, '_id' | 'status' | 'round' | 'attemptCount'>, back: string): SafeHtml | '' {
  if (session.role !== 'admin') return '';
  const label = delivery.status === 'delivered' ? 'Send again' : 'Retry now';
  return html`<form method="post" action="/console/deliveries/${delivery._id}/retry" class="inline-form">${csrfField(session)}<input type="hidden" name="back" value="${back}"><input type="hidden" name="round" value="${delivery.round ?? 0}"><input type="hidden" name="attempt" value="${delivery.attemptCount}"><button type="submit" class="button">${label}</button></form>`;
}

/** A compact JWS as a person reads it: header and claims decoded (the signature stays as it is). */
function decodedJws(compact: string): SafeHtml {
  const [header, payload] = compact.split('.');
  const decode = (part: string | undefined) => {
    try { return JSON.stringify(JSON.parse(Buffer.from(part ?? '', 'base64url').toString('utf8')), null, 2); } catch { return '(not JSON)'; }
  };
  return html`<div class="jws">
    <div><h4>Header</h4><pre tabindex="0" aria-label="JWS header">${decode(header)}</pre></div>
    <div><h4>Claims</h4><pre tabindex="0" aria-label="JWS claims">${decode(payload)}</pre></div>
  </div>
  <details><summary>Compact JWS</summary><pre class="wrap" tabindex="0" aria-label="Offer receipt JWS">${compact}</pre></details>`;
}

/** The webhook delivery with its attempts: also served alone, for the live refresh while it is pending. */
export function deliverySection(session: LiveSession, payment: PaymentDoc, delivery: DeliveryDoc | undefined): SafeHtml {
  if (!delivery) {
    const why = payment.webhook ? `the delivery is ${payment.webhook.status}` : 'the endpoint had no webhook URL when this payment settled';
    return html`<p class="muted">No webhook delivery: ${why}.</p>`;
  }
  const state = deliveryState(delivery);
  return html`<div class="delivery-head">
      <p>Delivery <code>${delivery._id}</code> ${badge(state)} · ${delivery.attemptCount} attempt${delivery.attemptCount === 1 ? '' : 's'}
      ${delivery.status === 'pending' && delivery.nextAttemptAt ? html` · next attempt ${time(delivery.nextAttemptAt)}` : ''}</p>
      ${retryForm(session, delivery, `/console/payments/${payment._id}`)}
    </div>
    ${delivery.lastError ? html`<p class="muted">Last error: ${delivery.lastError}</p>` : ''}
    <div class="table-scroll"><table class="stack-narrow">
      <caption class="sr-only">Delivery attempts, oldest first</caption>
      <thead><tr><th scope="col">#</th><th scope="col">Time</th><th scope="col">URL</th><th scope="col">Result</th><th scope="col" class="num">Duration</th></tr></thead>
      <tbody>${delivery.attempts.length === 0 ? html`<tr><td colspan="5" class="empty">No attempt yet.</td></tr>` : delivery.attempts.map((a, i) => html`<tr data-attempt="${i + 1}">
        <td data-label="#">${i + 1}</td><td data-label="Time" class="nowrap">${time(a.at)}</td><td data-label="URL" class="resource">${a.url}</td>
        <td data-label="Result">${a.statusCode !== undefined ? html`${badge(a.statusCode >= 200 && a.statusCode < 300 ? 'delivered' : 'failed')} HTTP ${a.statusCode}` : html`${badge('failed')} ${a.error ?? ''}`}</td>
        <td data-label="Duration" class="num">${a.durationMs} ms</td></tr>`)}</tbody>
    </table></div>`;
}

export function paymentPage(view: PaymentView): SafeHtml {
  const p = view.payment;
  const nonce = nonceOf(p);
  return page({
    title: `Payment ${p._id}`, section: 'payments', session: view.session,
    body: html`<p class="crumbs"><a href="/console/payments">← Payments</a></p>
    <div class="page-head">
      <h1>${usdc(p.amountUsdcRaw)} USDC ${badge(p.status)}</h1>
      <p class="muted"><code id="payment-id">${p._id}</code></p>
    </div>
    <section class="card" aria-labelledby="fields-title">
      <h2 id="fields-title">Payment</h2>
      <dl class="fields">
        ${row('Status', badge(p.status))}
        ${row('Scheme', schemeOf(p))}
        ${row('Amount', `${usdc(p.amountUsdcRaw)} USDC (${p.amountUsdcRaw} atomic units)`)}
        ${maximumRows(p).map(([label, value]) => row(label, value))}
        ${row('Payer', html`<code class="break">${p.payerAddress}</code> <a href="/console/payments?payer=${p.payerAddress}">its payments</a>`)}
        ${row('Recipient', html`<code class="break">${p.recipientAddress}</code>`)}
        ${row('Resource', html`<span class="break">${p.resourceUrl}</span>`)}
        ${row('Endpoint', !p.endpointId ? 'not registered (paid through the facilitator API)' : view.endpoint && !view.endpoint.deletedAt
          ? html`<a href="/console/endpoints#${p.endpointId}" class="break">${view.endpoint.url}</a> · <a href="/console/payments?endpoint=${p.endpointId}">its payments</a>`
          : html`<code>${p.endpointId}</code> <span class="muted">(deleted)</span>`)}
        ${row('Network', `${p.network} (chain ${p.chainId})`)}
        ${row('Asset', html`<code class="break">${p.asset}</code>`)}
        ${row(p.scheme === 'auth-capture' ? 'Capture transaction' : 'Transaction', p.txHash ? html`<code class="break">${p.txHash}</code>${view.explorerUrl ? html` <a href="${view.explorerUrl}" rel="noopener noreferrer">View on explorer</a>` : html` <span class="muted">(local chain: no explorer)</span>`}` : null)}
        ${escrowRows(p).map(([label, value]) => row(label, value))}
        ${row('Failure reason', p.failureReason)}
        ${row('x402 version', p.x402Version)}
        ${row(nonce.label, nonce.value)}
        ${row('Valid after', validAfter(p.authorization.validAfter))}
        ${row('Valid before', unixTime(p.authorization.validBefore))}
        ${p.status === 'held' && p.holdExpiresAt ? row('Hold expires', time(p.holdExpiresAt)) : ''}
        ${row('Created', time(p.createdAt))}
        ${row('Submitted', p.submittedAt ? time(p.submittedAt) : null)}
        ${row('Settled', p.settledAt ? time(p.settledAt) : null)}
      </dl>
    </section>
    ${refundSection(view)}
    <section class="card" aria-labelledby="receipt-title">
      <h2 id="receipt-title">Signed receipt</h2>
      ${p.signedReceipt ? html`${verification(view.receiptCheck)}<pre class="wrap" tabindex="0" aria-label="Signed receipt JSON">${JSON.stringify(p.signedReceipt, null, 2)}</pre>` : html`<p class="muted">No receipt: receipts are signed when a payment settles.</p>`}
      ${p.offerReceipt ? html`<h3>Offer receipt (JWS)</h3>${verification(view.offerReceiptCheck)}${decodedJws(p.offerReceipt.signature)}` : ''}
    </section>
    <section class="card" aria-labelledby="webhook-title">
      <h2 id="webhook-title">Webhook</h2>
      <div id="delivery" data-live="/console/payments/${p._id}/delivery">${deliverySection(view.session, p, view.delivery)}</div>
    </section>`,
  });
}

/**
 * Refunds of a payment agentgate can refund (auth-capture, or exact paid to an org's wallet): the ones made, and for the platform key a form (amount, reason)
 * whose submit leads to a confirmation page; only that page's button refunds (refundConfirmPage).
 */
function refundSection(view: PaymentView): SafeHtml | '' {
  const p = view.payment;
  if (!view.refundable) return '';
  const left = BigInt(p.amountUsdcRaw) - BigInt(p.refundedUsdcRaw ?? '0');
  const refunds = view.refunds ?? [];
  const canRefund = view.session.role === 'admin' && p.status === 'settled' && left > 0n;
  return html`<section class="card" aria-labelledby="refunds-title">
      <h2 id="refunds-title">Refunds</h2>
      <p>${usdc(p.refundedUsdcRaw ?? '0')} of ${usdc(p.amountUsdcRaw)} USDC refunded${p.status === 'settled' ? html` · ${usdc(left.toString())} USDC can still be refunded` : html` · ${p.status === 'voided' ? 'the authorization was voided: nothing was charged' : 'only a captured payment can be refunded'}`}.</p>
      ${view.refundError ? html`<p class="alert" role="alert" data-refund-error>${view.refundError}</p>` : ''}
      ${refunds.length === 0 ? '' : html`<div class="table-scroll"><table class="stack-narrow" data-refunds>
        <caption class="sr-only">Refunds, oldest first</caption>
        <thead><tr><th scope="col">Time</th><th scope="col" class="num">Amount</th><th scope="col">Reason</th><th scope="col">Status</th><th scope="col">Transaction</th></tr></thead>
        <tbody>${refunds.map((r) => html`<tr data-refund="${r.id}"><td data-label="Time" class="nowrap">${time(new Date(r.createdAt))}</td><td data-label="Amount" class="num">${usdc(r.amountUsdcRaw)} USDC</td><td data-label="Reason">${r.reason}</td><td data-label="Status">${badge(r.status)}</td><td data-label="Transaction">${r.txHash ? html`<code class="break">${r.txHash}</code>` : html`<span class="muted">—</span>`}</td></tr>`)}</tbody>
      </table></div>`}
      ${canRefund ? html`<form method="post" action="/console/payments/${p._id}/refund" class="refund-form">${csrfField(view.session)}
        <label>Amount (USDC) <input name="amount" inputmode="decimal" placeholder="${usdc(left.toString())}" aria-describedby="refund-amount-help"></label>
        <span id="refund-amount-help" class="muted">Empty: all ${usdc(left.toString())} USDC that is left.</span>
        <label>Reason <input name="reason" required maxlength="500"></label>
        <button type="submit" class="button">Refund…</button>
      </form>` : ''}
    </section>`;
}

/** The confirmation a refund waits for: what goes back to whom, and the one button that sends it. */
export function refundConfirmPage(input: { session: LiveSession; payment: PaymentDoc; amountUsdcRaw: string; amount?: string; reason: string; idempotencyKey: string }): SafeHtml {
  const p = input.payment;
  return page({
    title: `Refund ${p._id}?`, section: 'payments', session: input.session,
    body: html`<p class="crumbs"><a href="/console/payments/${p._id}">← Payment</a></p>
    <section class="card" aria-labelledby="confirm-title">
      <h1 id="confirm-title">Refund ${usdc(input.amountUsdcRaw)} USDC?</h1>
      <p data-refund-confirm>${usdc(input.amountUsdcRaw)} USDC of payment <code>${p._id}</code> goes back to <code class="break">${p.payerAddress}</code> on chain. This cannot be undone.</p>
      <p>Reason: ${input.reason}</p>
      <form method="post" action="/console/payments/${p._id}/refund/confirm" class="inline-form">${csrfField(input.session)}
        ${input.amount ? html`<input type="hidden" name="amount" value="${input.amount}">` : ''}
        <input type="hidden" name="reason" value="${input.reason}">
        <input type="hidden" name="idempotencyKey" value="${input.idempotencyKey}">
        <button type="submit" class="button-danger">Confirm refund</button>
      </form>
      <a href="/console/payments/${p._id}" class="button-quiet">Cancel</a>
    </section>`,
  });
}
