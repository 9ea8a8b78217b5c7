import { AppError } from '../platform/errors.js';
import type { WindowCounts } from '../platform/limits/window-counts.js';

/** How many messages an identity, and its whole org, may send per window; 0: no limit. */
export interface SendLimitSettings {
  perIdentity: number;
  perOrg: number;
}

/**
 * Messages sent per identity and per org in a fixed window (MAIL_SEND_LIMIT_WINDOW_MS), counted across
 * every process of the deployment (platform/limits/window-counts.ts), over every way of sending: the API's
 * send, reply, forward and draft send, the MCP tools, and SMTP submission. A send over either limit is
 * refused with 429 `mail_rate_limited` and Retry-After (the window's end), before anything is stored.
 */
export class MailSendLimits {
  constructor(private readonly counts: WindowCounts, private readonly settings: SendLimitSettings) {}

  async take(sender: { _id: string; orgId: string }): Promise<void> {
    const checks = [
      { bucket: `mail-send:identity:${sender._id}`, limit: this.settings.perIdentity, who: 'this identity' },
      { bucket: `mail-send:org:${sender.orgId}`, limit: this.settings.perOrg, who: 'this organisation' },
    ].filter((c) => c.limit > 0);
    for (const check of checks) {
      const take = await this.counts.take(check.bucket, check.limit);
      if (!take.ok) {
        throw new AppError(429, 'mail_rate_limited', `${check.who} has sent ${check.limit} messages in this window, its limit; retry in ${take.resetSeconds} s`,
          { limit: check.limit, retryAfter: take.resetSeconds }, { 'Retry-After': String(take.resetSeconds) });
      }
    }
  }

  stop(): Promise<void> {
    return this.counts.stop();
  }
}
