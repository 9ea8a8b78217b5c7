import { createHmac, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { readFileSync, writeFileSync } from 'node:fs';
import { escapeHtml } from '../platform/html.js';

/**
 * A local, Slack-compatible chat platform for `agentgate dev` and the tests: one workspace with a few
 * people and channels, the OAuth v2 install (a consent page a human clicks through), the Web API methods
 * the backend calls (`oauth.v2.access`, `auth.revoke`, `conversations.list`, `chat.postMessage`) and the
 * Events API push of what people write, signed like Slack signs it. The backend talks to it with the real
 * `@slack/web-api` client; nothing in the backend knows it is not Slack.
 *
 * A human's side is driven through `invite`, `postAsHuman` and `uninstall` (tests) or the page at `/`
 * (dev). State is in memory, and saved to `stateFile` when given so a dev restart keeps installs.
 */
export interface DevChatPlatformOptions {
  port?: number;
  host?: string;
  clientId?: string;
  clientSecret?: string;
  signingSecret?: string;
  /** Where events are pushed (the backend's POST /v0/chat/events); settable later with `setEventsUrl`. */
  eventsUrl?: string;
  stateFile?: string;
}

interface Channel { id: string; name: string; isPrivate: boolean; members: string[]; archived?: boolean }
interface Install { token: string; botUserId: string; scopes: string; revoked?: boolean }
interface PostedMessage { channel: string; user: string; text: string; ts: string; threadTs?: string }
interface State {
  team: { id: string; name: string };
  appId: string;
  people: Array<{ id: string; name: string }>;
  channels: Channel[];
  installs: Install[];
  messages: PostedMessage[];
}

export interface EventDelivery { status: number; body: string }

const BOT_USER_ID = 'U0DEVBOT01';

function initialState(): State {
  return {
    team: { id: 'T0DEVTEAM1', name: 'Dev Workspace' },
    appId: 'A0DEVAPP01',
    people: [{ id: 'U0ALICE001', name: 'alice' }, { id: 'U0BOB00001', name: 'bob' }],
    channels: [
      { id: 'C0GENERAL1', name: 'general', isPrivate: false, members: ['U0ALICE001', 'U0BOB00001'] },
      { id: 'C0RANDOM01', name: 'random', isPrivate: false, members: ['U0ALICE001'] },
      { id: 'G0PRIVATE1', name: 'deals', isPrivate: true, members: ['U0ALICE001'] },
    ],
    installs: [],
    messages: [],
  };
}

export class DevChatPlatform {
  readonly clientId: string;
  readonly clientSecret: string;
  readonly signingSecret: string;
  url = '';
  private eventsUrl: string | undefined;
  private server: Server | undefined;
  private state: State;
  private codes = new Map<string, { redirectUri: string; scopes: string; expiresAt: number }>();
  private rateLimitedCalls = 0;
  private lastTs = 0;
  /** Events pushed to the backend, with its answers (tests read these). */
  readonly deliveries: Array<{ event: Record<string, unknown>; status: number }> = [];

  constructor(private readonly options: DevChatPlatformOptions = {}) {
    this.clientId = options.clientId ?? 'dev-client-id';
    this.clientSecret = options.clientSecret ?? randomBytes(16).toString('hex');
    this.signingSecret = options.signingSecret ?? randomBytes(16).toString('hex');
    this.eventsUrl = options.eventsUrl;
    this.state = initialState();
    if (options.stateFile) {
      try { this.state = JSON.parse(readFileSync(options.stateFile, 'utf8')) as State; } catch { /* first start */ }
    }
  }

  get apiUrl(): string { return `${this.url}/api/`; }
  get authorizeUrl(): string { return `${this.url}/oauth/v2/authorize`; }
  get team() { return this.state.team; }
  get botUserId() { return BOT_USER_ID; }

  /** The backend configuration that points at this platform. */
  backendConfig(): Record<string, string> {
    return {
      CHAT_API_URL: this.apiUrl, CHAT_AUTHORIZE_URL: this.authorizeUrl,
      CHAT_CLIENT_ID: this.clientId, CHAT_CLIENT_SECRET: this.clientSecret, CHAT_SIGNING_SECRET: this.signingSecret,
    };
  }

  setEventsUrl(url: string): void { this.eventsUrl = url; }

  async start(): Promise<this> {
    this.server = createServer((req, res) => { this.handle(req, res).catch((err) => this.reply(res, 500, { ok: false, error: String(err) })); });
    await new Promise<void>((resolve, reject) => {
      this.server!.once('error', reject);
      this.server!.listen(this.options.port ?? 0, this.options.host ?? '127.0.0.1', () => resolve());
    });
    const address = this.server.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    this.url = `http://${this.options.host === '0.0.0.0' ? '127.0.0.1' : (this.options.host ?? '127.0.0.1')}:${port}`;
    return this;
  }

  async stop(): Promise<void> {
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
    this.server = undefined;
  }

  /** The bot joins a channel (a person typed `/invite @agentgate`). */
  invite(channelName: string): string {
    const channel = this.channel(channelName);
    if (!channel.members.includes(BOT_USER_ID)) channel.members.push(BOT_USER_ID);
    this.save();
    return channel.id;
  }

  /** The bot is removed from a channel (a person typed `/kick @agentgate`). */
  remove(channelName: string): void {
    const channel = this.channel(channelName);
    channel.members = channel.members.filter((m) => m !== BOT_USER_ID);
    this.save();
  }

  /** The next `count` Web API calls answer 429 with Retry-After. */
  rateLimitNext(count = 1): void { this.rateLimitedCalls = count; }

  /** Messages in a channel, oldest first (what people in the workspace see). */
  history(channelName: string): PostedMessage[] {
    const id = this.channel(channelName).id;
    return this.state.messages.filter((m) => m.channel === id);
  }

  /**
   * A person writes in a channel. Like Slack, the message event goes to the app only when its bot is in
   * the channel; the mention of the bot also raises `app_mention`.
   */
  async postAsHuman(input: { channel: string; user?: string; text: string; threadTs?: string }): Promise<PostedMessage & { deliveries: EventDelivery[] }> {
    const channel = this.channel(input.channel);
    const user = this.state.people.find((p) => p.name === (input.user ?? 'alice') || p.id === input.user)?.id ?? this.state.people[0]!.id;
    const message: PostedMessage = { channel: channel.id, user, text: input.text, ts: this.nextTs(), ...(input.threadTs ? { threadTs: input.threadTs } : {}) };
    this.state.messages.push(message);
    this.save();
    const deliveries: EventDelivery[] = [];
    const installed = this.state.installs.some((i) => !i.revoked);
    if (installed && channel.members.includes(BOT_USER_ID)) {
      const event = {
        type: 'message', channel: channel.id, user, text: input.text, ts: message.ts, event_ts: message.ts,
        channel_type: channel.isPrivate ? 'group' : 'channel', ...(input.threadTs ? { thread_ts: input.threadTs } : {}),
      };
      deliveries.push(await this.pushEvent(event));
      if (input.text.includes(`<@${BOT_USER_ID}>`)) deliveries.push(await this.pushEvent({ ...event, type: 'app_mention' }));
    }
    return { ...message, deliveries };
  }

  /** The workspace removes the app: every token is revoked and `app_uninstalled` is pushed. */
  async uninstall(): Promise<EventDelivery> {
    for (const install of this.state.installs) install.revoked = true;
    for (const channel of this.state.channels) channel.members = channel.members.filter((m) => m !== BOT_USER_ID);
    this.save();
    return this.pushEvent({ type: 'app_uninstalled', event_ts: this.nextTs() });
  }

  /** Pushes one event callback to the backend, signed with the app's signing secret. */
  async pushEvent(event: Record<string, unknown>, options: { signingSecret?: string; timestamp?: number } = {}): Promise<EventDelivery> {
    if (!this.eventsUrl) throw new Error('no events URL is set on the dev chat platform');
    const body = JSON.stringify({
      token: 'deprecated-verification-token', team_id: this.state.team.id, api_app_id: this.state.appId, event,
      type: 'event_callback', event_id: `Ev${randomBytes(5).toString('hex').toUpperCase()}`, event_time: Math.floor(Date.now() / 1000),
    });
    const timestamp = options.timestamp ?? Math.floor(Date.now() / 1000);
    const signature = `v0=${createHmac('sha256', options.signingSecret ?? this.signingSecret).update(`v0:${timestamp}:${body}`).digest('hex')}`;
    const res = await fetch(this.eventsUrl, {
      method: 'POST', body,
      headers: { 'content-type': 'application/json', 'x-slack-request-timestamp': String(timestamp), 'x-slack-signature': signature },
    });
    const delivery = { status: res.status, body: await res.text() };
    this.deliveries.push({ event, status: res.status });
    return delivery;
  }

  private channel(nameOrId: string): Channel {
    const channel = this.state.channels.find((c) => c.name === nameOrId.replace(/^#/, '') || c.id === nameOrId);
    if (!channel) throw new Error(`no channel ${nameOrId} in the dev workspace`);
    return channel;
  }

  private nextTs(): string {
    // Slack timestamps are seconds with microseconds, unique within a channel.
    const micros = Math.max(Date.now() * 1000, this.lastTs + 1);
    this.lastTs = micros;
    return `${Math.floor(micros / 1e6)}.${String(micros % 1e6).padStart(6, '0')}`;
  }

  private save(): void {
    if (this.options.stateFile) writeFileSync(this.options.stateFile, JSON.stringify(this.state, null, 2), { mode: 0o600 });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://platform.local');
    const form = new URLSearchParams(await readBody(req));
    if (url.pathname === '/oauth/v2/authorize') return this.authorize(req.method ?? 'GET', req.method === 'POST' ? form : url.searchParams, res);
    if (url.pathname.startsWith('/api/')) return this.api(url.pathname.slice(5), form, req.headers.authorization, res);
    if (url.pathname === '/' && req.method === 'GET') return this.home(res);
    if (url.pathname === '/dev/post' && req.method === 'POST') {
      await this.postAsHuman({ channel: form.get('channel') ?? 'general', user: form.get('user') ?? undefined, text: form.get('text') ?? '', threadTs: form.get('thread_ts') || undefined });
      return this.redirect(res, '/');
    }
    if (url.pathname === '/dev/invite' && req.method === 'POST') {
      this.invite(form.get('channel') ?? 'general');
      return this.redirect(res, '/');
    }
    this.reply(res, 404, { ok: false, error: 'unknown_method' });
  }

  /** GET shows the consent page; POST is the human's click, which redirects back with a one-time code. */
  private authorize(method: string, params: URLSearchParams, res: ServerResponse): void {
    const clientId = params.get('client_id');
    const redirectUri = params.get('redirect_uri') ?? '';
    const state = params.get('state') ?? '';
    const scopes = params.get('scope') ?? '';
    if (clientId !== this.clientId || !/^https?:\/\//.test(redirectUri)) return this.html(res, 400, '<h1>Invalid install link</h1>');
    if (method === 'GET') {
      const hidden = [['client_id', clientId], ['redirect_uri', redirectUri], ['state', state], ['scope', scopes]]
        .map(([k, v]) => `<input type="hidden" name="${k}" value="${escapeHtml(v!)}">`).join('');
      return this.html(res, 200, `<h1>Install the agent's bot in ${escapeHtml(this.state.team.name)}?</h1>
<p>It asks for: ${escapeHtml(scopes)}</p>
<form method="post">${hidden}<button name="decision" value="allow">Allow</button> <button name="decision" value="deny">Cancel</button></form>`);
    }
    const target = new URL(redirectUri);
    if (params.get('decision') !== 'allow') {
      target.searchParams.set('error', 'access_denied');
    } else {
      const code = randomBytes(12).toString('hex');
      this.codes.set(code, { redirectUri, scopes, expiresAt: Date.now() + 10 * 60_000 });
      target.searchParams.set('code', code);
    }
    target.searchParams.set('state', state);
    this.redirect(res, target.toString());
  }

  private api(method: string, form: URLSearchParams, authorization: string | undefined, res: ServerResponse): void {
    if (this.rateLimitedCalls > 0) {
      this.rateLimitedCalls--;
      res.setHeader('retry-after', '7');
      return this.reply(res, 429, { ok: false, error: 'ratelimited' });
    }
    if (method === 'oauth.v2.access') return this.reply(res, 200, this.exchange(form));
    const token = /^Bearer (.+)$/.exec(authorization ?? '')?.[1] ?? form.get('token') ?? '';
    const install = this.state.installs.find((i) => i.token === token);
    if (!install) return this.reply(res, 200, { ok: false, error: 'invalid_auth' });
    if (install.revoked) return this.reply(res, 200, { ok: false, error: 'token_revoked' });
    switch (method) {
      case 'auth.test':
        return this.reply(res, 200, { ok: true, team: this.state.team.name, team_id: this.state.team.id, user_id: BOT_USER_ID, bot_id: 'B0DEVBOT01' });
      case 'auth.revoke':
        install.revoked = true;
        this.save();
        return this.reply(res, 200, { ok: true, revoked: true });
      case 'conversations.list': {
        const types = (form.get('types') ?? 'public_channel').split(',');
        const visible = this.state.channels.filter((c) => !(c.archived && form.get('exclude_archived') === 'true'))
          .filter((c) => (c.isPrivate ? types.includes('private_channel') && c.members.includes(BOT_USER_ID) : types.includes('public_channel')));
        const limit = Math.min(Number(form.get('limit') ?? 100) || 100, 1000);
        const start = Number(form.get('cursor') || 0);
        const page = visible.slice(start, start + limit);
        return this.reply(res, 200, {
          ok: true,
          channels: page.map((c) => ({ id: c.id, name: c.name, is_channel: !c.isPrivate, is_group: c.isPrivate, is_private: c.isPrivate, is_archived: !!c.archived, is_member: c.members.includes(BOT_USER_ID) })),
          response_metadata: { next_cursor: start + limit < visible.length ? String(start + limit) : '' },
        });
      }
      case 'chat.postMessage': {
        const channel = this.state.channels.find((c) => c.id === form.get('channel') || c.name === form.get('channel')?.replace(/^#/, ''));
        if (!channel || (channel.isPrivate && !channel.members.includes(BOT_USER_ID))) return this.reply(res, 200, { ok: false, error: 'channel_not_found' });
        if (!channel.members.includes(BOT_USER_ID)) return this.reply(res, 200, { ok: false, error: 'not_in_channel' });
        if (channel.archived) return this.reply(res, 200, { ok: false, error: 'is_archived' });
        const text = form.get('text') ?? '';
        if (!text) return this.reply(res, 200, { ok: false, error: 'no_text' });
        if (text.length > 40_000) return this.reply(res, 200, { ok: false, error: 'msg_too_long' });
        const threadTs = form.get('thread_ts') ?? undefined;
        if (threadTs && !this.state.messages.some((m) => m.channel === channel.id && m.ts === threadTs)) {
          return this.reply(res, 200, { ok: false, error: 'thread_not_found' });
        }
        const message: PostedMessage = { channel: channel.id, user: BOT_USER_ID, text, ts: this.nextTs(), ...(threadTs ? { threadTs } : {}) };
        this.state.messages.push(message);
        this.save();
        return this.reply(res, 200, { ok: true, channel: channel.id, ts: message.ts, message: { type: 'message', user: BOT_USER_ID, text, ts: message.ts, ...(threadTs ? { thread_ts: threadTs } : {}) } });
      }
      default:
        return this.reply(res, 200, { ok: false, error: 'unknown_method' });
    }
  }

  private exchange(form: URLSearchParams): Record<string, unknown> {
    if (form.get('client_id') !== this.clientId || form.get('client_secret') !== this.clientSecret) return { ok: false, error: 'invalid_client_id' };
    const code = this.codes.get(form.get('code') ?? '');
    this.codes.delete(form.get('code') ?? '');
    if (!code || code.expiresAt < Date.now()) return { ok: false, error: 'invalid_code' };
    if (form.get('redirect_uri') && form.get('redirect_uri') !== code.redirectUri) return { ok: false, error: 'bad_redirect_uri' };
    const install: Install = { token: `xoxb-dev-${randomBytes(16).toString('hex')}`, botUserId: BOT_USER_ID, scopes: code.scopes };
    this.state.installs.push(install);
    this.save();
    return {
      ok: true, app_id: this.state.appId, authed_user: { id: this.state.people[0]!.id }, scope: code.scopes, token_type: 'bot',
      access_token: install.token, bot_user_id: BOT_USER_ID, team: this.state.team, enterprise: null, is_enterprise_install: false,
    };
  }

  /**
   * The page a person uses: invite the bot, post as any of the workspace's people, reply in a thread
   * under any message. It reloads itself every few seconds unless someone is typing.
   */
  private home(res: ServerResponse): void {
    const options = this.state.channels.map((c) => `<option value="${escapeHtml(c.name)}">#${escapeHtml(c.name)}</option>`).join('');
    const people = this.state.people.map((p) => `<option value="${escapeHtml(p.name)}">${escapeHtml(p.name)}</option>`).join('');
    const rows = this.state.messages.slice(-30).reverse().map((m) => {
      const channel = this.state.channels.find((c) => c.id === m.channel)?.name ?? m.channel;
      const who = m.user === BOT_USER_ID ? 'bot' : this.state.people.find((p) => p.id === m.user)?.name ?? m.user;
      const reply = `<form method="post" action="/dev/post" class="reply"><input type="hidden" name="channel" value="${escapeHtml(channel)}"><input type="hidden" name="thread_ts" value="${escapeHtml(m.threadTs ?? m.ts)}">`
        + `<select name="user" aria-label="reply as">${people}</select> <input name="text" size="30" aria-label="reply in thread"> <button>Reply in thread</button></form>`;
      return `<li>#${escapeHtml(channel)} <b>${escapeHtml(who)}</b>: ${escapeHtml(m.text)}${m.threadTs ? ' <i>(in thread)</i>' : ''}${reply}</li>`;
    }).join('');
    this.html(res, 200, `<h1>${escapeHtml(this.state.team.name)} (local chat platform)</h1>
<form method="post" action="/dev/invite">Invite the bot to <select name="channel">${options}</select> <button>Invite</button></form>
<form method="post" action="/dev/post">Post as <select name="user" aria-label="post as">${people}</select> in <select name="channel" aria-label="channel">${options}</select> <input name="text" size="50" aria-label="message"> <button>Send</button></form>
<ul>${rows}</ul>
<script>setInterval(function () { var a = document.activeElement; if (!(a && a.tagName === 'INPUT' && a.value)) location.reload(); }, 4000);</script>`);
  }

  private reply(res: ServerResponse, status: number, body: unknown): void {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(body));
  }

  private html(res: ServerResponse, status: number, body: string): void {
    res.writeHead(status, { 'content-type': 'text/html; charset=utf-8' }).end(`<!doctype html><meta charset="utf-8"><title>Dev chat</title>${body}`);
  }

  private redirect(res: ServerResponse, location: string): void {
    res.writeHead(302, { location }).end();
  }
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => { size += chunk.length; if (size <= 1_000_000) chunks.push(chunk); });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

