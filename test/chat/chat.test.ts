import { randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { DevChatPlatform } from '../../server/dev/chat-platform.js';
import { loadConfig } from '../../server/platform/config.js';
import { createContext } from '../../server/context.js';
import { rotateMasterKey } from '../../server/cli/rotate-master-key.js';
import { adminCommand } from '../../server/cli/admin-commands.js';
import { adminCheck } from '../../server/accounts/admins.js';

let platform: DevChatPlatform;
let server: TestServer;
const masterKey = randomBytes(32).toString('hex');

beforeAll(async () => {
  platform = await new DevChatPlatform().start();
  server = await startTestServer({ TRUST_PROXY: 'true', MASTER_KEY: masterKey, ...platform.backendConfig() });
  platform.setEventsUrl(`${server.url}/v0/chat/events`);
});
// Each test starts with the bot in no channel; who invites it where is part of each story.
beforeEach(() => { for (const channel of ['general', 'random', 'deals']) platform.remove(channel); });
afterAll(async () => {
  await server?.close();
  await platform?.stop();
});

type Agent = Awaited<ReturnType<typeof signUp>>;

/** An agent of an admin account (team chat is an admin preview), made so as the operator would. */
async function signUpAdmin(target: TestServer = server): Promise<Agent> {
  const a = await signUp(target);
  await target.app.accounts.setRole(a.org_id, 'admin');
  return a;
}

/** A person opens the install URL in a browser, sees the platform's consent page and clicks a button. */
async function humanOpens(installUrl: string, decision: 'allow' | 'deny' = 'allow') {
  const ours = await fetch(installUrl, { redirect: 'manual' });
  if (ours.status !== 302) return { status: ours.status, text: await ours.text() };
  const consentUrl = new URL(ours.headers.get('location')!);
  const consent = await fetch(consentUrl);
  expect(consent.status).toBe(200);
  expect(await consent.text()).toContain('Allow');
  const form = new URLSearchParams(consentUrl.searchParams);
  form.set('decision', decision);
  const clicked = await fetch(platform.authorizeUrl, { method: 'POST', body: form, redirect: 'manual' });
  expect(clicked.status).toBe(302);
  const back = await fetch(clicked.headers.get('location')!);
  return { status: back.status, text: await back.text() };
}

async function connected(agent?: Agent): Promise<Agent> {
  const a = agent ?? await signUpAdmin();
  const connect = await server.request('POST', '/v0/chat/connect', { key: a.identity.rawKey });
  expect(connect.status).toBe(201);
  const page = await humanOpens(connect.body.installUrl);
  expect(page.status).toBe(200);
  return a;
}

const chat = (a: Agent, method: string, path: string, body?: unknown) => server.request(method, `/v0/chat${path}`, { key: a.identity.rawKey, body });

describe('connecting a chat workspace', () => {
  it('issues an install URL, a human approves it in the browser, and the connection shows without any token', async () => {
    const a = await signUpAdmin();
    expect((await chat(a, 'GET', '/connection')).body).toEqual({ connected: false });
    const connect = await chat(a, 'POST', '/connect');
    expect(connect.status).toBe(201);
    expect(connect.body).toEqual({ installUrl: expect.stringMatching(new RegExp(`^${server.url}/v0/chat/install/[A-Za-z0-9_-]{32}$`)), expiresInSeconds: 900, expiresAt: expect.any(String) });
    expect(new Date(connect.body.expiresAt).getTime() - Date.now()).toBeGreaterThan(14 * 60_000);

    const page = await humanOpens(connect.body.installUrl);
    expect(page).toMatchObject({ status: 200, text: expect.stringContaining('Dev Workspace') });

    const status = await chat(a, 'GET', '/connection');
    expect(status.body).toEqual({
      connected: true, teamId: platform.team.id, teamName: 'Dev Workspace', botUserId: platform.botUserId,
      scopes: expect.arrayContaining(['chat:write', 'channels:read']), installedAt: expect.any(String),
    });
    expect(status.text).not.toMatch(/xoxb/);
    // At rest the bot token is sealed, never plain.
    const raw = await server.app.db.collection('chat_connections').findOne({ _id: a.identity.identityId as never });
    expect(JSON.stringify(raw)).not.toMatch(/xoxb/);
    expect(raw!.botToken).toMatchObject({ v: 1, keyVersion: 1 });

    // The install link was used up; a second connect is refused while connected.
    expect((await humanOpens(connect.body.installUrl)).status).toBe(410);
    expect((await chat(a, 'POST', '/connect')).body).toMatchObject({ error: 'already_connected', status: 409 });
  });

  it('refuses expired, unknown and declined installs, and connects nothing', async () => {
    const a = await signUpAdmin();
    const first = await chat(a, 'POST', '/connect');
    const state = first.body.installUrl.split('/').pop();
    await server.app.db.collection('chat_installs').updateMany({}, { $set: { expiresAt: new Date(Date.now() - 1000) } });
    expect((await humanOpens(first.body.installUrl)).status).toBe(410);
    expect((await fetch(`${server.url}/v0/chat/install/${'x'.repeat(32)}`)).status).toBe(410);
    expect((await fetch(`${server.url}/v0/chat/install/..%2F..%2Fetc`)).status).toBe(400); // not an install link at all
    expect((await fetch(`${server.url}/v0/chat/oauth/callback?state=${state}&code=whatever`)).status).toBe(410);
    expect((await fetch(`${server.url}/v0/chat/oauth/callback?code=x`)).status).toBe(400);

    const second = await chat(a, 'POST', '/connect');
    const declined = await humanOpens(second.body.installUrl, 'deny');
    expect(declined.status).toBe(400);
    expect(declined.text).toContain('cancelled');
    expect((await chat(a, 'GET', '/connection')).body).toEqual({ connected: false });
  });

  it('answers 409 until connected, disconnects on request, and ends the connection when the workspace uninstalls', async () => {
    const a = await signUpAdmin();
    for (const [method, path, body] of [['GET', '/channels'], ['POST', '/messages', { channel: 'C0GENERAL1', text: 'hi' }], ['DELETE', '/connection']] as const) {
      const res = await chat(a, method, path, body);
      expect(res.status).toBe(409);
      expect(res.body).toMatchObject({ error: 'chat_not_connected', status: 409 });
    }
    await connected(a);
    expect((await chat(a, 'DELETE', '/connection')).body).toEqual({ connected: false });
    expect((await chat(a, 'GET', '/connection')).body).toEqual({ connected: false });

    const b = await connected();
    const uninstalled = await platform.uninstall();
    expect(uninstalled.status).toBe(200);
    expect((await chat(b, 'GET', '/connection')).body).toEqual({ connected: false });
    const logs = await server.request('GET', '/v0/logs', { key: b.identity.rawKey });
    expect(logs.body.logs.map((l: { action: string }) => l.action)).toEqual(expect.arrayContaining(['chat.connect_requested', 'chat.connected', 'chat.disconnected']));
  });

  it('ends the connection when the platform says the token was revoked', async () => {
    const a = await connected();
    // Revoked on the platform's side without an event reaching us (e.g. an admin removed the bot).
    await fetch(`${platform.apiUrl}auth.revoke`, { method: 'POST', headers: { authorization: `Bearer ${await tokenOf(a)}` } });
    const res = await chat(a, 'GET', '/channels');
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ error: 'chat_token_revoked' });
    expect((await chat(a, 'GET', '/connection')).body).toEqual({ connected: false });
  });
});

