// The console in a real browser (Debian's chromium through playwright-core) against a real backend, chain
// and webhook receiver: sign in through the form, watch a paid request appear without a reload, check its
// receipts, retry a failed webhook and see the new attempt, sign out and be refused. Then the ops pages at
// 1280 px and 390 px: totals, chart, search, pages, CSV, webhooks by state, delete and revoke behind a
// confirmation, copy buttons, the payment page, activity, with no page scrolling sideways.
// CONSOLE_SCREENSHOTS=docs/images npm test -- test/console/console-browser refreshes the pictures of docs/sellers/console.md.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { startTestServer, type TestServer } from '../support/server.js';
import { pay, sellerWithWebhook, waitForDelivery, type WebhookSeller } from '../webhooks/seller.js';
import { startReceiver } from '../webhooks/receiver.js';
import { openStorefront } from '../support/storefront.js';
import { launchChromium, signedInPage as signedInAs } from './browser.js';
import { CONSOLE_TIME, flushHeadings, overflowing, scrollsSideways } from './geometry.js';
import { consoleGet } from './http-client.js';
import { capturedPayment, fundedOperator } from '../support/auth-capture.js';
import { usdcBalance } from '../support/chain.js';

const SHOTS = process.env.CONSOLE_SCREENSHOTS;
const shot = async (p: Page, name: string) => { if (SHOTS) await p.screenshot({ path: join(SHOTS, name), fullPage: true }); };

// The retry schedule in units of 5 ms: a receiver answering 500 exhausts it in about two seconds.
const FAILING_ATTEMPTS = 6;

let server: TestServer;
let browser: Browser;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
let seller: WebhookSeller;
let page: Page;

beforeAll(async () => {
  // The browser first: a machine without one fails here with nothing else started (a server started beside
  // it was never assigned, so never closed, and kept the jest worker alive).
  browser = await launchChromium();
  server = await startTestServer({ TRUST_PROXY: 'true', WEBHOOK_RETRY_BASE_MS: '5' });
  receiver = await startReceiver(Array(FAILING_ATTEMPTS).fill(500), 200);
  seller = await sellerWithWebhook(server, receiver.url);
  page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await receiver?.close();
  await server?.close();
});

test('sign in, live payments, verified receipt, webhook retry, sign out', async () => {
  // 1. Signs in with the platform key through the form (a console page first sends us there).
  await page.goto(`${server.url}/console/payments`);
  expect(new URL(page.url()).pathname).toBe('/console/sign-in');
  await page.getByLabel('Platform key').fill(seller.platformKey);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Payments' }).waitFor();
  expect(new URL(page.url()).pathname).toBe('/console/payments');
  // The key is nowhere in the browser: not in a cookie, not in storage.
  const cookies = await page.context().cookies();
  expect(cookies.map((c) => c.name)).toEqual(['agentgate_console']);
  expect(cookies[0]).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/console' });
  expect(JSON.stringify(cookies)).not.toContain(seller.platformKey);
  expect(await page.evaluate('JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage })')).toBe('{}{}');

  // 2. A paid request settles on chain while the page is open.
  // (Expressions as strings: the test's TypeScript has no DOM types.)
  await page.evaluate('window.stillHere = true');
  const paymentId = await pay(server, seller);

  // 3. The payment appears by itself: the same document (no reload), a new row.
  const row = page.locator(`tr[data-payment-id="${paymentId}"]`);
  await row.waitFor({ timeout: 20_000 });
  expect(await page.evaluate('window.stillHere')).toBe(true);
  await expect(row.textContent()).resolves.toContain('0.01');
  await expect(row.textContent()).resolves.toContain('settled');

  // The webhook receiver answered 500 to every attempt of the schedule: the delivery failed.
  await waitForDelivery(server, seller, paymentId, (d) => d.status === 'failed', 60_000);

  // 4. Opens it: both receipts verified against the service's DID document, with the key id.
  await row.getByRole('link').first().click();
  await page.getByRole('heading', { name: 'Signed receipt' }).waitFor();
  expect(new URL(page.url()).pathname).toBe(`/console/payments/${paymentId}`);
  const checks = page.locator('[data-receipt-check]');
  await expect(checks.count()).resolves.toBe(2);
  for (const check of await checks.all()) {
    expect(await check.getAttribute('data-receipt-check')).toBe('valid');
    expect(await check.textContent()).toContain(server.app.serviceKey.keyId);
  }

  // 5. Retries the failed webhook and sees the new attempt arrive (the delivery section refreshes itself).
  const delivery = page.locator('#delivery');
  await expect(delivery.locator('tr[data-attempt]').count()).resolves.toBe(FAILING_ATTEMPTS);
  expect(await delivery.textContent()).toContain('failed');
  await page.getByRole('button', { name: 'Retry now' }).click();
  const newAttempt = delivery.locator(`tr[data-attempt="${FAILING_ATTEMPTS + 1}"]`);
  await newAttempt.waitFor({ timeout: 20_000 });
  expect(await newAttempt.textContent()).toContain('HTTP 200');
  await delivery.getByText('delivered', { exact: true }).first().waitFor();
  expect(receiver.received).toHaveLength(FAILING_ATTEMPTS + 1);

  // 6. Signs out; the console is closed to this browser and to the old cookie.
  const oldCookie = `agentgate_console=${(await page.context().cookies())[0]!.value}`;
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByText('You are signed out.').waitFor();
  await page.goto(`${server.url}/console/payments/${paymentId}`);
  expect(new URL(page.url()).pathname).toBe('/console/sign-in');
  const replay = await consoleGet(server, `/console/payments/${paymentId}`, oldCookie);
  expect(replay.status).toBe(303);
  expect(replay.location).toBe('/console/sign-in');
  expect(replay.text).not.toContain(paymentId);
}, 180_000);

