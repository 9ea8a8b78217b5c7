// The console in a real browser (Debian's chromium through playwright-core) against a real backend, chain
// and webhook receiver: sign in through the form, watch a paid request appear without a reload, check its
// receipts, retry a failed webhook and see the new attempt, sign out and be refused.
import type { Browser, Page } from 'playwright-core';
import { startTestServer, type TestServer } from '../support/server.js';
import { pay, sellerWithWebhook, waitForDelivery, type WebhookSeller } from '../webhooks/seller.js';
import { startReceiver } from '../webhooks/receiver.js';
import { launchChromium } from './browser.js';
import { consoleGet } from './http-client.js';

// The retry schedule in units of 5 ms: a receiver answering 500 exhausts it in about two seconds.
const FAILING_ATTEMPTS = 6;

let server: TestServer;
let browser: Browser;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
let seller: WebhookSeller;
let page: Page;

beforeAll(async () => {
  [server, browser] = await Promise.all([startTestServer({ TRUST_PROXY: 'true', WEBHOOK_RETRY_BASE_MS: '5' }), launchChromium()]);
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
  await row.getByRole('link').click();
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
  await page.getByRole('button', { name: 'Retry delivery' }).click();
  const newAttempt = delivery.locator(`tr[data-attempt="${FAILING_ATTEMPTS + 1}"]`);
  await newAttempt.waitFor({ timeout: 20_000 });
  expect(await newAttempt.textContent()).toContain('HTTP 200');
  await delivery.getByText('delivered', { exact: true }).first().waitFor();
  expect(receiver.received).toHaveLength(FAILING_ATTEMPTS + 1);

  // A few more payments for the picture of the payments page (docs/console.png).
  if (process.env.CONSOLE_SCREENSHOT) {
    await pay(server, seller);
    await pay(server, seller);
    await page.goto(`${server.url}/console/payments`);
    await page.screenshot({ path: process.env.CONSOLE_SCREENSHOT, fullPage: true });
  }

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