/** The bot token as the server holds it: only the test reaches into the server for it. */
async function tokenOf(a: Agent): Promise<string> {
  const doc = await server.app.chat.connections.findById(a.identity.identityId).lean();
  return server.app.secrets.openText(doc!.botToken, `chat:${a.identity.identityId}`);
}

describe('channels and sending', () => {
  it('lists what the bot can see, posts where it was invited, replies in threads, and explains not_in_channel', async () => {
    const a = await connected();
    let channels = (await chat(a, 'GET', '/channels')).body;
    expect(channels.channels).toEqual(expect.arrayContaining([
      { id: 'C0GENERAL1', name: 'general', isPrivate: false, botIsMember: expect.any(Boolean) },
      { id: 'C0RANDOM01', name: 'random', isPrivate: false, botIsMember: false },
    ]));
    expect(channels.channels.map((c: { name: string }) => c.name)).not.toContain('deals'); // private, not invited

    const refused = await chat(a, 'POST', '/messages', { channel: 'C0RANDOM01', text: 'hello' });
    expect(refused.status).toBe(409);
    expect(refused.body).toEqual({ error: 'not_in_channel', message: expect.stringContaining('invite'), status: 409, channel: 'C0RANDOM01' });

    platform.invite('random');
    platform.invite('deals');
    channels = (await chat(a, 'GET', '/channels')).body;
    expect(channels.channels).toEqual(expect.arrayContaining([
      { id: 'C0RANDOM01', name: 'random', isPrivate: false, botIsMember: true },
      { id: 'G0PRIVATE1', name: 'deals', isPrivate: true, botIsMember: true },
    ]));

    const sent = await chat(a, 'POST', '/messages', { channel: 'C0RANDOM01', text: 'Daily report: all green' });
    expect(sent.status).toBe(200);
    expect(sent.body).toEqual({ channel: 'C0RANDOM01', ts: expect.stringMatching(/^\d+\.\d{6}$/) });
    const reply = await chat(a, 'POST', '/messages', { channel: 'C0RANDOM01', text: 'details in thread', threadTs: sent.body.ts });
    expect(reply.status).toBe(200);
    expect(platform.history('random').slice(-2)).toEqual([
      { channel: 'C0RANDOM01', user: platform.botUserId, text: 'Daily report: all green', ts: sent.body.ts },
      { channel: 'C0RANDOM01', user: platform.botUserId, text: 'details in thread', ts: reply.body.ts, threadTs: sent.body.ts },
    ]);
    expect((await chat(a, 'POST', '/messages', { channel: 'C0NOSUCH01', text: 'x' })).body).toMatchObject({ error: 'channel_not_found', status: 404 });

    const logs = await server.request('GET', '/v0/logs', { key: a.identity.rawKey });
    const sentLog = logs.body.logs.find((l: { action: string }) => l.action === 'chat.message_sent');
    expect(sentLog.metadata).toMatchObject({ channel: 'C0RANDOM01' });
    expect(JSON.stringify(logs.body)).not.toContain('all green');
  });

  it('validates input and passes the platform’s rate limit on as 429 with Retry-After', async () => {
    const a = await connected();
    platform.invite('general');
    const bad = [
      { channel: 'general', text: 'names are not ids' }, { channel: 'C0GENERAL1', text: '   ' }, { channel: 'C0GENERAL1' },
      { channel: 'C0GENERAL1', text: 'x'.repeat(40_001) }, { channel: 'C0GENERAL1', text: 'x', threadTs: 'yesterday' },
      { channel: 'C0GENERAL1', text: 'x', extra: true },
    ];
    for (const body of bad) {
      const res = await chat(a, 'POST', '/messages', body);
      expect([body, res.status]).toEqual([body, 400]);
      expect(res.body).toMatchObject({ error: 'validation_error', status: 400 });
    }
    for (const query of ['?since=yesterday', '?limit=0', '?limit=101', '?channel=../x', '?pageToken=%%%', '?foo=1']) {
      expect([query, (await chat(a, 'GET', `/messages${query}`)).status]).toEqual([query, 400]);
    }
    platform.rateLimitNext(1);
    const limited = await chat(a, 'POST', '/messages', { channel: 'C0GENERAL1', text: 'hi' });
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('7');
    expect(limited.body).toMatchObject({ error: 'chat_rate_limited', status: 429 });
    expect((await chat(a, 'POST', '/messages', { channel: 'C0GENERAL1', text: 'hi' })).status).toBe(200);
  });
});