test('refunds an auth-capture payment: the Refund button asks for confirmation, Cancel refunds nothing, Confirm refunds on chain', async () => {
  const operator = await fundedOperator(server);
  const { id, buyer } = await capturedPayment(server, seller, { operator });
  const { context, page: p } = await signedInPage(1280);
  try {
    await p.goto(`${server.url}/console/payments/${id}`);
    await p.getByRole('heading', { name: 'Refunds' }).waitFor();
    const before = await usdcBalance(buyer.address);
    // The form's labels stand one over the other, each over its field: the word "Reason" starts where
    // "Amount" does, not run on after the amount's help text (the words' own boxes, not their labels').
    const wordAt = (n: number) => p.evaluate(`(() => { const r = document.createRange(); r.selectNodeContents(document.querySelectorAll('.refund-form label')[${n}].firstChild);
      const b = r.getBoundingClientRect(); return [Math.round(b.left), Math.round(b.top)]; })()`) as Promise<[number, number]>;
    const [[amountX, amountY], [reasonX, reasonY]] = await Promise.all([wordAt(0), wordAt(1)]);
    expect([reasonX, reasonY > amountY]).toEqual([amountX, true]);

    // The form leads to a confirmation; Cancel goes back with nothing refunded.
    await p.getByLabel('Amount (USDC)').fill('0.4');
    await p.getByLabel('Reason').fill('arrived late');
    await p.getByRole('button', { name: 'Refund…' }).click();
    await p.getByRole('heading', { name: /Refund 0\.4 USDC\?/ }).waitFor();
    expect(await p.locator('[data-refund-confirm]').textContent()).toContain(buyer.address);
    expect(await usdcBalance(buyer.address)).toBe(before);
    await p.getByRole('link', { name: 'Cancel' }).click();
    await p.getByRole('heading', { name: 'Refunds' }).waitFor();
    expect(await usdcBalance(buyer.address)).toBe(before);
    await expect(p.locator('tr[data-refund]').count()).resolves.toBe(0);

    // Confirmed: refunded on chain, listed with its transaction.
    await p.getByLabel('Amount (USDC)').fill('0.4');
    await p.getByLabel('Reason').fill('arrived late');
    await p.getByRole('button', { name: 'Refund…' }).click();
    await p.getByRole('button', { name: 'Confirm refund' }).click();
    const refunded = p.locator('tr[data-refund]');
    await refunded.first().waitFor();
    expect(await refunded.first().textContent()).toMatch(/0\.4.*arrived late.*refunded.*0x[0-9a-f]{64}/s);
    expect(await usdcBalance(buyer.address)).toBe(before + 400_000n);
    await shot(p, 'payment-refund.png');

    // More than is left is refused on the page, before anything moves.
    await p.getByLabel('Amount (USDC)').fill('0.7');
    await p.getByLabel('Reason').fill('too much');
    await p.getByRole('button', { name: 'Refund…' }).click();
    expect(await p.locator('[data-refund-error]').textContent()).toContain('At most 0.6 USDC');
    expect(await usdcBalance(buyer.address)).toBe(before + 400_000n);
  } finally {
    await context.close();
  }
}, 120_000);

