// Search over the word index kept in the database (server/mail/mail-search.ts), over real SMTP and sends.
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { wordsOf } from '../../server/mail/mail-search.js';
import { eventually, smtpClient } from './mail-support.js';

let server: TestServer;
beforeAll(async () => { server = await startTestServer({ TRUST_PROXY: 'true' }); });
afterAll(async () => { await server.close(); });

async function search(key: string, query: string) {
  const res = await server.request('GET', `/v0/messages/search?${query}`, { key });
  return res;
}
const subjects = (res: { body: { messages: any[] } }) => res.body.messages.map((m) => m.subject);

it('splits text into lower-cased words, addresses whole and by domain, accents folded', () => {
  expect(wordsOf('Invoice #42 from Ada.Lovelace@Example.org: Café, déjà-vu!')).toEqual(
    ['invoice', '42', 'from', 'ada.lovelace@example.org', 'example.org', 'ada', 'lovelace', 'example', 'org', 'cafe', 'deja', 'vu']);
});

describe('GET /v0/messages/search', () => {
  let agent: Awaited<ReturnType<typeof signUp>>;
  let key: string;
  beforeAll(async () => {
    agent = await signUp(server);
    key = agent.identity.rawKey;
    const human = smtpClient(server);
    await human.sendMail({ from: 'ada@example.org', to: agent.identity.emailAddress, subject: 'Invoice 42 for March', text: 'Please pay the invoice by Friday.' });
    await human.sendMail({ from: 'bob@billing.example', to: agent.identity.emailAddress, subject: 'Reminder', text: 'The invoice 42 is overdue. Regards, Bob' });
    await human.sendMail({ from: 'carol@example.org', to: agent.identity.emailAddress, subject: 'Lunch on Friday?', text: 'Pizza or sushi?' });
    human.close();
    for (let i = 1; i <= 5; i++) {
      const sent = await server.request('POST', '/v0/messages/send', { key, body: { to: [`dave${i}@partner.example`], subject: `Quarterly report part ${i}`, text: 'The quarterly numbers.' } });
      expect(sent.status).toBe(201);
    }
  });

  it('finds words in subject, body, sender and recipients; all words must match; subject ranks above body', async () => {
    const invoice = await search(key, 'q=invoice');
    expect(invoice.status).toBe(200);
    expect(subjects(invoice)).toEqual(['Invoice 42 for March', 'Reminder']); // subject + body beats body alone
    expect(invoice.body.messages[0].score).toBeGreaterThan(invoice.body.messages[1].score);
    expect(subjects(await search(key, 'q=OVERDUE'))).toEqual(['Reminder']);
    expect(subjects(await search(key, 'q=bob%40billing.example'))).toEqual(['Reminder']);
    expect(subjects(await search(key, 'q=billing.example'))).toEqual(['Reminder']);
    expect(subjects(await search(key, 'q=dave3%40partner.example'))).toEqual(['Quarterly report part 3']);
    expect(subjects(await search(key, 'q=invoice%20friday'))).toEqual(['Invoice 42 for March']);
    expect(subjects(await search(key, 'q=friday'))).toEqual(['Lunch on Friday?', 'Invoice 42 for March']);
    expect((await search(key, 'q=nothing-like-this')).body).toEqual({ messages: [], count: 0 });
  });

  it('filters by label and date', async () => {
    expect(subjects(await search(key, 'q=quarterly&labels=sent&limit=10'))).toHaveLength(5);
    expect(subjects(await search(key, 'q=quarterly&labels=unread'))).toEqual([]);
    const [newest] = (await search(key, 'q=quarterly')).body.messages;
    const later = new Date(new Date(newest.createdAt).getTime() + 1000).toISOString();
    expect((await search(key, `q=quarterly&after=${encodeURIComponent(later)}`)).body.count).toBe(0);
    expect((await search(key, `q=quarterly&before=${encodeURIComponent(later)}`)).body.count).toBe(5);
  });

  it('pages ranked results by cursor, each once, new mail not shifting them', async () => {
    const seen: string[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const res = await search(key, `q=quarterly&limit=2${token ? `&pageToken=${token}` : ''}`);
      expect(res.status).toBe(200);
      seen.push(...subjects(res));
      token = res.body.nextPageToken;
      if (pages++ === 0) {
        // Mail arriving between pages sorts above the first page and never into the later ones.
        await server.request('POST', '/v0/messages/send', { key, body: { to: ['erin@partner.example'], subject: 'Quarterly report part 6', text: 'More quarterly numbers.' } });
      }
    } while (token);
    expect(seen).toEqual([5, 4, 3, 2, 1].map((i) => `Quarterly report part ${i}`));
    expect(pages).toBe(3);
    expect((await search(key, 'q=quarterly&limit=1')).body.messages[0].subject).toBe('Quarterly report part 6');
  });

  it('keeps unverified mail out unless asked for, and another identity\'s mail out always', async () => {
    server.dns!.set('_dmarc.paypal.com', 'TXT', ['v=DMARC1; p=reject']);
    server.dns!.set('paypal.com', 'TXT', ['v=spf1 -all']);
    const attacker = smtpClient(server);
    await attacker.sendMail({ envelope: { from: 'x@evil.example', to: [agent.identity.emailAddress] }, from: 'ceo@paypal.com', to: agent.identity.emailAddress, subject: 'Invoice overdue', text: 'Pay now' });
    attacker.close();
    await eventually(async () => expect((await search(key, 'q=pay&labels=unauthenticated')).body.count).toBe(1));
    expect(subjects(await search(key, 'q=invoice'))).toEqual(['Invoice 42 for March', 'Reminder']);

    const other = await signUp(server);
    expect((await search(other.identity.rawKey, 'q=invoice')).body.count).toBe(0);
    expect((await search(key, '')).body).toMatchObject({ error: 'validation_error', status: 400 });
    expect((await search(key, 'q=%21%21%21')).body).toMatchObject({ error: 'validation_error', status: 400 });
    expect((await search(key, 'q=invoice&pageToken=garbage')).body).toMatchObject({ error: 'invalid_page_token', status: 400 });
    expect((await search('', 'q=invoice')).status).toBe(401);
  });
});

