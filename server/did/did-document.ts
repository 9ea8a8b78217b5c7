import { ed25519ToMultibase, parseEd25519PublicKey } from 'agentgate-x402-wire';

export const DID_CONTEXT = ['https://www.w3.org/ns/did/v1', 'https://w3id.org/security/multikey/v1'];

export interface VerificationMethod {
  id: string;
  type: string;
  controller: string;
  publicKeyMultibase?: string;
  publicKeyJwk?: { kty?: string; crv?: string; x?: string };
}

export interface DidDocument {
  '@context'?: string | string[];
  id: string;
  verificationMethod?: VerificationMethod[];
  authentication?: Array<string | VerificationMethod>;
  assertionMethod?: Array<string | VerificationMethod>;
  service?: Array<{ id: string; type: string; serviceEndpoint: string }>;
}

export const identityDid = (didDomain: string, identityId: string) => `did:web:${didDomain}:identities:${identityId}`;

/** A DID document with one Ed25519 Multikey used for both authentication and assertions. */
export function didDocument(did: string, publicKey: Uint8Array, service: DidDocument['service'] = []): DidDocument {
  const keyId = `${did}#key-1`;
  return {
    '@context': DID_CONTEXT,
    id: did,
    verificationMethod: [{ id: keyId, type: 'Multikey', controller: did, publicKeyMultibase: ed25519ToMultibase(publicKey) }],
    authentication: [keyId],
    assertionMethod: [keyId],
    ...(service.length ? { service } : {}),
  };
}

/**
 * The did:web method's mapping to a URL: `did:web:host%3Aport:a:b` -> `https://host:port/a/b/did.json`, a
 * bare host -> `/.well-known/did.json`. Returns null for anything that is not a well-formed did:web.
 */
export function didWebLocation(did: string): { host: string; path: string } | null {
  const match = /^did:web:([A-Za-z0-9.%-]+)((?::[A-Za-z0-9._%-]+)*)$/.exec(did);
  if (!match) return null;
  let host: string;
  try {
    host = decodeURIComponent(match[1]!);
  } catch {
    return null;
  }
  if (!/^[A-Za-z0-9.-]+(:\d{1,5})?$/.test(host)) return null;
  const segments = match[2] ? match[2].slice(1).split(':') : [];
  if (segments.some((s) => s === '.' || s === '..' || /%2f/i.test(s))) return null;
  return { host, path: segments.length ? `/${segments.join('/')}/did.json` : '/.well-known/did.json' };
}

/**
 * The Ed25519 keys a document offers for assertions (signatures over data): its assertionMethod
 * entries, or every verification method when it lists none. Multikey, Ed25519VerificationKey2020/2018
 * (multibase) and OKP JWKs are understood; anything else is ignored.
 */
export function assertionKeys(doc: DidDocument): Array<{ id: string; publicKey: Uint8Array }> {
  const methods = new Map((doc.verificationMethod ?? []).map((m) => [m.id, m]));
  const resolveRef = (entry: string | VerificationMethod) => {
    if (typeof entry !== 'string') return entry;
    return methods.get(entry) ?? methods.get(`${doc.id}${entry.startsWith('#') ? entry : `#${entry}`}`);
  };
  const chosen = (doc.assertionMethod?.length ? doc.assertionMethod.map(resolveRef) : [...methods.values()]).filter((m): m is VerificationMethod => Boolean(m));
  const keys: Array<{ id: string; publicKey: Uint8Array }> = [];
  for (const method of chosen) {
    let publicKey: Uint8Array | undefined;
    if (method.publicKeyMultibase && ['Multikey', 'Ed25519VerificationKey2020'].includes(method.type)) {
      publicKey = method.publicKeyMultibase.startsWith('z') ? parseEd25519PublicKey(method.publicKeyMultibase) : undefined;
    } else if (method.publicKeyJwk?.kty === 'OKP' && method.publicKeyJwk.crv === 'Ed25519' && method.publicKeyJwk.x) {
      publicKey = parseEd25519PublicKey(method.publicKeyJwk.x);
    }
    if (publicKey?.length === 32) keys.push({ id: method.id, publicKey });
  }
  return keys;
}
