import { createHash } from 'node:crypto';
import { canonicalJson, encodeBase64Url } from 'agentgate-x402-wire';

/**
 * The A2A v1.0 AgentCard as JSON (a2a.proto, package lf.a2a.v1, in ProtoJSON camelCase), the part of it
 * agentgate writes. Every card we serve leaves out what A2A calls default values (empty strings and
 * lists, `false` of a non-`optional` bool): a verifier strips those before canonicalising (A2A 8.4.1), so
 * a card that carries none is signed exactly as it is served.
 */
export interface AgentInterface {
  /** Where the interface is: an https URL, or a `mailto:` address for mail. */
  url: string;
  /** A2A's own bindings are JSONRPC, GRPC and HTTP+JSON; any other is named by a URI (A2A 5.8). */
  protocolBinding: string;
  protocolVersion: string;
}

export interface SecurityRequirement { schemes: Record<string, { list: string[] }> }

export interface AgentSkill {
  id: string;
  name: string;
  description: string;
  tags: string[];
  examples?: string[];
  securityRequirements?: SecurityRequirement[];
}

export interface HttpAuthSecurityScheme { httpAuthSecurityScheme: { scheme: string; bearerFormat?: string; description?: string } }

export interface AgentCardSignature {
  /** base64url of the JWS protected header. */
  protected: string;
  /** base64url of the Ed25519 signature. */
  signature: string;
}

export interface AgentCard {
  name: string;
  description: string;
  supportedInterfaces: AgentInterface[];
  provider?: { url: string; organization: string };
  version: string;
  documentationUrl?: string;
  capabilities: { streaming?: boolean; pushNotifications?: boolean; extendedAgentCard?: boolean };
  securitySchemes?: Record<string, HttpAuthSecurityScheme>;
  securityRequirements?: SecurityRequirement[];
  defaultInputModes: string[];
  defaultOutputModes: string[];
  skills: AgentSkill[];
  signatures?: AgentCardSignature[];
}

/**
 * The bindings the cards name. None is an A2A binding: agentgate serves no A2A task endpoint (no
 * SendMessage, no tasks), so an A2A client reading a card finds no JSONRPC, GRPC or HTTP+JSON entry and
 * knows it cannot send one a task. Each entry says how the agent is reached instead, its binding a URI
 * naming that protocol (A2A 5.8) and its `protocolVersion` that protocol's version, since no A2A version
 * is exposed there.
 */
export const MCP_PROTOCOL_VERSION = '2025-11-25';
export const BINDINGS = {
  /** The backend's MCP server (Streamable HTTP, JSON answers) at POST /mcp, with an identity key. */
  mcp: { protocolBinding: `https://modelcontextprotocol.io/specification/${MCP_PROTOCOL_VERSION}/basic/transports#streamable-http`, protocolVersion: MCP_PROTOCOL_VERSION },
  /** The x402 v2 facilitator API (verify, settle, supported) and bazaar discovery, under /v0/x402. */
  x402Facilitator: { protocolBinding: 'https://github.com/x402-foundation/x402/blob/main/specs/x402-specification-v2.md#7-facilitator-interface', protocolVersion: '2' },
  /** A resource sold over x402 v2 on HTTP: a request answered 402 until paid. */
  x402Http: { protocolBinding: 'https://github.com/x402-foundation/x402/blob/main/specs/transports-v2/http.md', protocolVersion: '2' },
  /** Internet mail to the identity's address. */
  mail: { protocolBinding: 'urn:ietf:rfc:5321', protocolVersion: 'RFC 5321' },
  /** The REST API under /v0, described at /openapi.json. */
  http: { protocolBinding: 'https://spec.openapis.org/oas/v3.1.0', protocolVersion: '3.1.0' },
} as const;

/** What the signature covers: the card without `signatures`, RFC 8785 canonical JSON (A2A 8.4.1). */
export function signedPayloadOf(card: AgentCard): string {
  const { signatures: _signatures, ...content } = card;
  return canonicalJson(content);
}

export interface CardSigner {
  /** The verification method id in the service's DID document (`did:web:<host>#key-1`): the JWS `kid`. */
  keyId: string;
  sign(message: Uint8Array): Promise<Uint8Array>;
}

const utf8 = (text: string) => new TextEncoder().encode(text);

/**
 * Signs a card as A2A 8.4.2 says: a JWS (RFC 7515) with a detached payload, the protected header
 * `{alg: "EdDSA", typ: "JOSE", kid, jku}`, the signing input `BASE64URL(header) . BASE64URL(payload)`.
 * Ed25519 signatures are deterministic, so every process signs a card to the same bytes.
 */
export async function signCard(card: AgentCard, signer: CardSigner, jwksUrl: string): Promise<AgentCard> {
  const header = encodeBase64Url(utf8(JSON.stringify({ alg: 'EdDSA', typ: 'JOSE', kid: signer.keyId, jku: jwksUrl })));
  const payload = encodeBase64Url(utf8(signedPayloadOf(card)));
  const signature = await signer.sign(utf8(`${header}.${payload}`));
  return { ...card, signatures: [{ protected: header, signature: encodeBase64Url(signature) }] };
}

/** A strong ETag of the card's canonical bytes (signature included): equal cards, equal tags, in any process. */
export function etagOf(card: AgentCard): string {
  return `"${createHash('sha256').update(canonicalJson(card)).digest('base64url')}"`;
}
