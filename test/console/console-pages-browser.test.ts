// The Approvals page and the page of each kind of payment, in Debian's chromium at 1280 and 390 px against
// a real backend, chain and SMTP: an identity under an approval policy sends mail, which waits as drafts;
// the ops person sees each draft's Approve and Reject whole inside its card without scrolling sideways,
// the message and the reason field inside the card on a phone, and dates written as on every other page,
// then rejects one with a reason and approves the other. Each kind of payment (exact by EIP-3009 and by
// Permit2, upto, auth-capture, a batch-settlement channel and its calls) is made by the official clients
// and read on its page: its scheme, its nonce in the form its kind writes it, a validAfter of 0 as "no lower
// bound" rather than 1970, its dates as elsewhere, nothing running off the page.
// Geometry from the browser's boxes (test/console/geometry.ts), not pictures; CONSOLE_SCREENSHOTS=<dir>
// also saves a picture of each page for a person to look at.
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import type { Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { capturedPayment, fundedOperator } from '../support/auth-capture.js';
import type { RunningApp } from '../interop/seller.js';
import { launchChromium, signedInPage } from './browser.js';
import { CONSOLE_TIME, RAW_ISO, contentWiderThan, flushHeadings, outside, overflowing, scrollsSideways } from './geometry.js';
import { channelWithCalls, exactPayment, uptoPayment } from './scheme-payments.js';

const SHOTS = process.env.CONSOLE_SCREENSHOTS;
const shot = async (p: Page, name: string) => { if (SHOTS) await p.screenshot({ path: join(SHOTS, name), fullPage: true }); };
const WIDTHS = [1280, 390] as const;

let server: TestServer;
let browser: Browser;
let org: { platformKey: string; identityKey: string; sellerKey: string; payTo: `0x${string}` };
let shop: RunningApp | undefined;

beforeAll(async () => {
  // The channel sweep runs when the test asks for it (one round), never on its own.
  // The browser first: a machine without one fails here with nothing else started (a server started beside
  // it was never assigned, so never closed, and kept the jest worker alive).
  browser = await launchChromium();
  server = await startTestServer({ TRUST_PROXY: 'true', CHANNEL_SWEEP_EVERY_MS: '600000' });
  const agent = await signUp(server);
  const payTo = privateKeyToAccount(generatePrivateKey()).address;
  expect((await server.request('PUT', '/v0/payments/acceptance', { key: agent.platform_key, body: { enabled: true, payTo } })).status).toBe(200);
  const sellerKey = await server.request('POST', '/v0/payments/seller-keys', { key: agent.platform_key, body: {} });
  org = { platformKey: agent.platform_key, identityKey: agent.identity.rawKey, sellerKey: sellerKey.body.apiKey, payTo };
}, 120_000);
afterAll(async () => {
  await shop?.close();
  await browser?.close();
  await server?.close();
});

/** The `<dd>` of the field labelled `label` on a payment page. */
const field = (p: Page, label: string) => p.locator(`dl.fields dt:text-is("${label}") + dd`);

/** Every `<time>` inside `scope` reads as the console writes times; nothing in it is a raw ISO timestamp. */
async function datesAsElsewhere(p: Page, scope: string): Promise<{ times: string[]; raw: string[] }> {
  const times = await p.locator(`${scope} time`).allTextContents();
  const text = (await p.locator(scope).allInnerTexts()).join('\n');
  return { times: times.filter((t) => !CONSOLE_TIME.test(t.trim())), raw: text.match(new RegExp(RAW_ISO.source, 'g')) ?? [] };
}

describe('Approvals', () => {
  const drafts: Array<{ draftId: string; subject: string }> = [];

  beforeAll(async () => {
    // The org admin holds every send of the org's agents for approval; the agent sends two mails.
    expect((await server.request('PATCH', '/v0/mail/settings', { key: org.platformKey, body: { approval: 'always' } })).status).toBe(200);
    const long = await server.request('POST', '/v0/messages/send', {
      key: org.identityKey,
      body: {
        to: ['accounts-payable.department.of.a.very.long.company.name@subsidiary.example.org'], cc: ['treasury@example.org'],
        subject: 'Wire 500 USDC to the supplier for the March invoice, as agreed on the call with their finance team',
        text: `Please pay invoice INV-2026-0042.\n\nDetails: https://billing.example.org/invoices/${'a1b2c3d4'.repeat(24)}\n\n${'One long line of text that a person writes without ever pressing return, '.repeat(8)}\n\nThanks.`,
      },
    });
    const short = await server.request('POST', '/v0/messages/send', { key: org.identityKey, body: { to: ['bob@example.org'], subject: 'Lunch', text: 'Noon?' } });
    for (const sent of [long, short]) {
      expect([sent.status, sent.body.status]).toEqual([202, 'pending_approval']);
      drafts.push({ draftId: sent.body.draftId, subject: sent.body.subject });
    }
  });

  test.each(WIDTHS)('at %i px: Approve and Reject whole inside each card without scrolling sideways, message and reason inside it, dates as elsewhere', async (width) => {
    const { context, page: p, notFound } = await signedInPage(browser, server, org.platformKey, width);
    try {
      await p.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Approvals' }).click();
      await p.getByRole('heading', { name: 'Approvals', level: 1 }).waitFor();
      const held = p.locator('[data-draft-id]');
      expect(await held.evaluateAll((els) => els.map((el) => el.getAttribute('data-draft-id')))).toEqual(drafts.map((d) => d.draftId));
      for (const { draftId, subject } of drafts) {
        const draft = p.locator(`[data-draft-id="${draftId}"]`);
        // The card the draft is shown in (the draft's own element, or the card around it).
        const card = p.locator(`xpath=//*[@data-draft-id="${draftId}"]/ancestor-or-self::*[contains(concat(" ", @class, " "), " card ")][1]`);
        const parts = {
          subject: draft.getByText(subject, { exact: true }),
          message: draft.locator('pre'),
          approve: draft.getByRole('button', { name: 'Approve and send' }),
          reason: draft.getByLabel(/^Reason/),
          reject: draft.getByRole('button', { name: 'Reject' }),
        };
        for (const [name, part] of Object.entries(parts)) {
          expect([draftId, name, await part.isVisible(), await outside(part, card)]).toEqual([draftId, name, true, []]);
        }
        // Nothing inside the card is wider than it (no part of it hidden behind a scroll).
        expect([draftId, await contentWiderThan(card), await contentWiderThan(parts.message)]).toEqual([draftId, false, false]);
      }
      expect([await scrollsSideways(p), await overflowing(p)]).toEqual([false, []]);
      // Times as every console page writes them, none raw; one per draft (when it was asked).
      expect(await datesAsElsewhere(p, 'main')).toEqual({ times: [], raw: [] });
      expect(await p.locator('[data-draft-id] time').count()).toBe(drafts.length);
      await shot(p, `approvals-${width}.png`);
      expect(notFound).toEqual([]);
    } finally {
      await context.close();
    }
  }, 60_000);

  test('at 390 px a draft is rejected with a reason and the other approved and sent, from the page', async () => {
    const [long, short] = drafts as [typeof drafts[0], typeof drafts[0]];
    const { context, page: p } = await signedInPage(browser, server, org.platformKey, 390);
    try {
      await p.goto(`${server.url}/console/drafts`);
      const draft = p.locator(`[data-draft-id="${long.draftId}"]`);
      await draft.getByLabel(/^Reason/).fill('Unknown payee');
      await draft.getByRole('button', { name: 'Reject' }).click();
      await p.getByText('Rejected: the mail will not be sent.').waitFor();
      await p.locator(`[data-draft-id="${short.draftId}"]`).getByRole('button', { name: 'Approve and send' }).click();
      await p.getByText(/^Approved/).waitFor();
      await p.getByText('Nothing waits for approval.').waitFor();
      const read = async (id: string) => (await server.request('GET', `/v0/drafts/${id}`, { key: org.identityKey })).body;
      expect(await read(long.draftId)).toMatchObject({ status: 'rejected', decision: { decision: 'rejected', reason: 'Unknown payee' } });
      expect(await read(short.draftId)).toMatchObject({ status: 'sent', message: { subject: 'Lunch' } });
      expect([await scrollsSideways(p), await overflowing(p)]).toEqual([false, []]);
    } finally {
      await context.close();
    }
  }, 60_000);
});

describe('each kind of payment on its page', () => {
  const HEX32 = /^0x[0-9a-f]{64}$/;
  const DECIMAL = /^\d{1,78}$/;
  /** A transaction hash, followed by the explorer link or the note that the local chain has none. */
  const TX = /^0x[0-9a-f]{64}(?![0-9a-f])/;
  let ids: Record<'eip3009' | 'permit2' | 'upto' | 'authCapture', string>;
  let channelId: Hex;
  let callId: string;

  beforeAll(async () => {
    const operator = await fundedOperator(server);
    const seller = { platformKey: org.platformKey, sellerKey: org.sellerKey, payTo: org.payTo };
    ids = {
      eip3009: await exactPayment(server, seller, 'eip3009'),
      permit2: await exactPayment(server, seller, 'permit2'),
      upto: await uptoPayment(server, seller, 500_000n, 123_000n),
      authCapture: (await capturedPayment(server, seller, { operator })).id,
    };
    ({ shop, channelId } = await channelWithCalls(server, seller, 2));
    // One sweep round claims the calls on chain, so a call's page has its claim.
    await server.app.payments.batchSettlement.sweep.run({ everyMs: 1, idleRefundMs: 24 * 3_600_000, round: `console-${process.pid}-${Date.now()}` }, (orgId) => server.app.payments.acceptance.accepting(orgId));
    const calls = await server.request('GET', `/v0/payments/channels/${channelId}/calls`, { key: org.sellerKey });
    expect(calls.body.calls.map((c: any) => typeof c.txHash)).toEqual(['string', 'string']);
    callId = calls.body.calls[0].id;
  }, 180_000);

  /** What a kind's page must say: its scheme, its nonce's label and form, and a few fields of its own. */
  const expected = () => [
    {
      kind: 'auth-capture', id: ids.authCapture, scheme: 'auth-capture (escrow, collected through ERC-3009)', nonce: ['Authorization nonce', HEX32] as const,
      own: { 'Escrow payment': HEX32, 'Authorization transaction': TX, 'Capture transaction': TX, 'Capture deadline': CONSOLE_TIME, 'Refundable until': CONSOLE_TIME },
    },
    { kind: 'eip3009', id: ids.eip3009, scheme: 'exact (EIP-3009)', nonce: ['Authorization nonce', HEX32] as const, own: {} },
    { kind: 'permit2', id: ids.permit2, scheme: 'exact (Permit2)', nonce: ['Permit2 nonce', DECIMAL] as const, own: {} },
    { kind: 'upto', id: ids.upto, scheme: 'upto (Permit2)', nonce: ['Permit2 nonce', DECIMAL] as const, own: { Amount: /^0\.123 USDC/, 'Signed maximum': /^0\.5 USDC/ } },
  ];

  test.each(WIDTHS)('at %i px: scheme, nonce in its kind\'s form, validAfter 0 as no lower bound, dates as elsewhere, nothing off the page', async (width) => {
    const { context, page: p, notFound } = await signedInPage(browser, server, org.platformKey, width);
    try {
      for (const kind of expected()) {
        await p.goto(`${server.url}/console/payments/${kind.id}`);
        await p.getByRole('heading', { name: 'Payment', exact: true }).waitFor();
        // Every kind here was signed with validAfter "0" (the v2 clients all do): no lower bound, not 1970.
        expect([kind.kind, (await field(p, 'Valid after').textContent())!.trim()]).toEqual([kind.kind, expect.stringMatching(/^no lower bound/)]);
        const [nonceLabel, nonceForm] = kind.nonce;
        expect([kind.kind, (await field(p, nonceLabel).textContent())!.trim()]).toEqual([kind.kind, expect.stringMatching(nonceForm)]);
        expect([kind.kind, (await field(p, 'Scheme').textContent())!.trim()]).toEqual([kind.kind, expect.stringContaining(kind.scheme)]);
        expect([kind.kind, (await field(p, 'Valid before').textContent())!.trim()]).toEqual([kind.kind, expect.stringMatching(CONSOLE_TIME)]);
        for (const [label, form] of Object.entries(kind.own)) {
          expect([kind.kind, label, (await field(p, label).textContent())!.trim()]).toEqual([kind.kind, label, expect.stringMatching(form)]);
        }
        // No field shows a 1970 date (a 0 read as a time). The date, not the digits: a random nonce, address or
        // hash holds "1970" in about one page in a hundred. Named by field, so a failure says which.
        const epochDates = await p.locator('dl.fields dt').evaluateAll((dts) => dts
          .map((dt) => [dt.textContent!.trim(), dt.nextElementSibling?.textContent?.trim() ?? ''])
          .filter(([, value]) => /\b1970-\d\d-\d\d\b/.test(value!)));
        expect([kind.kind, epochDates]).toEqual([kind.kind, []]);
        expect([kind.kind, await datesAsElsewhere(p, 'dl.fields')]).toEqual([kind.kind, { times: [], raw: [] }]);
        expect([kind.kind, await scrollsSideways(p), await overflowing(p), await flushHeadings(p)]).toEqual([kind.kind, false, [], []]);
        const cards = await p.locator('main .card').evaluateAll((els) => els.map((el) => el.scrollWidth <= el.clientWidth));
        expect([kind.kind, cards.every(Boolean)]).toEqual([kind.kind, true]);
        await shot(p, `payment-${kind.kind}-${width}.png`);
      }
      // The channel list, the channel and a call: nothing off the page, dates as elsewhere.
      for (const [name, path] of [['channels', '/console/channels'], ['channel', `/console/channels/${channelId}`], ['call', `/console/payments/${callId}`]] as const) {
        await p.goto(server.url + path);
        expect([name, await scrollsSideways(p), await overflowing(p), await flushHeadings(p)]).toEqual([name, false, [], []]);
        const boxes = await p.locator('main .card, main .table-card').evaluateAll((els) => els.map((el) => el.scrollWidth <= el.clientWidth));
        expect([name, boxes.every(Boolean)]).toEqual([name, true]);
        expect([name, await datesAsElsewhere(p, 'main .card:not(:has(pre))')]).toEqual([name, { times: [], raw: [] }]);
        await shot(p, `${name}-${width}.png`);
      }
      expect((await field(p, 'Claim transaction').textContent())!.trim()).toMatch(TX);
      expect(notFound).toEqual([]);
    } finally {
      await context.close();
    }
  }, 120_000);
});
