import type { TestServer } from '../support/server.js';

/** A plain HTTP client for console pages: keeps no cookie jar of its own, so each test says what it sends. */
export interface ConsoleResponse { status: number; headers: Headers; text: string; location: string | null }

let ipCounter = 0;
/** A client address of its own per sign-in (TRUST_PROXY is on), so the sign-in limiter is per test. */
export const freshIp = () => `10.77.${(process.pid + ++ipCounter) % 250}.${ipCounter % 250}`;

export async function consoleGet(server: TestServer, path: string, cookie?: string, headers: Record<string, string> = {}): Promise<ConsoleResponse> {
  const res = await fetch(server.url + path, { redirect: 'manual', headers: { ...(cookie ? { cookie } : {}), ...headers } });
  return { status: res.status, headers: res.headers, text: await res.text(), location: res.headers.get('location') };
}

export async function consolePost(server: TestServer, path: string, form: Record<string, string>, options: { cookie?: string; origin?: string | null; headers?: Record<string, string> } = {}): Promise<ConsoleResponse> {
  const origin = options.origin === undefined ? server.url : options.origin;
  const res = await fetch(server.url + path, {
    method: 'POST', redirect: 'manual', body: new URLSearchParams(form).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...(origin ? { origin } : {}), ...(options.cookie ? { cookie: options.cookie } : {}), ...(options.headers ?? {}) },
  });
  return { status: res.status, headers: res.headers, text: await res.text(), location: res.headers.get('location') };
}

export interface SignedIn { cookie: string; setCookie: string; csrf: string }

/** Signs in through the form post and reads the CSRF token from the next page, as a browser would. */
export async function signIn(server: TestServer, key: string, headers: Record<string, string> = {}): Promise<SignedIn> {
  const res = await consolePost(server, '/console/sign-in', { key }, { headers: { 'x-forwarded-for': freshIp(), ...headers } });
  if (res.status !== 303) throw new Error(`sign-in answered ${res.status}: ${res.text.slice(0, 300)}`);
  const setCookie = res.headers.getSetCookie().find((c) => c.startsWith('agentgate_console='))!;
  const cookie = setCookie.split(';')[0]!;
  const page = await consoleGet(server, '/console/payments', cookie);
  return { cookie, setCookie, csrf: csrfIn(page.text) };
}

export function csrfIn(html: string): string {
  const match = /name="_csrf" value="([^"]+)"/.exec(html);
  if (!match) throw new Error('no CSRF field on the page');
  return match[1]!;
}
