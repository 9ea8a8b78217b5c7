import type { IdentityDoc } from '../identities/identity-model.js';
import type { EndpointDoc } from '../payments/models.js';
import type { ToolDefinition } from '../platform/mcp-tool.js';
import { IDENTITY_TYPES } from '../signup/identity-types.js';
import { BINDINGS, type AgentCard, type AgentInterface, type AgentSkill, type HttpAuthSecurityScheme, type SecurityRequirement } from './a2a.js';

/**
 * The cards agentgate publishes (A2A v1.0 AgentCard): the service's at /.well-known/agent-card.json and
 * each org's at /.well-known/agents/<orgId>. They say how the agents are reached (MCP, mail, x402, the
 * REST API) and promise no A2A task endpoint, since there is none (see BINDINGS).
 */

export const CARD_VERSION = '1.0.0';
const MODES = ['application/json', 'text/plain'];
const capabilities = IDENTITY_TYPES.identityTypes[0]!.provides;

/** Our key tiers as A2A security schemes: each a bearer key in `Authorization`, its tier named by its prefix. */
export const SECURITY_SCHEMES: Record<string, HttpAuthSecurityScheme> = {
  identityKey: { httpAuthSecurityScheme: { scheme: 'Bearer', bearerFormat: 'agentgate identity key (agi_...)', description: 'One agent identity, limited to its scopes: the key for the MCP server (POST /mcp) and the identity routes (mail, vault, calendar, did, wallet, payments_pay, chat)' } },
  platformKey: { httpAuthSecurityScheme: { scheme: 'Bearer', bearerFormat: 'agentgate platform key (agp_...)', description: "An org's admin key: identities, their keys and scopes, the activity log, seller set-up (acceptance, endpoints)" } },
  sellerKey: { httpAuthSecurityScheme: { scheme: 'Bearer', bearerFormat: 'agentgate seller key (loid-...)', description: 'A seller key: the x402 facilitator API (/v0/x402/verify, /settle) and the seller middleware' } },
};

/** `{schemes: {<scheme>: {list: scopes}}}`; no scopes is an empty StringList, `{}` (its empty list is a default value). */
const requires = (scheme: keyof typeof SECURITY_SCHEMES, scopes: readonly string[] = []): SecurityRequirement[] =>
  [{ schemes: { [scheme]: scopes.length ? { list: [...scopes] } : {} } }] as SecurityRequirement[];

/** The MCP tools of one capability: those whose scope the capability grants. */
const toolsOf = (capability: (typeof capabilities)[number], tools: readonly ToolDefinition<never>[]) =>
  tools.filter((tool) => (capability.scopes as readonly string[]).includes(tool.scope));

export interface ServiceCardInput {
  baseUrl: string;
  tools: readonly ToolDefinition<never>[];
}

/** The service's card: one skill per area of an identity (its MCP tools as examples), the facilitator, discovery and sign-up. */
export function serviceCard({ baseUrl, tools }: ServiceCardInput): AgentCard {
  const areaSkills: AgentSkill[] = capabilities.map((capability) => {
    const own = toolsOf(capability, tools);
    const preview = 'availability' in capability ? ` (${capability.note})` : '';
    return {
      id: capability.capability,
      name: capability.capability,
      description: `${capability.description}${preview}. Reached as MCP tools at ${baseUrl}/mcp with an identity key holding ${capability.scopes.join(', ')}, and as REST routes under ${baseUrl}/v0.`,
      tags: [capability.capability, 'mcp', ...own.map((tool) => tool.name)],
      ...(own.length ? { examples: own.map((tool) => `${tool.name}: ${tool.title ?? tool.description}`) } : {}),
      securityRequirements: requires('identityKey', capability.scopes),
    };
  });
  return {
    name: 'agentgate',
    description: 'Identities for software agents (a mail inbox, a credential vault, a calendar, a did:web key, a USDC wallet that pays x402 APIs under mandates) and an x402 facilitator for sellers. '
      + `An agent is reached over MCP (${baseUrl}/mcp, identity key), by mail at its identity's address (see its org's card at ${baseUrl}/.well-known/agents/<orgId>), `
      + `and sellers over x402 (${baseUrl}/v0/x402). This service has no A2A task endpoint: it takes no A2A messages or tasks.`,
    supportedInterfaces: [
      { url: `${baseUrl}/mcp`, ...BINDINGS.mcp },
      { url: `${baseUrl}/v0/x402`, ...BINDINGS.x402Facilitator },
      { url: `${baseUrl}/v0`, ...BINDINGS.http },
    ],
    provider: { url: baseUrl, organization: 'agentgate' },
    version: CARD_VERSION,
    documentationUrl: `${baseUrl}/docs`,
    capabilities: { streaming: false, pushNotifications: false, extendedAgentCard: false },
    securitySchemes: SECURITY_SCHEMES,
    defaultInputModes: MODES,
    defaultOutputModes: MODES,
    skills: [
      ...areaSkills,
      {
        id: 'x402-facilitator',
        name: 'x402 facilitator',
        description: `The standard x402 v2 facilitator API for sellers on the official SDKs: POST ${baseUrl}/v0/x402/verify and /settle with a seller key, GET /supported without one. Settled payments get records, signed receipts and webhooks.`,
        tags: ['x402', 'facilitator', 'payments', 'usdc'],
        securityRequirements: requires('sellerKey'),
      },
      {
        id: 'x402-discovery',
        name: 'x402 bazaar discovery',
        description: `Paid resources whose sellers opted in, with their prices: GET ${baseUrl}/v0/x402/discovery/resources (the list) and /discovery/search (a query). Public: no key.`,
        tags: ['x402', 'bazaar', 'discovery', 'search'],
      },
      {
        id: 'agent-signup',
        name: 'Agent sign-up',
        description: `Creates an org, its first identity and its keys in one call: POST ${baseUrl}/v0/agent-signup. Public: no key.`,
        tags: ['signup', 'identity'],
      },
    ],
  };
}

