import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { openStorefront } from '../support/storefront.js';
import { fundedBuyer, paymentHeaderV1, signAuthorization } from '../support/chain.js';
import { freePort } from '../../server/platform/net.js';
import { verifyReceiptSignatureJWS } from '@x402/extensions/offer-receipt';

const run = promisify(execFile);
const CLI = join(process.cwd(), 'bin', 'agentgate.js');
let server: TestServer;
let dir: string;
let report: string;
let platformKey: string;
let paymentId: string;

async function cli(args: string[]) {
  try {
    const { stdout } = await run('node', [CLI, ...args], { env: { ...process.env, AGENTGATE_CREDENTIALS: join(dir, 'none.json') }, timeout: 30_000 });
    return { code: 0, stdout };
  } catch (err) {
    const e = err as { code: number; stdout: string };
    return { code: e.code, stdout: e.stdout };
  }
}

/** A new org on `on` that sells one endpoint and has been paid for it once: its platform key and the payment. */
async function paidOnce(on: TestServer): Promise<{ platformKey: string; paymentId: string; report: string; payAgain(): Promise<string> }> {
  const agent = await signUp(on);
  const payTo = privateKeyToAccount(generatePrivateKey()).address;
  await on.request('PUT', '/v0/payments/acceptance', { key: agent.platform_key, body: { enabled: true, payTo } });
  const sellerKey = (await on.request('POST', '/v0/payments/seller-keys', { key: agent.platform_key, body: {} })).body.apiKey;
  const report = (await openStorefront(on, { platformKey: agent.platform_key, sellerKey }, { 'GET /report': { price: '$0.25' } })).resource('/report');
  const buyer = await fundedBuyer('1');
  const pay = async () => {
    const header = paymentHeaderV1(await signAuthorization(buyer, { to: payTo, value: 250_000n }));
    const redeemed = await on.request('POST', '/v0/payments/redeem', { key: sellerKey, body: { paymentHeader: header, resource: report, amount: '0.25' } });
    expect(redeemed.status).toBe(200);
    return redeemed.body.paymentId as string;
  };
  return { platformKey: agent.platform_key, paymentId: await pay(), report, payAgain: pay };
}