/** A fresh browser context `width` px wide, signed in with the seller's platform key. */
const signedInPage = (width: number) => signedInAs(browser, server, seller.platformKey, width);

/** Old settled payments for the chart in the docs' pictures only (the real ones all settle today). */
async function illustrationHistory(): Promise<void> {
  const docs = Array.from({ length: 40 }, (_, i) => {
    const at = new Date(Date.now() - (1 + (i % 13)) * 86_400_000 - i * 60_000);
    const nonce = `0x${randomBytes(32).toString('hex')}`;
    const payer = `0x${randomBytes(20).toString('hex')}`;
    return {
      _id: `pay_demo${i.toString().padStart(3, '0')}${randomBytes(3).toString('hex')}`, orgId: seller.orgId, direction: 'in', endpointId: seller.endpointId, network: 'base-sepolia', chainId: 84532,
      asset: `0x${randomBytes(20).toString('hex')}`, payerAddress: payer, recipientAddress: seller.payTo, amountUsdcRaw: String(10_000 * (1 + (i % 4))), resourceUrl: seller.resource,
      x402Version: 1, authorizationKey: `demo:${nonce}`, authorizationNonce: nonce, authorization: { from: payer, to: seller.payTo, value: '10000', validAfter: '0', validBefore: '1893456000', nonce },
      signature: '0x00', status: i % 9 === 4 ? 'failed' : 'settled', createdAt: at, ...(i % 9 === 4 ? { failureReason: 'transfer reverted' } : { txHash: `0x${randomBytes(32).toString('hex')}`, settledAt: at }),
    };
  });
  await server.app.payments.records.payments.insertMany(docs);
}

