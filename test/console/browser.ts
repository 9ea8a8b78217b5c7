import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import type { TestServer } from '../support/server.js';

/**
 * Debian's chromium, driven by playwright-core: the project downloads no browser (.ci/run installs the
 * apt package when it is missing). CHROMIUM_PATH points elsewhere when needed. --no-sandbox because CI
 * runs as root, where Chromium's sandbox cannot start.
 */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', args: ['--no-sandbox', '--disable-dev-shm-usage'] });
}

/**
 * A fresh browser context `width` px wide, signed in with `key` through the form as a person does; the
 * clipboard is granted, as a person's click would. `notFound` collects every request answered 404 (the
 * favicon included), so a walk can say none of its pages asked for something missing.
 */
export async function signedInPage(browser: Browser, server: TestServer, key: string, width: number): Promise<{ context: BrowserContext; page: Page; notFound: string[] }> {
  const context = await browser.newContext({ viewport: { width, height: 900 } });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url });
  const p = await context.newPage();
  const notFound: string[] = [];
  p.on('response', (res) => { if (res.status() === 404) notFound.push(res.url()); });
  await p.goto(`${server.url}/console/sign-in`);
  await p.getByLabel('Platform key').fill(key);
  await p.getByRole('button', { name: 'Sign in' }).click();
  await p.getByRole('heading', { name: 'Payments' }).waitFor();
  return { context, page: p, notFound };
}
