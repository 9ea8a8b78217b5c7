import { getPublicKeyAsync, signAsync, utils, verifyAsync } from '@noble/ed25519';
import type { Connection, Model } from 'mongoose';
import type { Config } from '../platform/config.js';
import type { SecretBox } from '../platform/secret-box.js';
import type { ActivityLog } from '../platform/activity-log.js';
import type { IdentityService } from '../identities/identity-service.js';
import type { ServiceKey } from './service-key.js';
import { AppError, notFound, isDuplicateKey } from '../platform/errors.js';
import { guardedFetch, GuardedFetchError, outboundPolicy } from '../platform/ssrf.js';
import { assertionKeys, didDocument, didWebLocation, identityDid, type DidDocument } from './did-document.js';
import { IDENTITY_KEYS_COLLECTION, identityKeySchema, type IdentityKeyDoc } from './identity-key-model.js';

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]', '::1']);
const unresolvable = (did: string, why: string) => new AppError(422, 'did_resolution_failed', `Could not resolve ${did}: ${why}`);

export interface DidOwner { orgId: string; identityId: string }

/** did:web identities: a key pair per identity, DID documents, signing, and verification against any did:web. */
export class DidService {
  private readonly keys: Model<IdentityKeyDoc>;

  constructor(
    conn: Connection,
    private readonly config: Config,
    private readonly secrets: SecretBox,
    private readonly identities: IdentityService,
    private readonly serviceKey: () => ServiceKey,
    private readonly logs: ActivityLog,
  ) {
    this.keys = conn.models.IdentityDidKey ?? conn.model<IdentityKeyDoc>('IdentityDidKey', identityKeySchema, IDENTITY_KEYS_COLLECTION);
  }

  didOf(identityId: string): string {
    return identityDid(this.config.DID_DOMAIN, identityId);
  }

  documentUrlOf(identityId: string): string {
    return `${this.config.BASE_URL}/identities/${identityId}/did.json`;
  }

  private sealContext(identityId: string) {
    return `did-key:${identityId}`;
  }

  /** The identity's key, made on first use. The identityId is the `_id`, so racing creators agree on one key. */
  private async keyOf(owner: DidOwner): Promise<IdentityKeyDoc> {
    const existing = await this.keys.findById(owner.identityId).lean();
    if (existing) return existing;
    const seed = utils.randomSecretKey();
    const publicKey = await getPublicKeyAsync(seed);
    try {
      const created = await this.keys.create({
        _id: owner.identityId, orgId: owner.orgId, publicKey: Buffer.from(publicKey).toString('base64'),
        sealedSeed: this.secrets.seal(Buffer.from(seed), this.sealContext(owner.identityId)), createdAt: new Date(),
      });
      return created.toObject();
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
      return (await this.keys.findById(owner.identityId).lean())!;
    } finally {
      seed.fill(0);
    }
  }

  /** The DID document of a live identity; a revoked or unknown identity has none (404). */
  async identityDocument(identityId: string): Promise<DidDocument> {
    const identity = await this.identities.getLive(identityId);
    if (!identity) throw notFound('DID not found');
    const key = await this.keyOf({ orgId: identity.orgId, identityId });
    const did = this.didOf(identityId);
    return didDocument(did, Buffer.from(key.publicKey, 'base64'), [
      { id: `${did}#agent-card`, type: 'AgentCard', serviceEndpoint: `${this.config.BASE_URL}/.well-known/agents/${identity.orgId}` },
    ]);
  }

  serviceDocument(): DidDocument {
    const key = this.serviceKey();
    return didDocument(key.did, key.publicKey);
  }

  /**
   * The service key as a JWK Set (RFC 8037 OKP/Ed25519): the `jku` of the agent cards' JWS signatures,
   * for verifiers that take keys as JWKs rather than from the DID document. Same key, same `kid`.
   */
  serviceJwks() {
    const key = this.serviceKey();
    return { keys: [{ kty: 'OKP', crv: 'Ed25519', x: Buffer.from(key.publicKey).toString('base64url'), kid: key.keyId, use: 'sig', alg: 'EdDSA' }] };
  }

  async sign(owner: DidOwner, data: Uint8Array) {
    const key = await this.keyOf(owner);
    const seed = this.secrets.open(key.sealedSeed, this.sealContext(owner.identityId));
    let signature: Uint8Array;
    try {
      signature = await signAsync(data, seed);
    } finally {
      seed.fill(0);
    }
    const did = this.didOf(owner.identityId);
    await this.logs.record({
      orgId: owner.orgId, identityId: owner.identityId, action: 'identity.signed', category: 'identity',
      description: `Signed ${data.length} bytes as ${did}`, metadata: { bytes: data.length },
    });
    return { signature: Buffer.from(signature).toString('base64'), did, verificationMethod: `${did}#key-1` };
  }

  async verify(owner: DidOwner, input: { data: Uint8Array; signature: Uint8Array; did: string }) {
    const doc = await this.resolve(input.did);
    let matched: string | null = null;
    if (input.signature.length === 64) {
      for (const key of assertionKeys(doc)) {
        if (await verifyAsync(input.signature, input.data, key.publicKey).catch(() => false)) { matched = key.id; break; }
      }
    }
    await this.logs.record({
      orgId: owner.orgId, identityId: owner.identityId, action: 'identity.verified', category: 'identity',
      description: `Verified a signature by ${input.did}: ${matched ? 'valid' : 'invalid'}`, metadata: { did: input.did, valid: Boolean(matched) },
    });
    return { valid: Boolean(matched), did: input.did, ...(matched ? { verificationMethod: matched } : {}) };
  }

  /**
   * Our own DIDs are answered from the database; any other did:web is fetched over https through the
   * SSRF guard (in dev mode, a loopback host over plain http, so two local instances can talk).
   */
  async resolve(did: string): Promise<DidDocument> {
    const location = didWebLocation(did);
    if (!location) throw new AppError(400, 'validation_error', 'body.did: must be a did:web DID', { issues: [{ path: 'body.did', message: 'must be a did:web DID' }] });
    if (location.host.toLowerCase() === decodeURIComponent(this.config.DID_DOMAIN).toLowerCase()) {
      if (location.path === '/.well-known/did.json') return this.serviceDocument();
      const own = /^\/identities\/(id-[0-9a-f]{16})\/did\.json$/.exec(location.path);
      if (!own) throw unresolvable(did, 'no such DID on this service');
      return this.identityDocument(own[1]!).catch((err) => {
        throw err instanceof AppError && err.status === 404 ? unresolvable(did, 'no such identity (or it was revoked)') : err;
      });
    }
    const hostname = location.host.replace(/:\d+$/, '');
    const dev = this.config.mode === 'dev';
    const scheme = dev && LOOPBACK_HOSTS.has(hostname) ? 'http' : 'https';
    let response;
    try {
      response = await guardedFetch(`${scheme}://${location.host}${location.path}`, {
        ...outboundPolicy(this.config), timeoutMs: 5_000, maxBytes: 64 * 1024, maxRedirects: 2, headers: { accept: 'application/did+json, application/json' },
      });
    } catch (err) {
      if (err instanceof GuardedFetchError) throw unresolvable(did, err.message);
      throw err;
    }
    if (response.status !== 200) throw unresolvable(did, `${location.host} answered ${response.status}`);
    let doc: DidDocument;
    try {
      doc = JSON.parse(response.bodyText);
    } catch {
      throw unresolvable(did, 'the DID document is not JSON');
    }
    if (doc?.id !== did) throw unresolvable(did, 'the document id does not match the DID');
    return doc;
  }
}
