import { html, type SafeHtml } from '../html.js';
import type { ChannelCall, ChannelSummary } from '../../payments/schemes/batch-settlement/evm/calls.js';
import { callChargeOf, chargedCumulativeOf } from '../../payments/schemes/batch-settlement/evm/voucher-amounts.js';
import type { LiveSession } from '../sessions.js';
import type { ReceiptCheck } from '../receipt-check.js';
import { page } from './layout.js';
import { badge, shortHex, time, usdc } from './format.js';
import { verification } from './payment.js';

// batch-settlement channels sold through agentgate's middleware: the list (what each holds and where it
// stands), one channel with its paid calls, and one call with its signed receipt and the claim that
// carried it (reached at /console/payments/chc_…, as a payment is).

const row = (label: string, value: SafeHtml | string | number | null | undefined) =>
  html`<div><dt>${label}</dt><dd>${value === null || value === undefined || value === '' ? html`<span class="muted">—</span>` : value}</dd></div>`;

const olderLink = (href: string | undefined, noun: string) => (href ? html`<p class="pager"><a class="button-quiet" href="${href}" rel="next">Older ${noun} →</a></p>` : html``);

export function channelsPage(input: { session: LiveSession; channels: ChannelSummary[]; older?: string; paged: boolean }): SafeHtml {
  return page({
    title: 'Channels', section: 'channels', session: input.session,
    body: html`<div class="page-head">
      <h1>Channels</h1>
      <p class="muted">batch-settlement: a buyer deposits once, pays each call with a voucher, and agentgate claims many calls in one transaction.</p>
    </div>
    ${input.paged ? html`<p><a href="/console/channels">← Newest channels</a></p>` : ''}
    <div class="card table-card">
      <table class="stack-narrow">
        <caption class="sr-only">Channels, newest first</caption>
        <thead><tr><th scope="col">Opened</th><th scope="col">Payer</th><th scope="col" class="num">Deposited</th><th scope="col" class="num">Accepted</th><th scope="col" class="num">Claimed</th><th scope="col" class="num">Refunded</th><th scope="col" class="num">Calls</th><th scope="col">State</th></tr></thead>
        <tbody>${input.channels.length === 0 ? html`<tr><td colspan="8" class="empty">No channels yet.</td></tr>` : input.channels.map((s) => html`<tr data-channel-id="${s.channel._id}">
          <td data-label="Opened" class="nowrap"><a href="/console/channels/${s.channel._id}">${time(s.channel.createdAt)}</a></td>
          <td data-label="Payer">${shortHex(s.channel.payer)}</td>
          <td data-label="Deposited" class="num">${usdc(s.depositedUsdcRaw)} <span class="unit">USDC</span></td>
          <td data-label="Accepted" class="num">${usdc(s.acceptedUsdcRaw)} <span class="unit">USDC</span></td>
          <td data-label="Claimed" class="num">${usdc(s.claimedUsdcRaw)} <span class="unit">USDC</span></td>
          <td data-label="Refunded" class="num">${usdc(s.refundedUsdcRaw)} <span class="unit">USDC</span></td>
          <td data-label="Calls" class="num">${s.callCount}</td>
          <td data-label="State">${badge(s.state)}</td>
        </tr>`)}</tbody>
      </table>
    </div>
    ${olderLink(input.older, 'channels')}`,
  });
}