describe('inbound messages', () => {
  it('stores what people write in channels the bot is in, once, and serves it newest first with since and channel filters', async () => {
    const a = await connected();
    const teammate = await connected(); // a second identity connected to the same workspace gets its own copy
    platform.invite('general');
    const first = await platform.postAsHuman({ channel: 'general', user: 'alice', text: 'hello agent' });
    expect(first.deliveries.map((d) => d.status)).toEqual([200]);
    await platform.postAsHuman({ channel: 'deals', text: 'the bot is not in here' });
    const mention = await platform.postAsHuman({ channel: 'general', user: 'bob', text: `<@${platform.botUserId}> can you summarise?`, threadTs: first.ts });
    expect(mention.deliveries.map((d) => d.status)).toEqual([200, 200]); // message and app_mention

    let list = (await chat(a, 'GET', '/messages')).body;
    expect(list.count).toBe(2);
    const byText = (text: string) => list.messages.find((m: { text: string }) => m.text === text);
    expect(list.messages[0].receivedAt >= list.messages[1].receivedAt).toBe(true); // newest first
    expect(byText(`<@${platform.botUserId}> can you summarise?`)).toEqual({
      id: expect.stringMatching(/^chm_/), channelId: 'C0GENERAL1', userId: 'U0BOB00001', text: `<@${platform.botUserId}> can you summarise?`,
      ts: mention.ts, threadTs: first.ts, eventType: 'message', receivedAt: expect.any(String),
    });
    expect(byText('hello agent')).toMatchObject({ userId: 'U0ALICE001', ts: first.ts, threadTs: null });

    // The platform retries an event it thinks we missed: nothing new is stored. Our own posts echo back: skipped.
    await platform.pushEvent({ type: 'message', channel: 'C0GENERAL1', user: 'U0ALICE001', text: 'hello agent', ts: first.ts });
    await platform.pushEvent({ type: 'message', channel: 'C0GENERAL1', user: platform.botUserId, text: 'my own post', ts: '1700000000.000001' });
    await platform.pushEvent({ type: 'message', subtype: 'message_changed', channel: 'C0GENERAL1', ts: '1700000000.000002' });
    expect((await chat(a, 'GET', '/messages')).body.count).toBe(2);

    const since = list.messages[0].receivedAt;
    expect((await chat(a, 'GET', `/messages?since=${encodeURIComponent(since)}`)).body).toEqual({ messages: [], count: 0 });
    platform.invite('random');
    await platform.postAsHuman({ channel: 'random', text: 'over here' });
    list = (await chat(a, 'GET', `/messages?since=${encodeURIComponent(since)}`)).body;
    expect(list.messages.map((m: { text: string }) => m.text)).toEqual(['over here']);
    expect((await chat(a, 'GET', '/messages?channel=C0GENERAL1')).body.count).toBe(2);

    expect((await chat(teammate, 'GET', '/messages?channel=C0GENERAL1')).body.messages.map((m: { text: string }) => m.text))
      .toEqual(expect.arrayContaining(['hello agent', `<@${platform.botUserId}> can you summarise?`]));
    // An identity without the workspace sees none of it.
    const other = await signUpAdmin();
    expect((await chat(other, 'GET', '/messages')).body).toEqual({ messages: [], count: 0 });
  });

  it('pages without skipping or repeating while new messages arrive', async () => {
    const a = await connected();
    platform.invite('general');
    for (let i = 0; i < 7; i++) await platform.postAsHuman({ channel: 'general', text: `m${i}` });
    const seen: Array<{ text: string; receivedAt: string }> = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const res = await chat(a, 'GET', `/messages?channel=C0GENERAL1&limit=3${token ? `&pageToken=${token}` : ''}`);
      expect(res.status).toBe(200);
      seen.push(...res.body.messages);
      token = res.body.nextPageToken;
      if (pages++ === 0) await platform.postAsHuman({ channel: 'general', text: 'late' });
    } while (token);
    // Every message exactly once, newest first; the one that arrived meanwhile is newer than page 1 and not in later pages.
    expect(seen.map((m) => m.text).sort()).toEqual(['m0', 'm1', 'm2', 'm3', 'm4', 'm5', 'm6']);
    expect(seen.every((m, i) => i === 0 || seen[i - 1]!.receivedAt >= m.receivedAt)).toBe(true);
    expect(pages).toBe(3);
  });

  it('refuses events without a valid, fresh signature and answers the URL check', async () => {
    await connected();
    platform.invite('general');
    const forged = await platform.pushEvent({ type: 'message', channel: 'C0GENERAL1', user: 'U0ALICE001', text: 'forged', ts: '1700000001.000001' }, { signingSecret: 'not-the-secret' });
    expect(forged.status).toBe(401);
    expect(JSON.parse(forged.body)).toMatchObject({ error: 'invalid_signature', status: 401 });
    const replayed = await platform.pushEvent({ type: 'message', channel: 'C0GENERAL1', user: 'U0ALICE001', text: 'old', ts: '1700000001.000002' }, { timestamp: Math.floor(Date.now() / 1000) - 600 });
    expect(replayed.status).toBe(401);
    const unsigned = await fetch(`${server.url}/v0/chat/events`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"type":"url_verification","challenge":"abc"}' });
    expect(unsigned.status).toBe(401);
    expect(await server.app.chat.messages.countDocuments({ text: { $in: ['forged', 'old'] } })).toBe(0);

    const body = JSON.stringify({ type: 'url_verification', challenge: 'c-123' });
    const timestamp = String(Math.floor(Date.now() / 1000));
    const { createHmac } = await import('node:crypto');
    const signature = `v0=${createHmac('sha256', platform.signingSecret).update(`v0:${timestamp}:${body}`).digest('hex')}`;
    const check = await fetch(`${server.url}/v0/chat/events`, {
      method: 'POST', body, headers: { 'content-type': 'application/json', 'x-slack-request-timestamp': timestamp, 'x-slack-signature': signature },
    });
    expect(await check.json()).toEqual({ challenge: 'c-123' });
  });
});

