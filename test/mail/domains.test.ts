// An org's own mail domain, end to end: the records it is told to publish, served by a real DNS server on
// loopback (dns2) and read back record by record; verification, the scheduled re-check and the events;
// addresses on the domain receiving over real SMTP and sending through a relay to an outside MX, whose
// copy a separate verifier (mailauth) checks against the same DNS: DKIM and DMARC must pass.
import { promises as dnsPromises } from 'node:dns';
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { authenticate } from 'mailauth';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { startReceiver } from '../webhooks/receiver.js';
import { eventually, smtpClient } from './mail-support.js';

/** The outside world's MX: takes any mail over real SMTP and keeps its bytes and envelope. */
async function startOutsideMx() {
  const received: { raw: Buffer; from: string; to: string[]; ip: string; helo: string }[] = [];
  const server = new SMTPServer({
    authOptional: true, hideSTARTTLS: true, logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        received.push({
          raw: Buffer.concat(chunks), from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '', to: session.envelope.rcptTo.map((r) => r.address),
          ip: session.remoteAddress.replace(/^::ffff:/, ''), helo: session.hostNameAppearsAs ?? '',
        });
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.server.address() as AddressInfo).port;
  return { url: `smtp://127.0.0.1:${port}`, received, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

const DOMAIN = 'itscompany.test';
let server: TestServer;
let mx: Awaited<ReturnType<typeof startOutsideMx>>;
let hooks: Awaited<ReturnType<typeof startReceiver>>;

beforeAll(async () => {
  mx = await startOutsideMx();
  hooks = await startReceiver();
  server = await startTestServer({ TRUST_PROXY: 'true', SMTP_RELAY_URL: mx.url, MAIL_MX_HOST: 'mx.agents.test', MAIL_DOMAIN_CHECK_EVERY_MS: '1000', WEBHOOK_RETRY_BASE_MS: '50' });
  // Here only the records set below exist; the service's own sending relay is listed at _spf.agents.test.
  server.dns!.fallbackSpf = null;
  server.dns!.set('_spf.agents.test', 'TXT', ['v=spf1 ip4:127.0.0.1 -all']);
  server.dns!.set('example.org', 'TXT', ['v=spf1 ip4:127.0.0.1 -all']);
});
afterAll(async () => {
  await server?.close();
  await mx?.close();
  await hooks?.close();
});

/** What DNS answers a separate verifier with: the test's loopback server. */
function verifierResolver() {
  const resolver = new dnsPromises.Resolver();
  resolver.setServers([server.dns!.server]);
  return (name: string, type: string) => resolver.resolve(name, type);
}

/** The records an org is told to publish, published: all of them, or all but those listed in `except`. */
function publish(records: { purpose: string; type: string; name: string; value: string }[], except: string[] = []) {
  const txt = new Map<string, string[]>();
  for (const r of records) {
    if (except.includes(r.purpose)) continue;
    if (r.type === 'MX') server.dns!.set(r.name, 'MX', [r.value]);
    else txt.set(r.name, [...(txt.get(r.name) ?? []), r.value]);
  }
  for (const [name, values] of txt) server.dns!.set(name, 'TXT', values);
}

async function check(key: string, domainId: string) {
  const res = await server.request('GET', `/v0/domains/${domainId}`, { key });
  expect(res.status).toBe(200);
  return res.body;
}

const statuses = (body: { records: { purpose: string; status?: string }[] }) => Object.fromEntries(body.records.map((r) => [r.purpose, r.status]));

/** Mail from the outside world (ada@example.org, SPF-authorised for loopback) over real SMTP to our listener. */
async function mailIn(to: string, subject: string) {
  const client = smtpClient(server);
  try {
    return await client.sendMail({ from: 'ada@example.org', to, subject, text: `${subject} body` });
  } finally {
    client.close();
  }
}

async function inbox(key: string) {
  const res = await server.request('GET', '/v0/messages', { key });
  expect(res.status).toBe(200);
  return res.body.messages as any[];
}

let org: Awaited<ReturnType<typeof signUp>>;
let domainId: string;
let records: any[];

describe('a custom mail domain', () => {
  it('is told its records, shows each one missing, wrong (with what was found) or ok, and is verified once they are right', async () => {
    org = await signUp(server);
    const hook = await server.request('POST', '/v0/webhooks', { key: org.identity.rawKey, body: { url: hooks.url, events: ['domain.verified', 'domain.failing'] } });
    expect(hook.status).toBe(201);

    const created = await server.request('POST', '/v0/domains', { key: org.platform_key, body: { domain: 'ItsCompany.TEST.' } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ domain: DOMAIN, status: 'pending', verifiedAt: null });
    domainId = created.body.domainId;
    records = created.body.records;
    expect(records.map((r: any) => [r.purpose, r.type, r.name])).toEqual([
      ['verification', 'TXT', `_agentgate.${DOMAIN}`],
      ['mx', 'MX', DOMAIN],
      ['spf', 'TXT', DOMAIN],
      ['dkim', 'TXT', expect.stringMatching(new RegExp(`^ag\\w+\\._domainkey\\.${DOMAIN.replace('.', '\\.')}$`))],
      ['dmarc', 'TXT', `_dmarc.${DOMAIN}`],
    ]);
    expect(records.find((r: any) => r.purpose === 'mx').value).toBe('mx.agents.test');
    expect(records.find((r: any) => r.purpose === 'spf').value).toBe('v=spf1 include:_spf.agents.test ~all');

    // Half done: the verification TXT is right, the MX and SPF point elsewhere, DKIM and DMARC are not there.
    publish(records, ['mx', 'spf', 'dkim', 'dmarc']);
    server.dns!.set(DOMAIN, 'MX', ['mx.elsewhere.test']);
    server.dns!.set(DOMAIN, 'TXT', ['v=spf1 include:_spf.elsewhere.test -all', 'google-site-verification=abc']);
    const half = await check(org.platform_key, domainId);
    expect(half.status).toBe('pending');
    expect(statuses(half)).toEqual({ verification: 'ok', mx: 'wrong', spf: 'wrong', dkim: 'missing', dmarc: 'missing' });
    expect(half.records.find((r: any) => r.purpose === 'mx').found).toEqual(['mx.elsewhere.test']);
    expect(half.records.find((r: any) => r.purpose === 'spf').found).toEqual(['v=spf1 include:_spf.elsewhere.test -all']);

    // Not verified: no address can be taken on it, and mail to it is refused at RCPT.
    const early = await server.request('POST', `/v0/domains/${domainId}/addresses`, { key: org.platform_key, body: { localPart: 'support', identityId: org.identity.identityId } });
    expect([early.status, early.body.error]).toEqual([409, 'domain_not_verified']);
    await expect(mailIn(`support@${DOMAIN}`, 'too early')).rejects.toMatchObject({ responseCode: 550, response: expect.stringContaining('Relaying denied') });

    publish(records);
    const done = await check(org.platform_key, domainId);
    expect(statuses(done)).toEqual({ verification: 'ok', mx: 'ok', spf: 'ok', dkim: 'ok', dmarc: 'ok' });
    expect(done.status).toBe('verified');
    expect(done.verifiedAt).toEqual(expect.any(String));

    // domain.verified once, however often the domain is checked (by GET and by the scheduled re-check).
    await hooks.next(1);
    await check(org.platform_key, domainId);
    await new Promise((r) => setTimeout(r, 1500));
    const verifiedEvents = hooks.received.filter((r) => r.json?.event === 'domain.verified');
    expect(verifiedEvents).toHaveLength(1);
    expect(verifiedEvents[0]!.json).toMatchObject({ event: 'domain.verified', orgId: org.org_id, data: { domainId, domain: DOMAIN, status: 'verified' } });
    expect(verifiedEvents[0]!.headers['x-service-signature']).toEqual(expect.any(String));
  });

  it('receives mail for an address an identity took on it, and sends from it DKIM-signed: a separate verifier finds dkim=pass and dmarc=pass', async () => {
    const taken = await server.request('POST', `/v0/domains/${domainId}/addresses`, { key: org.platform_key, body: { localPart: 'Support', identityId: org.identity.identityId } });
    expect(taken.status).toBe(201);
    expect(taken.body).toMatchObject({ address: `support@${DOMAIN}`, identityId: org.identity.identityId, domainId });
    const again = await server.request('POST', `/v0/domains/${domainId}/addresses`, { key: org.identity.rawKey, body: { localPart: 'support' } });
    expect(again.status).toBe(409);

    const mine = await server.request('GET', '/v0/mail/addresses', { key: org.identity.rawKey });
    expect(mine.body.addresses).toEqual([
      { address: org.identity.emailAddress, primary: true, usable: true },
      expect.objectContaining({ address: `support@${DOMAIN}`, primary: false, usable: true }),
    ]);

    // In: over SMTP from outside, into the identity's inbox.
    await mailIn(`support@${DOMAIN}`, 'Where is my order?');
    let received: any;
    await eventually(async () => {
      received = (await inbox(org.identity.rawKey)).find((m) => m.subject === 'Where is my order?');
      expect(received).toBeDefined();
    });
    expect(received.to).toEqual([`support@${DOMAIN}`]);

    // Out: the reply comes from the address the mail was sent to, through the relay, signed with the domain's key.
    const reply = await server.request('POST', `/v0/messages/${encodeURIComponent(received.messageId)}/reply`, { key: org.identity.rawKey, body: { text: 'On its way.' } });
    expect(reply.status).toBe(201);
    expect(reply.body.from).toEqual([`support@${DOMAIN}`]);
    let out: (typeof mx.received)[number] | undefined;
    await eventually(() => {
      out = mx.received.find((m) => m.raw.toString().includes('On its way.'));
      expect(out).toBeDefined();
    });
    expect(out!.from).toBe(`support@${DOMAIN}`);
    expect(out!.raw.toString()).toMatch(/^In-Reply-To: /m);
    const verdict: any = await authenticate(out!.raw, { ip: out!.ip, helo: out!.helo, sender: out!.from, mta: 'mx.outside.test', resolver: verifierResolver() as never, disableBimi: true });
    const dkimKey = records.find((r: any) => r.purpose === 'dkim');
    expect(verdict.dkim.results.map((r: any) => [r.signingDomain, r.selector, r.status.result])).toEqual([[DOMAIN, dkimKey.name.split('.')[0], 'pass']]);
    expect(verdict.dmarc.status.result).toBe('pass');
    expect(verdict.spf.status.result).toBe('pass');

    // A new message with an explicit From, to another of our own inboxes: delivered inside, the sender known.
    const colleague = await signUp(server);
    const sent = await server.request('POST', '/v0/messages/send', { key: org.identity.rawKey, body: { from: `SUPPORT@${DOMAIN}`, to: [colleague.identity.emailAddress], subject: 'From the shop', text: 'hello' } });
    expect([sent.status, sent.body.from]).toEqual([201, [`support@${DOMAIN}`]]);
    await eventually(async () => {
      const got = (await inbox(colleague.identity.rawKey)).find((m) => m.subject === 'From the shop');
      expect(got).toMatchObject({ from: [`support@${DOMAIN}`] });
    });
  });

  it('refuses a From that is not the sender\'s own, a wrong key and another org\'s domain', async () => {
    const other = await signUp(server);
    const forged = await server.request('POST', '/v0/messages/send', { key: other.identity.rawKey, body: { from: `support@${DOMAIN}`, to: ['x@example.org'], subject: 's', text: 't' } });
    expect([forged.status, forged.body.error]).toEqual([403, 'from_not_allowed']);
    const unknown = await server.request('POST', '/v0/messages/send', { key: org.identity.rawKey, body: { from: `nobody@${DOMAIN}`, to: ['x@example.org'], subject: 's', text: 't' } });
    expect([unknown.status, unknown.body.error]).toEqual([403, 'from_not_allowed']);
    expect((await server.request('GET', `/v0/domains/${domainId}`, { key: other.platform_key })).status).toBe(404);
    expect((await server.request('DELETE', `/v0/domains/${domainId}`, { key: other.platform_key })).status).toBe(404);
    expect((await server.request('POST', `/v0/domains/${domainId}/addresses`, { key: other.platform_key, body: { localPart: 'x', identityId: other.identity.identityId } })).status).toBe(404);
    // A platform key cannot give an address to another org's identity.
    expect((await server.request('POST', `/v0/domains/${domainId}/addresses`, { key: org.platform_key, body: { localPart: 'x', identityId: other.identity.identityId } })).status).toBe(404);
    expect((await server.request('GET', '/v0/domains', { key: other.platform_key })).body).toEqual({ domains: [], count: 0 });

    // The other org may claim the name, but not verify it while this org holds it, even with every record right.
    const claim = await server.request('POST', '/v0/domains', { key: other.platform_key, body: { domain: DOMAIN } });
    expect(claim.status).toBe(201);
    const theirs = claim.body.records;
    server.dns!.set(`_agentgate.${DOMAIN}`, 'TXT', [records[0].value, theirs[0].value]);
    server.dns!.set(theirs[3].name, 'TXT', [theirs[3].value]);
    const standing = await check(other.platform_key, claim.body.domainId);
    expect(statuses(standing)).toEqual({ verification: 'ok', mx: 'ok', spf: 'ok', dkim: 'ok', dmarc: 'ok' });
    expect(standing.status).toBe('pending');
    expect(standing.problem).toMatch(/Another organisation verified/);
    expect((await check(org.platform_key, domainId)).status).toBe('verified');
    expect((await server.request('DELETE', `/v0/domains/${claim.body.domainId}`, { key: other.platform_key })).status).toBe(200);

    for (const body of [{ domain: 'not a domain' }, { domain: 'agents.test' }, { domain: 'inbox.agents.test' }, { domain: DOMAIN, extra: 1 }, {}]) {
      const res = await server.request('POST', '/v0/domains', { key: org.platform_key, body });
      expect([JSON.stringify(body), res.status, res.body.error]).toEqual([JSON.stringify(body), 400, 'validation_error']);
    }
    expect((await server.request('POST', '/v0/domains', { key: org.platform_key, body: { domain: DOMAIN } })).status).toBe(409);
    expect((await server.request('POST', `/v0/domains/${domainId}/addresses`, { key: org.platform_key, body: { localPart: '..bad', identityId: org.identity.identityId } })).status).toBe(400);
  });

  it('rotates its DKIM key: the old key signs until DNS shows the new one, then the new one signs and the old one retires', async () => {
    const rotated = await server.request('POST', `/v0/domains/${domainId}/dkim/rotate`, { key: org.platform_key });
    expect(rotated.status).toBe(200);
    const dkim = rotated.body.records.filter((r: any) => r.purpose === 'dkim');
    expect(dkim.map((r: any) => r.required)).toEqual([true, false]);
    const [oldKey, newKey] = dkim;
    expect((await check(org.platform_key, domainId)).status).toBe('verified');

    const signedWith = async (subject: string) => {
      const sent = await server.request('POST', '/v0/messages/send', { key: org.identity.rawKey, body: { from: `support@${DOMAIN}`, to: ['rotation@example.org'], subject, text: subject } });
      expect(sent.status).toBe(201);
      let out: (typeof mx.received)[number] | undefined;
      await eventually(() => {
        out = mx.received.find((m) => m.raw.toString().includes(`Subject: ${subject}`));
        expect(out).toBeDefined();
      });
      const verdict: any = await authenticate(out!.raw, { ip: out!.ip, helo: out!.helo, sender: out!.from, mta: 'mx.outside.test', resolver: verifierResolver() as never, disableBimi: true });
      expect(verdict.dmarc.status.result).toBe('pass');
      return verdict.dkim.results.map((r: any) => [r.selector, r.status.result]);
    };
    expect(await signedWith('before the new key is published')).toEqual([[oldKey.name.split('.')[0], 'pass']]);

    server.dns!.set(newKey.name, 'TXT', [newKey.value]);
    const after = await check(org.platform_key, domainId);
    expect(after.records.filter((r: any) => r.purpose === 'dkim').map((r: any) => [r.name, r.required, r.status])).toEqual([[newKey.name, true, 'ok']]);
    expect(await signedWith('after the new key is published')).toEqual([[newKey.name.split('.')[0], 'pass']]);
    records = after.records;
  });

  it('fails when a record breaks (the scheduled re-check sees it): its addresses neither send nor receive until it is fixed', async () => {
    const dmarc = records.find((r: any) => r.purpose === 'dmarc');
    server.dns!.set(dmarc.name, 'TXT', ['v=spf1 nonsense']);
    // No request asks: the scheduled re-check (every second here) finds it.
    await eventually(async () => {
      const listed = await server.request('GET', '/v0/domains', { key: org.platform_key });
      expect(listed.body.domains[0]).toMatchObject({ domainId, status: 'failing', failingSince: expect.any(String) });
    }, 10_000);
    await eventually(() => expect(hooks.received.filter((r) => r.json?.event === 'domain.failing')).toHaveLength(1));
    expect(hooks.received.find((r) => r.json?.event === 'domain.failing')!.json.data.records).toEqual([
      { purpose: 'dmarc', name: dmarc.name, status: 'wrong', found: ['v=spf1 nonsense'] },
    ]);

    const send = await server.request('POST', '/v0/messages/send', { key: org.identity.rawKey, body: { from: `support@${DOMAIN}`, to: ['x@example.org'], subject: 's', text: 't' } });
    expect([send.status, send.body.error]).toEqual([403, 'from_not_allowed']);
    await expect(mailIn(`support@${DOMAIN}`, 'while failing')).rejects.toMatchObject({ responseCode: 550 });
    const mine = await server.request('GET', '/v0/mail/addresses', { key: org.identity.rawKey });
    expect(mine.body.addresses[1]).toMatchObject({ address: `support@${DOMAIN}`, usable: false });

    server.dns!.set(dmarc.name, 'TXT', [dmarc.value]);
    expect((await check(org.platform_key, domainId)).status).toBe('verified');
    await mailIn(`support@${DOMAIN}`, 'after the fix');
    await eventually(async () => expect((await inbox(org.identity.rawKey)).some((m) => m.subject === 'after the fix')).toBe(true));
    // Verified again: announced again (a second change of standing), once.
    await eventually(() => expect(hooks.received.filter((r) => r.json?.event === 'domain.verified')).toHaveLength(2));
  });

  it('deleting the domain deletes its addresses: mail to them is refused', async () => {
    const removed = await server.request('DELETE', `/v0/domains/${domainId}`, { key: org.platform_key });
    expect(removed.body).toEqual({ domainId, deleted: true });
    await expect(mailIn(`support@${DOMAIN}`, 'after delete')).rejects.toMatchObject({ responseCode: 550 });
    const mine = await server.request('GET', '/v0/mail/addresses', { key: org.identity.rawKey });
    expect(mine.body.addresses).toHaveLength(1);
  });
});
