import { z } from 'zod';
import type { ScreenedNetwork, ScreeningSource, SourceVerdict } from './sources.js';

const answer = z.object({
  sanctioned: z.boolean(),
  reason: z.string().max(500).optional(),
});

/**
 * An HTTP screening provider (SCREENING_PROVIDER_URL): each address is POSTed as
 * `{ address, network, caip2 }` (with `Authorization: Bearer SCREENING_PROVIDER_TOKEN` when set) and the
 * answer must be `{ sanctioned: boolean, reason?: string }`. Anything else (an error status, another
 * body, no answer within the timeout) throws: the operator's policy (SCREENING_ON_ERROR) decides then.
 * docs/operators/screening.md shows an adapter for a provider with another API.
 */
export class ScreeningProvider implements ScreeningSource {
  readonly name = 'provider' as const;

  constructor(private readonly options: { url: string; token?: string; timeoutMs: number; fetch?: typeof fetch }) {}

  /** A provider is asked of every network: it is the operator's to answer for each. */
  covers(): boolean {
    return true;
  }

  async check(address: string, network: ScreenedNetwork): Promise<SourceVerdict> {
    const res = await (this.options.fetch ?? fetch)(this.options.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', ...(this.options.token ? { authorization: `Bearer ${this.options.token}` } : {}) },
      body: JSON.stringify({ address, network: network.name, caip2: network.caip2 }),
      signal: AbortSignal.timeout(this.options.timeoutMs),
      redirect: 'error',
    });
    if (!res.ok) throw new Error(`the screening provider answered ${res.status}`);
    const parsed = answer.safeParse(await res.json().catch(() => undefined));
    if (!parsed.success) throw new Error('the screening provider answered something other than { sanctioned: boolean }');
    return { listed: parsed.data.sanctioned, ...(parsed.data.reason ? { detail: parsed.data.reason } : {}) };
  }
}