describe('chat scopes, MCP tools, configuration and key rotation', () => {
  it('enforces chat:read and chat:send', async () => {
    const a = await connected();
    await server.request('PATCH', `/v0/platform/identities/${a.identity.identityId}`, { key: a.platform_key, body: { removeScopes: ['chat:send'] } });
    expect((await chat(a, 'POST', '/messages', { channel: 'C0GENERAL1', text: 'x' })).status).toBe(403);
    expect((await chat(a, 'DELETE', '/connection')).status).toBe(403);
    expect((await chat(a, 'GET', '/channels')).status).toBe(200);
    await server.request('PATCH', `/v0/platform/identities/${a.identity.identityId}`, { key: a.platform_key, body: { removeScopes: ['chat:read'] } });
    for (const path of ['/connection', '/channels', '/messages']) expect((await chat(a, 'GET', path)).status).toBe(403);
    expect((await server.request('GET', '/v0/chat/connection', { key: a.platform_key })).status).toBe(403);
    expect((await server.request('GET', '/v0/chat/connection')).status).toBe(401);
  });

  it('offers chat_list_channels, chat_send_message and chat_list_messages over MCP', async () => {
    const a = await connected();
    platform.invite('general');
    const mcp = new Client({ name: 'chat-test', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${a.identity.rawKey}` } } }));
    const json = (result: Awaited<ReturnType<Client['callTool']>>) => JSON.parse((result.content as Array<{ text: string }>)[0]!.text);
    try {
      const channels = json(await mcp.callTool({ name: 'chat_list_channels', arguments: {} }));
      expect(channels.channels).toEqual(expect.arrayContaining([{ id: 'C0GENERAL1', name: 'general', isPrivate: false, botIsMember: true }]));
      const sent = json(await mcp.callTool({ name: 'chat_send_message', arguments: { channel: 'C0GENERAL1', text: 'from MCP' } }));
      expect(sent).toEqual({ channel: 'C0GENERAL1', ts: expect.any(String) });
      await platform.postAsHuman({ channel: 'general', text: 'thanks bot', threadTs: sent.ts });
      const inbox = json(await mcp.callTool({ name: 'chat_list_messages', arguments: { channel: 'C0GENERAL1', limit: 1 } }));
      expect(inbox.messages).toEqual([expect.objectContaining({ text: 'thanks bot', threadTs: sent.ts })]);
      const refused = await mcp.callTool({ name: 'chat_send_message', arguments: { channel: 'C0RANDOM01', text: 'x' } });
      expect(refused.isError).toBe(true);
      expect(json(refused)).toMatchObject({ error: 'not_in_channel' });
    } finally {
      await mcp.close();
    }
  });

  it('answers 503 on a server without a chat app, and start-up names a half-configured one', async () => {
    const plain = await startTestServer({ TRUST_PROXY: 'true', ADMIN_ORG_IDS: '*' });
    try {
      const a = await signUp(plain);
      expect((await plain.request('POST', '/v0/chat/connect', { key: a.identity.rawKey })).body).toMatchObject({ error: 'chat_not_configured', status: 503 });
      expect((await plain.request('GET', '/v0/chat/connection', { key: a.identity.rawKey })).body).toEqual({ connected: false });
    } finally {
      await plain.close();
    }
    const { CHAT_SIGNING_SECRET: _omitted, ...partial } = platform.backendConfig();
    expect(() => loadConfig({ ...partial, BASE_URL: 'http://x.test', MAIL_DOMAIN: 'x.test', DID_DOMAIN: 'x.test', MASTER_KEY: masterKey, MONGODB_URI: 'mongodb://x' }))
      .toThrow(/^configuration error: CHAT_SIGNING_SECRET is required/);
  });

  it('keeps working after the master key is rotated and the old key retired', async () => {
    const a = await connected();
    platform.invite('general');
    const v2 = randomBytes(32).toString('hex');
    const base = { ...platform.backendConfig(), AGENTGATE_MODE: 'dev', BASE_URL: server.config.BASE_URL, MAIL_DOMAIN: server.config.MAIL_DOMAIN, DID_DOMAIN: server.config.DID_DOMAIN, MONGODB_URI: server.config.MONGODB_URI, MONGODB_DB: server.config.MONGODB_DB };
    const rotation = await createContext(loadConfig({ ...base, MASTER_KEY: v2, MASTER_KEY_VERSION: '2', MASTER_KEYS_PREVIOUS: `1:${masterKey}` }));
    try {
      const report = await rotateMasterKey(rotation);
      expect(report.byLocation).toEqual(expect.arrayContaining([expect.objectContaining({ collection: 'chat_connections', path: 'botToken' })]));
      expect(report.remaining).toBe(0);
    } finally {
      await rotation.close();
    }
    const retired = await createContext(loadConfig({ ...base, MASTER_KEY: v2, MASTER_KEY_VERSION: '2' }));
    try {
      const sent = await retired.chat.send({ orgId: a.org_id, identityId: a.identity.identityId }, { channel: 'C0GENERAL1', text: 'after rotation' });
      expect(platform.history('general').at(-1)).toMatchObject({ text: 'after rotation', ts: sent.ts });
    } finally {
      await retired.close();
    }
  });
});

describe('the local chat workspace page', () => {
  it('posts as any of its people, replies in a thread, and reloads itself', async () => {
    const a = await connected();
    platform.invite('general');
    const origin = new URL(platform.authorizeUrl).origin;
    const post = (fields: Record<string, string>) => fetch(`${origin}/dev/post`, { method: 'POST', body: new URLSearchParams(fields), redirect: 'manual' });
    expect((await post({ user: 'bob', channel: 'general', text: 'bob here' })).status).toBe(302);
    const root = platform.history('general').at(-1)!;
    expect((await post({ user: 'alice', channel: 'general', text: 'alice answers', thread_ts: root.ts })).status).toBe(302);
    expect(platform.history('general').at(-1)).toMatchObject({ text: 'alice answers', threadTs: root.ts, user: 'U0ALICE001' });
    const page = await (await fetch(`${origin}/`)).text();
    expect(page).toContain('<option value="bob">bob</option>');
    expect(page).toContain('Reply in thread');
    expect(page).toContain('location.reload()');
    // The agent read both, the reply with its thread.
    const inbox = await chat(a, 'GET', '/messages?channel=C0GENERAL1&limit=2');
    expect(inbox.body.messages).toEqual([
      expect.objectContaining({ text: 'alice answers', threadTs: root.ts }),
      expect.objectContaining({ text: 'bob here', userId: 'U0BOB00001' }),
    ]);
  });
});

describe('the admin preview', () => {
  it('refuses every chat route and chat_* tool to an org that is not an admin account, with 403 admin_preview', async () => {
    const member = await signUp(server);
    for (const [method, path, body] of [['GET', '/connection'], ['POST', '/connect'], ['DELETE', '/connection'], ['GET', '/channels'], ['POST', '/messages', { channel: 'C0GENERAL1', text: 'hi' }], ['GET', '/messages']] as const) {
      const res = await chat(member, method, path, body);
      expect([method, path, res.status, res.body.error]).toEqual([method, path, 403, 'admin_preview']);
    }
    const mcp = new Client({ name: 'chat-test', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${member.identity.rawKey}` } } }));
    try {
      const refused = await mcp.callTool({ name: 'chat_list_channels', arguments: {} });
      expect(refused.isError).toBe(true);
      expect(JSON.parse((refused.content as Array<{ text: string }>)[0]!.text)).toMatchObject({ error: 'admin_preview' });
    } finally {
      await mcp.close();
    }
    const types = await server.request('GET', '/v0/identity-types');
    expect(types.body.identityTypes[0].provides).toContainEqual(expect.objectContaining({ capability: 'chat', availability: 'admin_preview' }));
    expect((await server.request('GET', '/v0/whoami', { key: member.platform_key })).body.org).toMatchObject({ admin: false });
  });

  it('opens chat to an org the operator grants with `agentgate admin grant`, and closes it on revoke', async () => {
    const a = await signUp(server);
    expect((await chat(a, 'GET', '/connection')).status).toBe(403);
    // Silent like every test server: the rotation test above left the dev service key sealed under a master
    // key this process does not hold, and its (expected) dev warning would read like a failure in a green run.
    const env = { AGENTGATE_MODE: 'dev', BASE_URL: server.config.BASE_URL, MAIL_DOMAIN: server.config.MAIL_DOMAIN, DID_DOMAIN: server.config.DID_DOMAIN, MASTER_KEY: masterKey, MONGODB_URI: server.config.MONGODB_URI, MONGODB_DB: server.config.MONGODB_DB, LOG_LEVEL: 'silent' };
    const lines: string[] = [];
    const io = { out: (line: string) => lines.push(line), env };
    expect(await adminCommand(io, 'grant', a.org_id)).toBe(0);
    expect(lines.pop()).toContain(`${a.org_id} (`);
    expect(await adminCommand(io, 'list', undefined)).toBe(0);
    expect(lines.pop()).toContain(a.org_id);
    expect(await adminCommand(io, 'grant', 'org_doesnotexist')).toBe(1);
    expect(await adminCommand(io, 'grant', undefined)).toBe(2);
    // Another process made the change: this server sees it once its few-second org cache expires.
    await eventually(async () => expect((await chat(a, 'GET', '/connection')).status).toBe(200));
    expect((await server.request('GET', '/v0/whoami', { key: a.platform_key })).body.org).toMatchObject({ admin: true });
    expect(await adminCommand(io, 'revoke', a.org_id)).toBe(0);
    await eventually(async () => expect((await chat(a, 'GET', '/connection')).status).toBe(403));
  }, 60_000);

  it('treats the orgs listed in ADMIN_ORG_IDS, or every org with `*`, as admins', async () => {
    const [a, b] = [await signUp(server), await signUp(server)];
    const listed = adminCheck({ ADMIN_ORG_IDS: `org_other,${a.org_id}` }, server.app.accounts);
    expect([await listed(a.org_id), await listed(b.org_id)]).toEqual([true, false]);
    expect(await adminCheck({ ADMIN_ORG_IDS: '*' }, server.app.accounts)(b.org_id)).toBe(true);
    expect(await adminCheck({ ADMIN_ORG_IDS: '' }, server.app.accounts)(a.org_id)).toBe(false);
    expect(() => loadConfig({ BASE_URL: 'http://x.test', MAIL_DOMAIN: 'x.test', DID_DOMAIN: 'x.test', MASTER_KEY: masterKey, MONGODB_URI: 'mongodb://x', ADMIN_ORG_IDS: 'org a' }))
      .toThrow(/ADMIN_ORG_IDS/);
  });
});

/** Retries an assertion for a few seconds (a change made by another process, seen after a cache expiry). */
async function eventually(check: () => Promise<void>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try { return await check(); } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}