export function channelPage(input: { session: LiveSession; summary: ChannelSummary; calls: ChannelCall[]; older?: string; paged: boolean }): SafeHtml {
  const { channel: c } = input.summary;
  const s = input.summary;
  return page({
    title: `Channel ${c._id}`, section: 'channels', session: input.session,
    body: html`<p class="crumbs"><a href="/console/channels">← Channels</a></p>
    <div class="page-head">
      <h1>Channel ${badge(s.state)}</h1>
      <p class="muted"><code class="break" id="channel-id">${c._id}</code></p>
    </div>
    <section class="card" aria-labelledby="channel-title">
      <h2 id="channel-title">Channel</h2>
      <dl class="fields">
        ${row('Payer', html`<code class="break">${c.payer}</code>`)}
        ${row('Receiver', html`<code class="break">${c.receiver}</code>`)}
        ${row('Deposited', `${usdc(s.depositedUsdcRaw)} USDC`)}
        ${row('Accepted', `${usdc(s.acceptedUsdcRaw)} USDC in ${s.callCount} call${s.callCount === 1 ? '' : 's'}`)}
        ${row('Claimed', `${usdc(s.claimedUsdcRaw)} USDC`)}
        ${row('Refunded', `${usdc(s.refundedUsdcRaw)} USDC`)}
        ${row('Balance on chain', html`${usdc(c.balance)} USDC <span class="muted">as read ${time(new Date(c.syncedAt))}</span>`)}
        ${row('Withdrawal requested', c.withdrawRequestedAt ? time(new Date(c.withdrawRequestedAt * 1000)) : null)}
        ${row('Opened', time(c.createdAt))}
        ${row('Last call', s.lastCallAt ? time(s.lastCallAt) : null)}
      </dl>
    </section>
    <section class="card table-card" aria-labelledby="calls-title">
      <h2 id="calls-title">Calls</h2>
      ${input.paged ? html`<p><a href="/console/channels/${c._id}">← Newest calls</a></p>` : ''}
      <table class="stack-narrow">
        <caption class="sr-only">Paid calls, newest first</caption>
        <thead><tr><th scope="col">Accepted</th><th scope="col" class="num">Amount</th><th scope="col" class="num">Cumulative</th><th scope="col">Resource</th><th scope="col">Status</th><th scope="col">Claimed in</th></tr></thead>
        <tbody>${input.calls.length === 0 ? html`<tr><td colspan="6" class="empty">No calls yet.</td></tr>` : input.calls.map((call) => html`<tr data-call-id="${call.callId}">
          <td data-label="Accepted" class="nowrap"><a href="/console/payments/${call.callId}">${time(call.voucher.createdAt)}</a></td>
          <td data-label="Amount" class="num">${usdc(callChargeOf(call.voucher).toString())} <span class="unit">USDC</span></td>
          <td data-label="Cumulative" class="num">${usdc(chargedCumulativeOf(call.voucher).toString())} <span class="unit">USDC</span></td>
          <td data-label="Resource" class="resource" title="${call.voucher.resource}">${call.voucher.resource}</td>
          <td data-label="Status">${badge(call.status)}</td>
          <td data-label="Claimed in">${shortHex(call.claim?.txHash)}</td>
        </tr>`)}</tbody>
      </table>
      ${olderLink(input.older, 'calls')}
    </section>`,
  });
}

export function channelCallPage(input: { session: LiveSession; call: ChannelCall; receiptCheck?: ReceiptCheck; explorerUrl?: string }): SafeHtml {
  const { call } = input;
  const v = call.voucher;
  return page({
    title: `Call ${call.callId}`, section: 'channels', session: input.session,
    body: html`<p class="crumbs"><a href="/console/channels/${call.channel._id}">← Channel</a></p>
    <div class="page-head">
      <h1>${usdc(callChargeOf(v).toString())} USDC ${badge(call.status)}</h1>
      <p class="muted"><code id="payment-id">${call.callId}</code></p>
    </div>
    <section class="card" aria-labelledby="fields-title">
      <h2 id="fields-title">Channel call</h2>
      <dl class="fields">
        ${row('Status', badge(call.status))}
        ${row('Amount', `${usdc(callChargeOf(v).toString())} USDC (${callChargeOf(v)} atomic units)`)}
        ${row('Priced by usage', v.byUsage ? `at most ${usdc(v.price)} USDC${call.status === 'held' ? ': charged what the handler reports' : ''}` : null)}
        ${row('Cumulative', `${usdc(chargedCumulativeOf(v).toString())} USDC: what the channel owes after this call`)}
        ${row('Channel', html`<a href="/console/channels/${call.channel._id}"><code class="break">${call.channel._id}</code></a>`)}
        ${row('Payer', html`<code class="break">${call.channel.payer}</code>`)}
        ${row('Recipient', html`<code class="break">${call.channel.receiver}</code>`)}
        ${row('Resource', html`<span class="break">${v.resource}</span>`)}
        ${row('Accepted', time(v.createdAt))}
        ${row('Claimed', call.claim ? time(call.claim.claimedAt) : null)}
        ${row('Claim transaction', call.claim?.txHash ? html`<code class="break" data-claim-tx>${call.claim.txHash}</code>${input.explorerUrl ? html` <a href="${input.explorerUrl}" rel="noopener noreferrer">View on explorer</a>` : html` <span class="muted">(local chain: no explorer)</span>`}` : null)}
      </dl>
    </section>
    <section class="card" aria-labelledby="receipt-title">
      <h2 id="receipt-title">Signed receipt</h2>
      ${v.signedReceipt ? html`${verification(input.receiptCheck)}<p class="muted">Signed when the call was paid; its value is claimed later, in the transaction above.</p><pre class="wrap" tabindex="0" aria-label="Signed receipt JSON">${JSON.stringify(v.signedReceipt, null, 2)}</pre>` : html`<p class="muted">No receipt: this call was accepted before calls had receipts.</p>`}
    </section>`,
  });
}