test('the ops pages at 1280 px: totals, chart, search, CSV, webhooks, delete, revoke, copy, activity', async () => {
  const paymentId = await pay(server, seller);
  if (SHOTS) await illustrationHistory();
  const { context, page: p, notFound } = await signedInPage(1280);
  try {
    // Payments: totals and the chart for the range, "showing 1–n of N", the webhook column, the export.
    await p.goto(`${server.url}/console/payments`);
    const count = Number(await p.locator('[data-total="count"]').textContent());
    expect(count).toBeGreaterThanOrEqual(2);
    await expect(p.locator('.showing').textContent()).resolves.toMatch(new RegExp(`Showing 1–${Math.min(count, 25)} of ${count} payments`));
    expect(await p.locator('svg[role="img"] rect.chart-bar').count()).toBe(30);
    await expect(p.locator(`tr[data-payment-id="${paymentId}"] [data-webhook]`).textContent()).resolves.toMatch(/pending|failing|failed|delivered/);
    expect(await scrollsSideways(p)).toBe(false);
    await shot(p, 'console.png');
    const [download] = await Promise.all([p.waitForEvent('download'), p.getByRole('link', { name: 'Export CSV' }).click()]);
    expect(download.suggestedFilename()).toMatch(/^payments-\d{4}-\d{2}-\d{2}\.csv$/);

    // Search by payment id.
    await p.getByLabel('Search').fill(paymentId);
    await p.getByRole('button', { name: 'Apply' }).click();
    await p.waitForURL(/q=pay_/);
    expect(await p.locator('tr[data-payment-id]').count()).toBe(1);

    // Dates typed as the tables print them; From after To is shown on the form, the field marked.
    await p.goto(`${server.url}/console/payments`);
    const from = p.getByRole('textbox', { name: 'From (UTC)' });
    const to = p.getByRole('textbox', { name: 'To (UTC, inclusive)' });
    expect(await from.getAttribute('placeholder')).toBe('YYYY-MM-DD');
    await expect(p.getByRole('button', { name: 'Choose a date for From (UTC)' }).count()).resolves.toBe(1);
    await from.fill('2026-03-05');
    await to.fill('2026-03-01');
    await p.getByRole('button', { name: 'Apply' }).click();
    await p.locator('#err-to').waitFor();
    expect(await to.getAttribute('aria-invalid')).toBe('true');
    expect(await to.inputValue()).toBe('2026-03-01');
    expect(await p.getByRole('heading', { name: 'Payments' }).count()).toBe(1);

    // Webhooks by state.
    await p.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Webhooks' }).click();
    await p.getByRole('heading', { name: 'Webhooks' }).waitFor();
    await waitForDelivery(server, seller, paymentId, (d) => d.status === 'delivered' || d.status === 'failed', 60_000);
    await p.reload();
    expect(await p.locator('tr[data-delivery-id]').count()).toBeGreaterThanOrEqual(2);
    await p.getByRole('navigation', { name: 'Deliveries by state' }).getByRole('link', { name: /delivered/ }).click();
    await p.waitForURL(/state=delivered/);
    const states = await p.locator('tr[data-delivery-id]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-state')));
    expect(states.length).toBeGreaterThanOrEqual(1);
    expect(new Set(states)).toEqual(new Set(['delivered']));
    expect(await scrollsSideways(p)).toBe(false);
    // The whole table is on screen, its retry buttons included, without scrolling it.
    expect(await p.locator('.table-card').evaluate((card) => card.scrollWidth <= card.clientWidth)).toBe(true);
    await expect(p.getByRole('button', { name: 'Send again' }).first().isVisible()).resolves.toBe(true);
    await shot(p, 'console-webhooks.png');

    // A new seller key is shown whole, and its copy button puts it in the clipboard.
    await p.goto(`${server.url}/console/seller-keys`);
    await p.getByLabel('Name').fill('browser test');
    await p.getByRole('button', { name: 'Create key' }).click();
    const secret = (await p.locator('#secret').textContent())!.trim();
    expect(secret).toMatch(/^loid-[A-Za-z0-9_-]{43}$/);
    await p.getByRole('button', { name: 'Copy seller key' }).click();
    await p.getByText('Copied to the clipboard.').waitFor();
    expect(await p.evaluate('navigator.clipboard.readText()')).toBe(secret);

    // Revoking asks first.
    await p.goto(`${server.url}/console/seller-keys`);
    await p.getByRole('link', { name: `Revoke key ${secret.slice(0, 12)}` }).click();
    await p.getByRole('heading', { name: 'Revoke this seller key?' }).waitFor();
    await p.getByRole('button', { name: 'Revoke key' }).click();
    await p.getByRole('heading', { name: 'Seller keys' }).waitFor();
    expect(await p.getByRole('link', { name: `Revoke key ${secret.slice(0, 12)}` }).count()).toBe(0);

    // Deleting an endpoint asks first.
    const doomed = (await openStorefront(server, seller, { 'GET /doomed': { price: '$0.02' } })).endpoint('/doomed');
    await p.goto(`${server.url}/console/endpoints`);
    await p.getByRole('link', { name: `Delete ${doomed.url}` }).click();
    await p.getByRole('heading', { name: 'Delete this endpoint?' }).waitFor();
    await p.getByRole('button', { name: 'Delete endpoint' }).click();
    await p.getByText('Endpoint deleted.').waitFor();
    expect(await p.getByText(doomed.url).count()).toBe(0);

    // Activity: the Target column is on screen at 1280 px, without scrolling the table.
    await p.goto(`${server.url}/console/activity`);
    const target = await p.getByRole('columnheader', { name: 'Target' }).boundingBox();
    expect(target).not.toBeNull();
    expect(target!.x + target!.width).toBeLessThanOrEqual(1280);
    expect(await p.locator('.table-card').evaluate((card) => card.scrollWidth <= card.clientWidth)).toBe(true);
    expect(await scrollsSideways(p)).toBe(false);

    // The payment: human dates, the endpoint as a link, the JWS decoded, nothing running off the page.
    await p.goto(`${server.url}/console/payments/${paymentId}`);
    await expect(p.locator('dt:text-is("Valid before") + dd time').textContent()).resolves.toMatch(CONSOLE_TIME);
    // Signed with a lower bound (a minute ago): that is a time too (a validAfter of 0 reads "no lower bound": console-pages-browser.test.ts).
    await expect(p.locator('dt:text-is("Valid after") + dd time').textContent()).resolves.toMatch(CONSOLE_TIME);
    await expect(p.getByRole('link', { name: seller.resource }).getAttribute('href')).resolves.toBe(`/console/endpoints#${seller.endpointId}`);
    await expect(p.getByLabel('JWS claims').textContent()).resolves.toContain('"resourceUrl"');
    expect(await scrollsSideways(p)).toBe(false);
    await shot(p, 'console-payment.png');
    expect(notFound).toEqual([]);
  } finally {
    await context.close();
  }
}, 180_000);

