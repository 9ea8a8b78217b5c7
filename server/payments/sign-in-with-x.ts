import { getAddress, hashMessage, isAddress, isAddressEqual, isHex, type Address, type Hex } from 'viem';
import { Schema, type Connection, type Model } from 'mongoose';
import { z } from 'zod';
import type { ChainService } from '../chain/chain-service.js';
import { nodeFault } from '../chain/rpc-fault.js';
import { recoverSigner } from '../chain/recover.js';
import { isDuplicateKey } from '../platform/errors.js';
import { chainUnavailable } from './schemes/chain-checks.js';
import type { PaymentRecords } from './records.js';

// Sign-In-With-X (x402's `sign-in-with-x` extension, CAIP-122; for EVM the EIP-4361 message signed by
// EIP-191, ERC-1271 or ERC-6492): a buyer who paid for a resource proves it holds the paying wallet and
// reaches the resource again without paying twice. The seller's 402 carries the challenge (the
// middleware's challenge.ts); the buyer's client answers with the `SIGN-IN-WITH-X` header; this checks the
// answer for the seller (the middleware asks POST /v0/payments/sign-in-with-x). What is shared across
// processes is in the database: the payments, and each nonce used, claimed by a unique insert so one
// signed message opens the resource once.

/** How old a signed message may be (the extension's default). */
const MAX_AGE_MS = 5 * 60 * 1000;
/** Clock skew tolerated on issuedAt in the future. */
const SKEW_MS = 30 * 1000;

export const SiwxPayloadSchema = z.object({
  domain: z.string().min(1).max(255),
  address: z.string().max(128),
  statement: z.string().max(1000).optional(),
  uri: z.string().min(1).max(2048),
  version: z.string().max(8),
  chainId: z.string().max(64),
  type: z.enum(['eip191', 'ed25519']),
  nonce: z.string().min(8).max(128).regex(/^[A-Za-z0-9]+$/, 'must be alphanumeric'),
  issuedAt: z.string().max(64),
  expirationTime: z.string().max(64).optional(),
  notBefore: z.string().max(64).optional(),
  requestId: z.string().max(256).optional(),
  resources: z.array(z.string().max(2048)).max(20).optional(),
  signatureScheme: z.enum(['eip191', 'eip1271', 'eip6492', 'siws']).optional(),
  signature: z.string().max(8192),
});
export type SiwxPayload = z.infer<typeof SiwxPayloadSchema>;

export type SignInOutcome =
  | { granted: true; payer: Address; paymentId: string; transaction: string }
  | { granted: false; reason: string; message: string };

/** The EIP-4361 message for a payload, field by field as the EIP's grammar lays it out. */
export function siweMessage(p: SiwxPayload, chainId: number): string {
  const head = `${p.domain} wants you to sign in with your Ethereum account:\n${p.address}\n\n${p.statement !== undefined ? `${p.statement}\n` : ''}\n`;
  const fields = [`URI: ${p.uri}`, `Version: ${p.version}`, `Chain ID: ${chainId}`, `Nonce: ${p.nonce}`, `Issued At: ${p.issuedAt}`];
  if (p.expirationTime) fields.push(`Expiration Time: ${p.expirationTime}`);
  if (p.notBefore) fields.push(`Not Before: ${p.notBefore}`);
  if (p.requestId !== undefined) fields.push(`Request ID: ${p.requestId}`);
  if (p.resources) fields.push(['Resources:', ...p.resources.map((r) => `- ${r}`)].join('\n'));
  return head + fields.join('\n');
}

interface UsedNonceDoc { _id: string; orgId: string; address: string; createdAt: Date }
const usedNonceSchema = new Schema<UsedNonceDoc>({
  _id: String,
  orgId: { type: String, required: true },
  address: { type: String, required: true },
  createdAt: { type: Date, required: true },
}, { versionKey: false });
// A message older than MAX_AGE_MS is refused anyway, so its nonce need not be kept much longer; the
// embedded FerretDB has no TTL indexes, so nothing prunes them yet (one small document per sign-in).

const refuse = (reason: string, message: string): SignInOutcome => ({ granted: false, reason, message });

export class SignInWithX {
  private readonly nonces: Model<UsedNonceDoc>;

  constructor(conn: Connection, private readonly chain: ChainService | undefined, private readonly records: PaymentRecords) {
    this.nonces = conn.models.SiwxNonce ?? conn.model<UsedNonceDoc>('SiwxNonce', usedNonceSchema, 'siwx_nonces');
  }