beforeAll(async () => {
  server = await startTestServer();
  dir = mkdtempSync(join(tmpdir(), 'agentgate-receipts-'));
  ({ platformKey, paymentId, report } = await paidOnce(server));
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The service DID document as a verifier keeps it offline. */
function didDocumentFile(): string {
  const key = server.app.serviceKey;
  const file = join(dir, 'did.json');
  writeFileSync(file, JSON.stringify({
    id: key.did,
    verificationMethod: [{ id: key.keyId, type: 'Multikey', controller: key.did, publicKeyMultibase: key.publicKeyMultibase }],
    assertionMethod: [key.keyId],
  }));
  return file;
}

describe('agentgate receipts', () => {
  it('lists the org’s payments for an ops person', async () => {
    const res = await cli(['receipts', 'list', '--url', server.url, '--key', platformKey]);
    expect(res.code).toBe(0);
    expect(res.stdout).toContain(paymentId);
    expect(res.stdout).toContain('settled');
    expect(res.stdout).toContain('0.25 USDC');
    expect(res.stdout).toContain(report); // the resource paid for
  });

  it('pages through payments with --cursor or --all, prints JSON with --json, and explains a --limit out of range', async () => {
    const org = await paidOnce(server);
    const ids = [org.paymentId, await org.payAgain(), await org.payAgain()].reverse(); // newest first
    const base = ['receipts', 'list', '--url', server.url, '--key', org.platformKey];
    const first = await cli([...base, '--limit', '2', '--json']);
    expect(first.code).toBe(0);
    const page1 = JSON.parse(first.stdout);
    expect(page1.payments.map((p: any) => p.id)).toEqual(ids.slice(0, 2));
    expect(page1.payments[0]).toMatchObject({ resourceUrl: org.report, status: 'settled' });
    expect(page1.nextCursor).toEqual(expect.any(String));
    const next = await cli([...base, '--limit', '2', '--cursor', page1.nextCursor]);
    expect(next.code).toBe(0);
    expect(next.stdout).toContain(ids[2]);
    expect(next.stdout).not.toContain(ids[0]);
    // In text, the way to the next page is spelled out.
    const text = await cli([...base, '--limit', '1']);
    expect(text.stdout).toMatch(/^more: agentgate receipts list --cursor \S+ --limit 1/m);
    const all = await cli([...base, '--all', '--json']);
    expect(JSON.parse(all.stdout).payments.map((p: any) => p.id)).toEqual(ids);
    expect(JSON.parse(all.stdout).nextCursor).toBeUndefined();

    const tooMany = await cli([...base, '--limit', '500']);
    expect(tooMany.code).toBe(2);
    expect(tooMany.stdout.trim()).toBe('agentgate receipts list: --limit must be a whole number from 1 to 100 (a page); to list every payment, use --all, or follow --cursor from page to page');
    const badCursor = await cli([...base, '--cursor', 'nonsense']);
    expect(badCursor.code).toBe(1);
    expect(badCursor.stdout.trim()).toBe('agentgate receipts list: the cursor "nonsense" is not one this backend gave out');
  });

  it('verifies a receipt by payment id against the DID document the server publishes', async () => {
    const res = await cli(['receipts', 'verify', paymentId, '--url', server.url, '--key', platformKey]);
    expect(res.code).toBe(0);
    expect(res.stdout).toContain(`signed by did:web:${server.config.DID_DOMAIN}`);
    expect(res.stdout).toContain(`valid offer-receipt (JWS, EdDSA) signed by did:web:${server.config.DID_DOMAIN}#key-1`);
  });

  it('agrees with the official verifier: valid where the DID resolves, invalid where it names an address nobody answers', async () => {
    // The server's own DID resolves where it runs: both say valid.
    const payment = (await server.request('GET', `/v0/payments/${paymentId}`, { key: platformKey })).body;
    await expect(verifyReceiptSignatureJWS(payment.offerReceipt)).resolves.toMatchObject({ payer: expect.any(String) });
    expect((await cli(['receipts', 'verify', paymentId, '--url', server.url, '--key', platformKey])).code).toBe(0);

    // A backend whose DID names a port nothing listens on (agentgate dev moved off its first port): the
    // official verifier cannot resolve the key, and the CLI must not call the receipt valid either, even
    // though the backend it talks to serves a matching document.
    const deadPort = await freePort();
    const moved = await startTestServer({ DID_DOMAIN: `localhost%3A${deadPort}` });
    try {
      const paid = await paidOnce(moved);
      const record = (await moved.request('GET', `/v0/payments/${paid.paymentId}`, { key: paid.platformKey })).body;
      await expect(verifyReceiptSignatureJWS(record.offerReceipt)).rejects.toThrow(`Failed to resolve did:web:localhost%3A${deadPort}`);
      const res = await cli(['receipts', 'verify', paid.paymentId, '--url', moved.url, '--key', paid.platformKey]);
      expect(res.code).toBe(1);
      expect(res.stdout).toContain(`INVALID receipt: its DID did:web:localhost%3A${deadPort} cannot be resolved at http://localhost:${deadPort}/.well-known/did.json`);
      expect(res.stdout).toContain(`${moved.url} serves this DID's document, but the DID names another address`);
      expect(res.stdout).not.toMatch(/^valid/m);
    } finally {
      await moved.close();
    }
  });

  it('refuses a payment record whose offer-receipt JWS was altered', async () => {
    const didFile = didDocumentFile();
    const payment = (await server.request('GET', `/v0/payments/${paymentId}`, { key: platformKey })).body;
    const [header, payload, signature] = payment.offerReceipt.signature.split('.');
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
    const forged = Buffer.from(JSON.stringify({ ...claims, payer: '0x000000000000000000000000000000000000dEaD' })).toString('base64url');
    const file = join(dir, 'forged-record.json');
    writeFileSync(file, JSON.stringify({ ...payment, offerReceipt: { format: 'jws', signature: `${header}.${forged}.${signature}` } }));
    const res = await cli(['receipts', 'verify', file, '--did-document', didFile]);
    expect(res.code).toBe(1);
    expect(res.stdout).toContain('INVALID offer-receipt (JWS): signature_mismatch');
  });

  it('verifies a receipt fetched by payment id, and one saved to a file, offline', async () => {
    const didFile = didDocumentFile();
    const byId = await cli(['receipts', 'verify', paymentId, '--url', server.url, '--key', platformKey, '--did-document', didFile]);
    expect(byId.code).toBe(0);
    expect(byId.stdout).toContain(`valid receipt for payment ${paymentId}`);

    const payment = await server.request('GET', `/v0/payments/${paymentId}`, { key: platformKey });
    const saved = join(dir, 'receipt.json');
    writeFileSync(saved, JSON.stringify(payment.body.signedReceipt));
    expect((await cli(['receipts', 'verify', saved, '--did-document', didFile])).code).toBe(0);

    const tampered = join(dir, 'tampered.json');
    const receipt = payment.body.signedReceipt;
    writeFileSync(tampered, JSON.stringify({ ...receipt, body: { ...receipt.body, amountUsdcRaw: '25000000' } }));
    const bad = await cli(['receipts', 'verify', tampered, '--did-document', didFile]);
    expect(bad.code).toBe(1);
    expect(bad.stdout).toContain('INVALID receipt: signature_mismatch');
  });

  it('a receipt file that is missing, not JSON or holds no receipt, and a missing DID document, are one line each and exit 2', async () => {
    const didFile = didDocumentFile();
    const missing = join(dir, 'no-such-receipt.json');
    // Before, a missing file was taken for a payment id and answered "no key: pass --key ...".
    expect(await cli(['receipts', 'verify', missing])).toEqual({ code: 2, stdout: `no such file: ${missing} (a payment record saved from GET /v0/payments/{id}, or its signedReceipt)\n` });
    const garbage = join(dir, 'garbage.json');
    writeFileSync(garbage, 'not json');
    expect(await cli(['receipts', 'verify', garbage])).toEqual({ code: 2, stdout: `${garbage} is not JSON (a payment record saved from GET /v0/payments/{id}, or its signedReceipt)\n` });
    // The DID document given where the receipt belongs.
    expect(await cli(['receipts', 'verify', didFile])).toEqual({ code: 2, stdout: `${didFile} holds no signed receipt (expected a payment record saved from GET /v0/payments/{id}, or its signedReceipt)\n` });
    const payment = await server.request('GET', `/v0/payments/${paymentId}`, { key: platformKey });
    const saved = join(dir, 'record.json');
    writeFileSync(saved, JSON.stringify(payment.body));
    const noDid = join(dir, 'no-did.json');
    expect(await cli(['receipts', 'verify', saved, '--did-document', noDid])).toEqual({ code: 2, stdout: `no such file: ${noDid} (a DID document, e.g. saved from /.well-known/did.json)\n` });
  });
});
