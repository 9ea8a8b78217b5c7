import { didWebLocation } from '../did/did-document.js';
import type { DidDocument } from 'agentgate-x402-wire';

export type DidResolution =
  | { ok: true; url: string; document: DidDocument }
  | { ok: false; url?: string; reason: string };

/**
 * Resolves a did:web the way a buyer's verifier does (the official `verifyReceiptSignatureJWS` of
 * @x402/extensions): from the address the DID names, over http for localhost and 127.0.0.1 and https
 * elsewhere, never from the backend the CLI happens to talk to. A receipt is only as verifiable as its
 * DID is resolvable, so `agentgate receipts verify` says "valid" only where a buyer could too.
 */
export async function resolveDidWeb(did: string, fetchImpl: typeof fetch = fetch): Promise<DidResolution> {
  const location = didWebLocation(did);
  if (!location) return { ok: false, reason: `${did} is not a did:web DID` };
  const hostname = location.host.split(':')[0];
  const scheme = hostname === 'localhost' || hostname === '127.0.0.1' ? 'http' : 'https';
  const url = `${scheme}://${location.host}${location.path}`;
  let res: Response;
  try {
    res = await fetchImpl(url, { headers: { accept: 'application/did+json, application/json' }, signal: AbortSignal.timeout(10_000) });
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message;
    return { ok: false, url, reason: cause };
  }
  if (!res.ok) return { ok: false, url, reason: `HTTP ${res.status}` };
  const document = await res.json().catch(() => undefined) as DidDocument | undefined;
  if (!document || typeof document !== 'object') return { ok: false, url, reason: 'the answer is not a JSON document' };
  if (document.id !== did) return { ok: false, url, reason: `the document there is ${JSON.stringify(document.id)}, not ${did}` };
  return { ok: true, url, document };
}