test('at 390 px nothing scrolls sideways and URLs keep the width of the screen', async () => {
  const paymentId = await pay(server, seller);
  // A URL longer than a phone's line: it must wrap across the card's width, not a narrow column.
  const longUrl = (await openStorefront(server, seller, { 'GET /reports/weather/north-atlantic/daily-summary': { price: '$0.01' } })).resource('/reports/weather/north-atlantic/daily-summary');
  const { context, page: p, notFound } = await signedInPage(390);
  try {
    await p.goto(`${server.url}/console/seller-keys`);
    const revoke = await p.getByRole('link', { name: /^Revoke key / }).first().getAttribute('href');
    // Every page of the nav, and the pages behind a link or a button: the edit form, the confirmations.
    const pages = ['/console/payments', '/console/channels', '/console/webhooks', '/console/endpoints', '/console/seller-keys', '/console/drafts', '/console/activity',
      `/console/payments/${paymentId}`, `/console/endpoints/${seller.endpointId}/edit`, `/console/endpoints/${seller.endpointId}/delete`, revoke!];
    for (const path of pages) {
      await p.goto(server.url + path);
      expect([path, await scrollsSideways(p), await overflowing(p), await flushHeadings(p)]).toEqual([path, false, [], []]);
    }
    // Tables become one block per row: nothing scrolls inside its card either, and a resource URL gets the
    // card's width rather than a narrow column that wraps it a few letters at a time.
    for (const path of ['/console/payments', '/console/channels', '/console/webhooks', '/console/seller-keys', '/console/activity', `/console/payments/${paymentId}`]) {
      await p.goto(server.url + path);
      const cards = await p.locator('.table-card, .table-scroll').evaluateAll((els) => els.map((el) => el.scrollWidth <= el.clientWidth));
      expect([path, cards.every(Boolean)]).toEqual([path, true]);
    }
    await p.goto(`${server.url}/console/payments`);
    expect((await p.locator(`tr[data-payment-id="${paymentId}"] td.resource`).boundingBox())!.width).toBeGreaterThan(280);
    // An endpoint's URL has a line of its own, not a narrow column that wraps it a few letters at a time.
    await p.goto(`${server.url}/console/endpoints`);
    const url = await p.locator('.endpoint-url', { hasText: longUrl }).boundingBox();
    expect(url!.width).toBeGreaterThan(280);
    await shot(p, 'console-mobile.png');
    // The payment page's resource and the JWS wrap inside the card.
    await p.goto(`${server.url}/console/payments/${paymentId}`);
    const jws = await p.getByLabel('JWS claims').boundingBox();
    expect(jws!.x + jws!.width).toBeLessThanOrEqual(390);
    expect(notFound).toEqual([]);
    // An error page (here a 404), and the sign-in page of a browser that is not signed in.
    await p.goto(`${server.url}/console/no-such-page`);
    await p.getByRole('heading', { name: 'Not found' }).waitFor();
    expect([await scrollsSideways(p), await overflowing(p)]).toEqual([false, []]);
    const outsider = await browser.newPage({ viewport: { width: 390, height: 900 } });
    try {
      await outsider.goto(`${server.url}/console/sign-in`);
      await outsider.getByLabel('Platform key').waitFor();
      expect([await scrollsSideways(outsider), await overflowing(outsider)]).toEqual([false, []]);
    } finally {
      await outsider.close();
    }
  } finally {
    await context.close();
  }
}, 120_000);