export interface OrgCardInput {
  baseUrl: string;
  org: { _id: string; name: string };
  identities: readonly IdentityDoc[];
  didOf: (identityId: string) => string;
  /** The org's endpoints listed in discovery (opted in, acceptance on); none otherwise. */
  paidEndpoints: readonly EndpointDoc[];
}

/** A skill per capability an identity's scopes allow, naming the identity's address and DID. */
function identitySkills(identity: IdentityDoc, did: string): AgentSkill[] {
  const granted = new Set(identity.scopes);
  return capabilities
    .filter((c) => c.scopes.some((s) => granted.has(s)))
    .map((c) => ({
      id: `${identity._id}:${c.capability}`,
      name: `${identity.displayName} ${c.capability}`,
      description: `${c.description}. Identity ${identity.name} <${identity.emailAddress}>, ${did}.`,
      tags: [c.capability, identity.name],
      securityRequirements: requires('identityKey', c.scopes.filter((s) => granted.has(s))),
    }));
}

function endpointSkill(endpoint: EndpointDoc): AgentSkill {
  const price = endpoint.pricing === 'dynamic' ? `at most ${endpoint.priceUsdc} USDC a request` : `${endpoint.priceUsdc} USDC a request`;
  return {
    id: `x402:${endpoint._id}`,
    name: endpoint.description || endpoint.url,
    description: `A paid resource, ${price}, sold over x402: ${endpoint.url}`,
    tags: ['x402', 'paid', endpoint.url.startsWith('mcp://') ? 'mcp' : 'http'],
    examples: [endpoint.url],
  };
}

/** An org's card: its identities reached by mail, its paid resources by x402, and its own agents over MCP. */
export function orgCard({ baseUrl, org, identities, didOf, paidEndpoints }: OrgCardInput): AgentCard {
  const httpEndpoints = paidEndpoints.filter((e) => /^https?:\/\//.test(e.url));
  const interfaces: AgentInterface[] = [
    ...identities.map((identity) => ({ url: `mailto:${identity.emailAddress}`, ...BINDINGS.mail })),
    ...httpEndpoints.map((endpoint) => ({ url: endpoint.url, ...BINDINGS.x402Http })),
    { url: `${baseUrl}/mcp`, ...BINDINGS.mcp },
  ];
  // A2A: a REQUIRED list holds at least one entry.
  const skills = [...identities.flatMap((identity) => identitySkills(identity, didOf(identity._id))), ...paidEndpoints.map(endpointSkill)];
  const count = `${identities.length} identit${identities.length === 1 ? 'y' : 'ies'}`;
  const mail = identities.length ? ` Reach them by mail at ${identities.map((i) => i.emailAddress).join(', ')}.` : '';
  const paid = paidEndpoints.length ? ` It sells ${paidEndpoints.length} resource${paidEndpoints.length === 1 ? '' : 's'} over x402.` : '';
  return {
    name: org.name,
    description: `Agent org ${org._id} on agentgate with ${count}.${mail}${paid} The org's own agents use the MCP server (${baseUrl}/mcp) with their identity keys. No A2A task endpoint: it takes no A2A messages or tasks.`,
    supportedInterfaces: interfaces,
    provider: { url: baseUrl, organization: org.name },
    version: CARD_VERSION,
    documentationUrl: `${baseUrl}/docs`,
    capabilities: { streaming: false, pushNotifications: false, extendedAgentCard: false },
    securitySchemes: { identityKey: SECURITY_SCHEMES.identityKey! },
    defaultInputModes: MODES,
    defaultOutputModes: MODES,
    skills: skills.length ? skills : [{ id: 'org', name: org.name, description: 'This org has no live identity now and sells nothing listed in discovery.', tags: ['agentgate'] }],
  };
}
