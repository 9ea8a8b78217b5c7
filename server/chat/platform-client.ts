import type { ErrorCode as ErrorCodes, WebAPICallResult, WebClient } from '@slack/web-api';
import type { Config } from '../platform/config.js';
import { AppError } from '../platform/errors.js';
import { lazily } from '../platform/lazily.js';

// The official client is loaded at the first call: a process that never talks to the chat platform does
// not pay for its modules (0.07-0.13 s of a start on an idle machine).
const loadSlackApi = lazily(() => import('@slack/web-api'));

export interface Installed {
  accessToken: string;
  teamId: string;
  teamName: string;
  appId?: string;
  botUserId: string;
  scopes: string[];
}

export interface PlatformChannel { id: string; name: string; isPrivate: boolean; botIsMember: boolean }

const CHANNEL_CAP = 1000;

/**
 * The chat platform's Web API, through the official `@slack/web-api` client. The client does not retry
 * (a retried chat.postMessage could post twice) and does not wait out rate limits: a 429 reaches the
 * caller as our own 429 with the platform's Retry-After.
 */
export class ChatPlatformClient {
  constructor(private readonly config: Config) {}

  private async client(token?: string): Promise<WebClient> {
    const { LogLevel, WebClient } = await loadSlackApi();
    return new WebClient(token, {
      slackApiUrl: this.config.CHAT_API_URL,
      retryConfig: { retries: 0 },
      rejectRateLimitedCalls: true,
      timeout: this.config.CHAT_TIMEOUT_MS,
      allowAbsoluteUrls: false,
      logLevel: LogLevel.ERROR,
    });
  }

  /** The browser URL where a human approves the install; the platform sends them back to `redirectUri`. */
  authorizeUrl(state: string, redirectUri: string): string {
    const url = new URL(this.config.CHAT_AUTHORIZE_URL);
    url.searchParams.set('client_id', this.config.CHAT_CLIENT_ID!);
    url.searchParams.set('scope', this.config.CHAT_BOT_SCOPES);
    url.searchParams.set('redirect_uri', redirectUri);
    url.searchParams.set('state', state);
    return url.toString();
  }

  /** OAuth v2 code exchange: the bot token and the workspace it belongs to. */
  async exchangeCode(code: string, redirectUri: string): Promise<Installed> {
    const result = await call(async () => (await this.client()).oauth.v2.access({
      client_id: this.config.CHAT_CLIENT_ID!, client_secret: this.config.CHAT_CLIENT_SECRET!, code, redirect_uri: redirectUri,
    }));
    if (!result.access_token || !result.team?.id || !result.bot_user_id) {
      throw new AppError(502, 'chat_platform_error', 'The chat platform did not return a bot token for this install');
    }
    return {
      accessToken: result.access_token, teamId: result.team.id, teamName: result.team.name ?? '', appId: result.app_id,
      botUserId: result.bot_user_id, scopes: (result.scope ?? '').split(',').filter(Boolean),
    };
  }

  /** Best effort: the token is dropped on our side whatever the platform says. */
  async revoke(token: string): Promise<void> {
    await (await this.client(token)).auth.revoke().catch(() => undefined);
  }

  /** Public channels, and the private ones the bot was invited to (the platform shows no others). */
  async listChannels(token: string): Promise<PlatformChannel[]> {
    const channels: PlatformChannel[] = [];
    let cursor: string | undefined;
    do {
      const page = await call(async () => (await this.client(token)).conversations.list({
        types: 'public_channel,private_channel', exclude_archived: true, limit: 200, ...(cursor ? { cursor } : {}),
      }));
      for (const c of page.channels ?? []) {
        if (!c.id) continue;
        channels.push({ id: c.id, name: c.name ?? '', isPrivate: !!c.is_private, botIsMember: !!c.is_member });
      }
      cursor = page.response_metadata?.next_cursor || undefined;
    } while (cursor && channels.length < CHANNEL_CAP);
    return channels;
  }

  async postMessage(token: string, input: { channel: string; text: string; threadTs?: string }): Promise<{ channel: string; ts: string }> {
    const result = await call(async () => (await this.client(token)).chat.postMessage({
      channel: input.channel, text: input.text, ...(input.threadTs ? { thread_ts: input.threadTs } : {}),
    }), { channel: input.channel });
    return { channel: result.channel ?? input.channel, ts: result.ts! };
  }
}

/** The platform's error codes that mean the token is gone: the connection is over. */
export const TOKEN_GONE = new Set(['invalid_auth', 'token_revoked', 'account_inactive', 'token_expired', 'not_authed']);

/** Runs one Web API call and turns the platform's failures into our error bodies. */
async function call<T extends WebAPICallResult>(fn: () => Promise<T>, context: { channel?: string } = {}): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw translate(err as { code?: string; data?: { error?: string }; retryAfter?: number; message?: string }, context, (await loadSlackApi()).ErrorCode);
  }
}

function translate(err: { code?: string; data?: { error?: string }; retryAfter?: number; message?: string }, context: { channel?: string }, ErrorCode: typeof ErrorCodes): AppError {
  if (err.code === ErrorCode.RateLimitedError) {
    const retryAfter = String(err.retryAfter ?? 30);
    return new AppError(429, 'chat_rate_limited', `The chat platform is rate limiting this workspace; retry after ${retryAfter} s`, {}, { 'Retry-After': retryAfter });
  }
  if (err.code === ErrorCode.PlatformError) {
    const code = err.data?.error ?? 'unknown_error';
    const channel = context.channel;
    switch (code) {
      case 'not_in_channel':
        return new AppError(409, 'not_in_channel', `The bot is not in channel ${channel}: invite it to the channel (/invite @<bot name>), then retry`, { channel });
      case 'channel_not_found':
        return new AppError(404, 'channel_not_found', `Channel ${channel} was not found, or it is private and the bot was not invited to it`, { channel });
      case 'is_archived':
        return new AppError(409, 'channel_archived', `Channel ${channel} is archived`, { channel });
      case 'thread_not_found':
        return new AppError(404, 'thread_not_found', 'threadTs does not name a message in that channel');
      case 'msg_too_long':
        return new AppError(400, 'validation_error', 'body.text: is too long for the chat platform');
      case 'invalid_code': case 'code_already_used': case 'bad_redirect_uri':
        return new AppError(400, 'chat_install_failed', `The chat platform refused the install code (${code}); start again with POST /v0/chat/connect`);
      default:
        if (TOKEN_GONE.has(code)) return new AppError(409, 'chat_token_revoked', `The workspace revoked the bot's access (${code}); connect again with POST /v0/chat/connect`, { platformError: code });
        return new AppError(502, 'chat_platform_error', `The chat platform answered ${code}`, { platformError: code });
    }
  }
  if (err.code === ErrorCode.RequestError) return new AppError(502, 'chat_platform_unreachable', 'The chat platform could not be reached; retry later');
  if (err.code === ErrorCode.HTTPError) return new AppError(502, 'chat_platform_error', 'The chat platform answered with an HTTP error; retry later');
  return new AppError(502, 'chat_platform_error', `The chat platform call failed: ${err.message ?? 'unknown error'}`);
}