describe('mail the word index has not seen', () => {
  it('is indexed at start: all of it once per database, then the last minutes (a process that died before indexing)', async () => {
    const agent = await signUp(server);
    const key = agent.identity.rawKey;
    const human = smtpClient(server);
    await human.sendMail({ from: 'erin@example.org', to: agent.identity.emailAddress, subject: 'Archive of the zeppelin project', text: 'Old mail.' });
    human.close();
    await eventually(async () => (await search(key, 'q=zeppelin')).body.count === 1);
    // As mail stored before search existed, or by a process that died before indexing it, has no postings.
    const [message] = (await search(key, 'q=zeppelin')).body.messages;
    const stored = (await server.app.mail.messages.findOne({ messageId: message.messageId, inboxId: agent.identity.emailAddress }).lean())!;
    const postings = server.app.mail.searchIndex.postings;
    await postings.deleteMany({ m: stored._id });
    expect((await search(key, 'q=zeppelin')).body.count).toBe(0);

    // This database was gone through at start (the marker is set): a later start looks at recent mail only.
    const muchLater = new Date(message.createdAt).getTime() + 60 * 60_000;
    await server.app.mail.indexUnsearched(muchLater);
    expect((await search(key, 'q=zeppelin')).body.count).toBe(0);
    await server.app.mail.indexUnsearched();
    expect(subjects(await search(key, 'q=zeppelin'))).toEqual(['Archive of the zeppelin project']);

    // A database never gone through (no marker): one process walks everything, however old; while its walk
    // is recent, another start walks nothing old; a walk whose process died an hour ago is taken over.
    await postings.deleteMany({ m: stored._id });
    await server.app.mail.messages.db.collection('mail_sequence').deleteOne({ _id: 'search-indexed-v1' } as never);
    const started = Date.now();
    expect(await server.app.mail.indexUnsearched(started + 30 * 60_000)).toBe(0); // the start-up walk's claim holds
    expect((await search(key, 'q=zeppelin')).body.count).toBe(0);
    expect(await server.app.mail.indexUnsearched(started + 2 * 60 * 60_000)).toBeGreaterThanOrEqual(1);
    expect(subjects(await search(key, 'q=zeppelin'))).toEqual(['Archive of the zeppelin project']);
  });
});