  /**
   * Checks a `SIGN-IN-WITH-X` header for `resource` (the URL the seller's middleware protects): bound to
   * the resource's origin, fresh, signed by the address on this chain, that address paid this seller for
   * the resource, and the nonce never used before. Checks that cost nothing come first.
   */
  async signIn(orgId: string, input: { header: string; resource: string }, now = Date.now()): Promise<SignInOutcome> {
    let payload: SiwxPayload;
    try {
      const parsed = SiwxPayloadSchema.safeParse(JSON.parse(Buffer.from(input.header, 'base64').toString('utf8')));
      if (!parsed.success) return refuse('invalid_siwx_payload', `the sign-in-with-x header is malformed: ${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message}`);
      payload = parsed.data;
    } catch {
      return refuse('invalid_siwx_payload', 'the sign-in-with-x header is not base64-encoded JSON');
    }
    const resource = new URL(input.resource);
    if (payload.domain !== resource.host) return refuse('invalid_siwx_domain_mismatch', `the message is for ${payload.domain}, not ${resource.host}`);
    let uri: URL;
    try { uri = new URL(payload.uri); } catch { return refuse('invalid_siwx_uri_mismatch', 'the message\'s uri is not a URL'); }
    if (uri.origin !== resource.origin) return refuse('invalid_siwx_uri_mismatch', `the message is for ${uri.origin}, not ${resource.origin}`);
    const issuedAt = Date.parse(payload.issuedAt);
    if (Number.isNaN(issuedAt)) return refuse('invalid_siwx_issued_at', 'issuedAt is not a timestamp');
    if (now - issuedAt > MAX_AGE_MS) return refuse('invalid_siwx_issued_at_too_old', `the message was issued more than ${MAX_AGE_MS / 1000} s ago`);
    if (issuedAt - now > SKEW_MS) return refuse('invalid_siwx_issued_at_in_future', 'issuedAt is in the future');
    if (payload.expirationTime !== undefined) {
      const at = Date.parse(payload.expirationTime);
      if (Number.isNaN(at)) return refuse('invalid_siwx_expiration_time', 'expirationTime is not a timestamp');
      if (at < now) return refuse('invalid_siwx_expired', 'the message expired');
    }
    if (payload.notBefore !== undefined) {
      const at = Date.parse(payload.notBefore);
      if (Number.isNaN(at)) return refuse('invalid_siwx_not_before', 'notBefore is not a timestamp');
      if (at > now) return refuse('invalid_siwx_not_yet_valid', 'the message is not valid yet');
    }
    const chain = this.chain;
    if (!chain || payload.chainId !== chain.caip2 || payload.type !== 'eip191') {
      return refuse('invalid_siwx_unsupported_chain', `this seller signs in wallets of ${chain?.caip2 ?? 'no chain'} (eip191), not ${payload.chainId} (${payload.type})`);
    }
    if (!isAddress(payload.address, { strict: false })) return refuse('invalid_siwx_payload', 'address is not an EVM address');
    const address = getAddress(payload.address);

    // EIP-191 for an EOA, checked here with no RPC call (libsecp256k1, as signedBy does for payments); ERC-1271
    // for a deployed smart wallet and ERC-6492 for one not deployed yet, asked of the chain.
    const message = siweMessage(payload, chain.chainId);
    const signature = payload.signature as Hex;
    const recovered = isHex(signature) ? recoverSigner(hashMessage(message), signature) : undefined;
    const valid = (recovered !== undefined && isAddressEqual(recovered, address)) || await chain.publicClient.verifyMessage({ address, message, signature }).catch((err) => {
      if (nodeFault(err)) throw chainUnavailable(err);
      return false;
    });
    if (!valid) return refuse('invalid_siwx_signature', 'the message is not signed by its address');

    const paid = await this.records.latestSettled(orgId, address, input.resource);
    if (!paid) return refuse('siwx_not_paid', `${address} has no settled payment for ${input.resource}`);

    // Last, and only when access is granted (as the extension records it): one message, one access.
    try {
      await this.nonces.create({ _id: `${orgId}:${payload.nonce}`, orgId, address, createdAt: new Date(now) });
    } catch (err) {
      if (isDuplicateKey(err)) return refuse('invalid_siwx_nonce', 'this signed message was already used');
      throw err;
    }
    return { granted: true, payer: address, paymentId: paid._id, transaction: paid.txHash ?? '' };
  }
}
