import { z } from 'zod';
import type { KeyTier } from '../platform/keys.js';
import type { Scope } from '../platform/auth/scopes.js';
import { createBody as identityCreateBody, updateBody as identityUpdateBody, listQuery as identityListQuery, idParams as identityIdParams } from '../identities/routes.js';
import { attachmentParams, messageParams, threadParams } from '../mail/routes.js';
import { listEntryBody, listEntryParams, listKindParams } from '../mail/list-routes.js';
import { mailSettingsInput } from '../mail/mail-settings.js';
import { searchInput } from '../mail/mail-search.js';
import { mailSettingsQuery } from '../mail/settings-routes.js';
import { createDraftInput, decisionInput, draftParams, listDraftsInput, sendDraftInput, updateDraftInput } from '../mail/drafts.js';
import { forwardInput, labelsInput, listMessagesInput, listThreadsInput, replyInput, sendInput } from '../mail/mail-schemas.js';
import { nameParams, putCredentialBody } from '../vault/schemas.js';
import { callbackQuery, installParams, listMessagesQuery as chatListQuery, sendBody as chatSendBody } from '../chat/schemas.js';
import { activityQuery, channelIdParam as walletChannelParam, mandateBody, mandateIdParam, payBody } from '../buyer/schemas.js';
import { logsQuery } from '../logs/routes.js';
import { usageExportQuery, usageQuery } from '../usage/routes.js';
import { signupBody } from '../signup/routes.js';
import { acceptanceBody, captureBody, channelPayBody, endpointBody, endpointPatch, holdBody, idParam as paymentIdParam, listQuery as paymentPageQuery, paymentListQuery, redeemBody, refundBody, sellerKeyBody, signInBody, voucherIdParam, channelIdParam } from '../payments/routes.js';
import { idParam as deliveryIdParam, listQuery as deliveryListQuery } from '../webhooks/routes.js';
import { createMailWebhookBody, mailWebhookParams } from '../mail/webhooks.js';
import { addressBody, addressParams, createDomainBody, domainParams } from '../mail/domains/routes.js';
import { mailDeliveriesQuery } from '../mail/webhook-routes.js';
import { eventStreamQuery } from '../mail/event-routes.js';
import { identityParams, signBody, verifyBody } from '../did/routes.js';
import { orgCardParams } from '../agent-card/routes.js';
import { discoveryQuery, facilitatorBody, searchQuery } from '../payments/facilitator-routes.js';
import { createEventBody, eventParams, feedParams, listQuery as eventListQuery, publicBody, updateEventBody } from '../calendar/schemas.js';
import * as answers from './responses.js';

/**
 * Every route the backend mounts, with the zod schemas its handler validates with (the same objects, so
 * the contract cannot drift from the validation), who may call it, and what it answers. The OpenAPI
 * document (/openapi.json) is generated from this list, the property tests fuzz every entry, and a test
 * holds it equal to what the app really mounts.
 */
export interface Operation {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** The Koa router pattern, e.g. `/v0/payments/:id`. */
  path: string;
  tag: string;
  summary: string;
  /** Key tiers the route accepts; `none` for public routes. */
  auth: 'none' | readonly KeyTier[];
  /** The scopes an identity key must hold, checked in this order. */
  scopes?: readonly Scope[];
  params?: z.ZodType;
  query?: z.ZodType;
  /** A JSON request body; `mcp` for the MCP endpoint's JSON-RPC messages. */
  body?: z.ZodType | 'mcp' | 'any';
  /** The success answer: its status, media type and, where its shape is part of the contract, its schema. */
  ok: { status: number; description: string; schema?: z.ZodType; type?: string | readonly string[] };
  /** Statuses this route answers besides the ones every route may (400, 401, 403, 404, 413, 429). */
  also?: Readonly<Record<number, string | { description: string; schema: z.ZodType }>>;
  /** The shape of this route's errors when it is not `{error, message, status}` (the MCP endpoint's JSON-RPC errors). */
  errors?: z.ZodType;
  /**
   * The route fetches a URL the caller chose: when that URL cannot be reached it answers 502 or 504 (the
   * upstream failed, not us), which fuzzers must tell from a server error of our own.
   */
  fetchesCallerUrl?: true;
  /** HTML pages a person sees (the chat install flow): their errors are pages, not JSON. */
  html?: true;
}

const identity = ['identity'] as const;
const platform = ['platform'] as const;
const seller = ['seller'] as const;
const sellerOrOps = ['seller', 'platform'] as const;
const anyKey = ['identity', 'platform', 'seller'] as const;
const orgOrIdentity = ['platform', 'identity'] as const;
const json = (description: string, schema?: z.ZodType) => ({ status: 200, description, ...(schema ? { schema } : {}) });
const created = (description: string, schema?: z.ZodType) => ({ status: 201, description, ...(schema ? { schema } : {}) });
/** A second success status of a route (`also` takes a bare string as an error answer). */
const alsoSuccess = (description: string) => ({ description, schema: z.record(z.string(), z.unknown()) });

export const OPERATIONS: readonly Operation[] = [
  // Sign-up and accounts
  { method: 'post', path: '/v0/agent-signup', tag: 'Accounts', summary: 'Create an org, its first identity and keys in one call (keys are shown once)', auth: 'none', body: signupBody, ok: created('The new org, identity, platform key and identity key') },
  { method: 'get', path: '/v0/agent-signup/cli', tag: 'Accounts', summary: 'Plain-text instructions for the agentgate CLI', auth: 'none', ok: { status: 200, description: 'Instructions', type: 'text/plain' } },
  { method: 'get', path: '/v0/identity-types', tag: 'Accounts', summary: 'The capabilities an identity can have and the scopes each needs', auth: 'none', ok: json('Capabilities') },
  { method: 'get', path: '/.well-known/agent-card.json', tag: 'Accounts', summary: "The service's A2A agent card (signed; ETag, If-None-Match)", auth: 'none', ok: json('The agent card', answers.agentCard), also: { 304: 'Not modified: If-None-Match names the current ETag' } },
  { method: 'get', path: '/.well-known/agents/:orgId', tag: 'Accounts', summary: "An org's A2A agent card (signed; ETag, If-None-Match)", auth: 'none', params: orgCardParams, ok: json('The agent card', answers.agentCard), also: { 304: 'Not modified: If-None-Match names the current ETag' } },
  { method: 'get', path: '/v0/whoami', tag: 'Accounts', summary: 'Who the key belongs to, its tier and scopes', auth: anyKey, ok: json('The caller') },

  // Identities (platform key)
  { method: 'post', path: '/v0/platform/identities', tag: 'Identities', summary: 'Create an identity (its key is shown once)', auth: platform, body: identityCreateBody, ok: created('The identity and its key'), also: { 409: 'The name is taken' } },
  { method: 'get', path: '/v0/platform/identities', tag: 'Identities', summary: "List the org's identities", auth: platform, query: identityListQuery, ok: json('A page of identities') },
  { method: 'get', path: '/v0/platform/identities/:id', tag: 'Identities', summary: 'One identity', auth: platform, params: identityIdParams, ok: json('The identity') },
  { method: 'patch', path: '/v0/platform/identities/:id', tag: 'Identities', summary: "Change an identity's display name or scopes", auth: platform, params: identityIdParams, body: identityUpdateBody, ok: json('The identity'), also: { 409: 'A concurrent change won; retry' } },
  { method: 'delete', path: '/v0/platform/identities/:id', tag: 'Identities', summary: 'Delete an identity and revoke its keys', auth: platform, params: identityIdParams, ok: json('The deleted identity') },
  { method: 'post', path: '/v0/platform/identities/:id/rotate-key', tag: 'Identities', summary: "Replace an identity's key (the new one is shown once)", auth: platform, params: identityIdParams, ok: json('The new key') },
  { method: 'get', path: '/v0/logs', tag: 'Activity', summary: "The org's activity log (platform key), or the identity's own entries (scope logs:read)", auth: ['platform', 'identity'], scopes: ['logs:read'], query: logsQuery, ok: json('Log entries, newest first') },
  { method: 'get', path: '/v0/usage', tag: 'Activity', summary: "The org's usage in a month (default: this one, UTC) against its plan's quotas: settlements by scheme and network, facilitator calls, mail sent and received, storage", auth: sellerOrOps, query: usageQuery, ok: json('Usage, quotas and what is left', answers.usage) },
  { method: 'get', path: '/v0/usage/export', tag: 'Activity', summary: "The org's usage per month as CSV, from..to (at most 24 months; default: this month)", auth: sellerOrOps, query: usageExportQuery, ok: { status: 200, description: 'CSV: month, plan, metric, scheme, network, used, quota', type: 'text/csv' } },

  // Mail
  { method: 'get', path: '/v0/messages', tag: 'Mail', summary: 'List messages, newest first', auth: identity, scopes: ['mail:read'], query: listMessagesInput, ok: json('A page of messages') },
  { method: 'get', path: '/v0/messages/search', tag: 'Mail', summary: 'Search subject, body, sender and recipients for all the words of q, ranked (subject, then people, then body; newer first), with labels and after/before filters, paged by cursor', auth: identity, scopes: ['mail:read'], query: searchInput, ok: json('The matching messages, best first, each with its score') },
  { method: 'post', path: '/v0/messages/send', tag: 'Mail', summary: 'Send a message', auth: identity, scopes: ['mail:send'], body: sendInput, ok: created('The sent message'), also: { 202: alsoSuccess('Held by the identity\'s approval policy: the draft (status pending_approval) waits for the org admin') } },
  { method: 'get', path: '/v0/messages/:messageId', tag: 'Mail', summary: 'One message', auth: identity, scopes: ['mail:read'], params: messageParams, ok: json('The message') },
  { method: 'get', path: '/v0/messages/:messageId/attachments/:attachmentId', tag: 'Mail', summary: "Download an attachment (its bytes, with the attachment's Content-Type and a Content-Disposition: attachment)", auth: identity, scopes: ['mail:read'], params: attachmentParams, ok: { status: 200, description: 'The attachment bytes', type: 'application/octet-stream' } },
  { method: 'post', path: '/v0/messages/:messageId/reply', tag: 'Mail', summary: 'Reply in the same thread (replyAll: true also to the original To and Cc)', auth: identity, scopes: ['mail:send'], params: messageParams, body: replyInput, ok: created('The reply'), also: { 202: alsoSuccess('Held by the identity\'s approval policy: the draft (status pending_approval) waits for the org admin') } },
  { method: 'post', path: '/v0/messages/:messageId/forward', tag: 'Mail', summary: 'Forward a message with its attachments, as a new thread', auth: identity, scopes: ['mail:send'], params: messageParams, body: forwardInput, ok: created('The forwarded message'), also: { 202: alsoSuccess('Held by the identity\'s approval policy: the draft (status pending_approval) waits for the org admin') } },
  { method: 'patch', path: '/v0/messages/:messageId', tag: 'Mail', summary: "Add or remove a message's labels", auth: identity, scopes: ['mail:manage'], params: messageParams, body: labelsInput, ok: json('The message') },
  { method: 'get', path: '/v0/mail/lists', tag: 'Mail', summary: "Allow and block lists: an identity key sees its own and its org's, the platform key the org's", auth: ['identity', 'platform'], scopes: ['mail:read'], ok: json('The entries') },
  { method: 'get', path: '/v0/mail/lists/:kind', tag: 'Mail', summary: 'One list (receive-allow, receive-block, send-allow, send-block)', auth: ['identity', 'platform'], scopes: ['mail:read'], params: listKindParams, ok: json('The entries') },
  { method: 'post', path: '/v0/mail/lists/:kind', tag: 'Mail', summary: 'Add an address or a whole domain to a list (identity key: its own; platform key: the whole org)', auth: ['identity', 'platform'], scopes: ['mail:manage'], params: listKindParams, body: listEntryBody, ok: created('The entry (200 when it was there already)'), also: { 200: alsoSuccess('The entry was there already') } },
  { method: 'delete', path: '/v0/mail/lists/:kind/:entry', tag: 'Mail', summary: 'Remove an entry from a list', auth: ['identity', 'platform'], scopes: ['mail:manage'], params: listEntryParams, ok: json('Removed') },
  { method: 'get', path: '/v0/mail/settings', tag: 'Mail', summary: "Mail settings (admitUnverified): an identity key its own and what applies to it with its org's (effective), the platform key the org's", auth: ['identity', 'platform'], scopes: ['mail:read'], query: mailSettingsQuery, ok: json('The settings') },
  { method: 'patch', path: '/v0/mail/settings', tag: 'Mail', summary: 'Change mail settings (identity key: its own; platform key: the whole org); null removes a setting', auth: ['identity', 'platform'], scopes: ['mail:manage'], query: mailSettingsQuery, body: mailSettingsInput, ok: json('The settings') },
  { method: 'post', path: '/v0/drafts', tag: 'Mail', summary: 'Create a draft: new mail, a reply (inReplyTo) or a forward (forwardOf), with sendAt for a scheduled send', auth: identity, scopes: ['mail:send'], body: createDraftInput, ok: created('The draft') },
  { method: 'get', path: '/v0/drafts', tag: 'Mail', summary: "Drafts, newest first, by status: an identity key its own, the platform key every draft of the org (status=pending_approval: what waits for the admin)", auth: ['identity', 'platform'], scopes: ['mail:read'], query: listDraftsInput, ok: json('The drafts') },
  { method: 'get', path: '/v0/drafts/:draftId', tag: 'Mail', summary: 'One draft, its status, and the sent message once sent', auth: ['identity', 'platform'], scopes: ['mail:read'], params: draftParams, ok: json('The draft') },
  { method: 'patch', path: '/v0/drafts/:draftId', tag: 'Mail', summary: 'Change a draft (until it is asked to be sent)', auth: identity, scopes: ['mail:send'], params: draftParams, body: updateDraftInput, ok: json('The draft'), also: { 409: 'The draft is sent, scheduled, waiting for approval, approved or rejected' } },
  { method: 'delete', path: '/v0/drafts/:draftId', tag: 'Mail', summary: 'Delete a draft (not once sent)', auth: identity, scopes: ['mail:send'], params: draftParams, ok: json('Deleted'), also: { 409: 'The draft was sent' } },
  { method: 'post', path: '/v0/drafts/:draftId/send', tag: 'Mail', summary: 'Send a draft: at once (200, sent), at sendAt (202, scheduled), or once the org admin approves (202, pending_approval); sent once across processes', auth: identity, scopes: ['mail:send'], params: draftParams, body: sendDraftInput, ok: json('The sent draft'), also: { 202: alsoSuccess('Scheduled, or waiting for approval'), 409: 'Already asked, rejected, or waiting' } },
  { method: 'post', path: '/v0/drafts/:draftId/approve', tag: 'Mail', summary: 'The org admin approves a draft waiting for approval: it is sent (or scheduled); the identity gets draft.approved', auth: platform, params: draftParams, body: decisionInput, ok: json('The draft'), also: { 409: 'Not waiting for approval, or decided already' } },
  { method: 'post', path: '/v0/drafts/:draftId/reject', tag: 'Mail', summary: 'The org admin rejects a draft waiting for approval: it is never sent; the identity gets draft.rejected', auth: platform, params: draftParams, body: decisionInput, ok: json('The draft'), also: { 409: 'Not waiting for approval, or decided already' } },
  { method: 'get', path: '/v0/events', tag: 'Mail', summary: "The identity's mail events as server-sent events (resumes after Last-Event-ID; events=a,b filters)", auth: identity, scopes: ['mail:read'], query: eventStreamQuery, ok: { status: 200, description: 'An endless text/event-stream', type: 'text/event-stream' } },
  { method: 'post', path: '/v0/webhooks', tag: 'Mail', summary: 'Register a webhook for mail events (the secret is shown once)', auth: identity, scopes: ['mail:manage'], body: createMailWebhookBody, ok: created('The webhook with its secret'), also: { 409: 'Too many webhooks' } },
  { method: 'get', path: '/v0/webhooks', tag: 'Mail', summary: "The identity's mail webhooks", auth: identity, scopes: ['mail:read'], ok: json('The webhooks (no secrets)') },
  { method: 'get', path: '/v0/webhooks/:webhookId', tag: 'Mail', summary: 'One mail webhook', auth: identity, scopes: ['mail:read'], params: mailWebhookParams, ok: json('The webhook') },
  { method: 'get', path: '/v0/webhooks/:webhookId/deliveries', tag: 'Mail', summary: "A mail webhook's deliveries with every attempt", auth: identity, scopes: ['mail:read'], params: mailWebhookParams, query: mailDeliveriesQuery, ok: json('Deliveries, newest first') },
  { method: 'delete', path: '/v0/webhooks/:webhookId', tag: 'Mail', summary: 'Remove a mail webhook', auth: identity, scopes: ['mail:manage'], params: mailWebhookParams, ok: json('Removed') },
  { method: 'post', path: '/v0/domains', tag: 'Mail domains', summary: "Add one of the org's own domains for mail: answers the DNS records to publish (MX, SPF, DKIM, DMARC, a verification TXT)", auth: orgOrIdentity, scopes: ['mail:manage'], body: createDomainBody, ok: created('The domain, pending, with its records'), also: { 409: 'Already one of the org\'s domains, or too many domains' } },
  { method: 'get', path: '/v0/domains', tag: 'Mail domains', summary: "The org's mail domains with their standing as last checked", auth: orgOrIdentity, scopes: ['mail:read'], ok: json('The domains') },
  { method: 'get', path: '/v0/domains/:domainId', tag: 'Mail domains', summary: 'One domain, its records checked through DNS now: each ok, missing or wrong (with what was found), or unknown (DNS did not answer)', auth: orgOrIdentity, scopes: ['mail:read'], params: domainParams, ok: json('The domain and its records') },
  { method: 'delete', path: '/v0/domains/:domainId', tag: 'Mail domains', summary: 'Delete a domain and the addresses on it', auth: orgOrIdentity, scopes: ['mail:manage'], params: domainParams, ok: json('Deleted') },
  { method: 'post', path: '/v0/domains/:domainId/dkim/rotate', tag: 'Mail domains', summary: 'A new DKIM key under a new selector; it signs once DNS shows it, and the old one retires', auth: orgOrIdentity, scopes: ['mail:manage'], params: domainParams, ok: json('The domain with the new key\'s record'), also: { 409: 'A concurrent rotation won; retry' } },
  { method: 'post', path: '/v0/domains/:domainId/addresses', tag: 'Mail domains', summary: 'An address on a verified domain for an identity (a platform key names it; an identity key takes it for itself)', auth: orgOrIdentity, scopes: ['mail:manage'], params: domainParams, body: addressBody, ok: created('The address'), also: { 409: 'The address is taken, or the domain is not verified' } },
  { method: 'get', path: '/v0/domains/:domainId/addresses', tag: 'Mail domains', summary: "Addresses on a domain (an identity key: its own)", auth: orgOrIdentity, scopes: ['mail:read'], params: domainParams, ok: json('The addresses') },
  { method: 'delete', path: '/v0/domains/:domainId/addresses/:address', tag: 'Mail domains', summary: 'Remove an address (an identity key: its own)', auth: orgOrIdentity, scopes: ['mail:manage'], params: addressParams, ok: json('Removed') },
  { method: 'get', path: '/v0/mail/addresses', tag: 'Mail', summary: "The identity's addresses: its inbox address, and those on its org's domains (usable while the domain is verified)", auth: identity, scopes: ['mail:read'], ok: json('The addresses') },
  { method: 'get', path: '/v0/threads', tag: 'Mail', summary: 'List threads, most recent first', auth: identity, scopes: ['mail:read'], query: listThreadsInput, ok: json('A page of threads') },
  { method: 'get', path: '/v0/threads/:threadId', tag: 'Mail', summary: 'One thread with its messages', auth: identity, scopes: ['mail:read'], params: threadParams, ok: json('The thread') },

  // MCP
  { method: 'post', path: '/mcp', tag: 'MCP', summary: 'The MCP server (Streamable HTTP, stateless): JSON-RPC requests', auth: identity, body: 'mcp', errors: answers.mcpError, ok: { status: 200, description: 'A JSON-RPC answer', type: 'application/json' }, also: { 202: { description: 'A notification or response, accepted (no body)', schema: z.never() }, 406: 'The Accept header must allow application/json and text/event-stream', 415: 'The body must be application/json' } },
  { method: 'get', path: '/mcp', tag: 'MCP', summary: 'Not offered: the MCP server is stateless', auth: identity, errors: answers.mcpError, ok: { status: 405, description: 'Method not allowed', schema: answers.mcpError } },
  { method: 'delete', path: '/mcp', tag: 'MCP', summary: 'Not offered: the MCP server is stateless', auth: identity, errors: answers.mcpError, ok: { status: 405, description: 'Method not allowed', schema: answers.mcpError } },

  // Vault
  { method: 'get', path: '/v0/vault', tag: 'Vault', summary: 'List credentials (names and types, no secrets)', auth: identity, scopes: ['vault:read'], ok: json('Credentials') },
  { method: 'put', path: '/v0/vault/:name', tag: 'Vault', summary: 'Store or replace a credential (encrypted at rest)', auth: identity, scopes: ['vault:write'], params: nameParams, body: putCredentialBody, ok: json('The credential, replaced'), also: { 201: alsoSuccess('The credential, created') } },
  { method: 'get', path: '/v0/vault/:name', tag: 'Vault', summary: 'One credential with its secret fields', auth: identity, scopes: ['vault:read'], params: nameParams, ok: json('The credential') },
  { method: 'delete', path: '/v0/vault/:name', tag: 'Vault', summary: 'Delete a credential', auth: identity, scopes: ['vault:write'], params: nameParams, ok: json('Deleted') },
  { method: 'get', path: '/v0/vault/:name/totp', tag: 'Vault', summary: "The current TOTP code of a credential's secret", auth: identity, scopes: ['vault:read'], params: nameParams, ok: json('The code and its expiry') },
  { method: 'post', path: '/v0/vault/:name/totp/backup', tag: 'Vault', summary: 'Use one of the stored backup codes', auth: identity, scopes: ['vault:read', 'vault:write'], params: nameParams, ok: json('A backup code') },

  // did:web
  { method: 'get', path: '/.well-known/jwks.json', tag: 'Identity (did:web)', summary: "The service key as a JWK Set: the jku of the agent cards' signatures", auth: 'none', ok: json('The JWK Set', answers.jwks) },
  { method: 'get', path: '/.well-known/did.json', tag: 'Identity (did:web)', summary: "The service's DID document: the key that signs receipts", auth: 'none', ok: json('The DID document', answers.didDocument) },
  { method: 'get', path: '/identities/:identityId/did.json', tag: 'Identity (did:web)', summary: "An identity's DID document", auth: 'none', params: identityParams, ok: json('The DID document', answers.didDocument) },
  { method: 'post', path: '/v0/identity/sign', tag: 'Identity (did:web)', summary: "Sign base64 data with the identity's Ed25519 key", auth: identity, scopes: ['identity:sign'], body: signBody, ok: json('The signature and the verification method') },
  { method: 'post', path: '/v0/identity/verify', tag: 'Identity (did:web)', summary: "Check a signature against any did:web DID's document", auth: identity, scopes: ['identity:verify'], body: verifyBody, fetchesCallerUrl: true, ok: json('{valid}'), also: { 502: 'The DID document could not be fetched', 504: 'The DID host did not answer in time' } },

  // Calendar
  { method: 'get', path: '/v0/calendar/feed/:token.ics', tag: 'Calendar', summary: 'The public iCalendar feed (a capability URL)', auth: 'none', params: feedParams, ok: { status: 200, description: 'iCalendar', type: 'text/calendar' } },
  { method: 'get', path: '/v0/calendar', tag: 'Calendar', summary: 'List events in a time range', auth: identity, scopes: ['calendar:read'], query: eventListQuery, ok: json('Events') },
  { method: 'post', path: '/v0/calendar', tag: 'Calendar', summary: 'Create an event', auth: identity, scopes: ['calendar:write'], body: createEventBody, ok: created('The event') },
  { method: 'get', path: '/v0/calendar/public', tag: 'Calendar', summary: 'Whether the public feed is on, and its URL', auth: identity, scopes: ['calendar:read'], ok: json('The feed settings') },
  { method: 'post', path: '/v0/calendar/public', tag: 'Calendar', summary: 'Turn the public feed on or off', auth: identity, scopes: ['calendar:write'], body: publicBody, ok: json('The feed settings') },
  { method: 'get', path: '/v0/calendar/:eventId', tag: 'Calendar', summary: 'One event', auth: identity, scopes: ['calendar:read'], params: eventParams, ok: json('The event') },
  { method: 'patch', path: '/v0/calendar/:eventId', tag: 'Calendar', summary: 'Change an event', auth: identity, scopes: ['calendar:write'], params: eventParams, body: updateEventBody, ok: json('The event') },
  { method: 'delete', path: '/v0/calendar/:eventId', tag: 'Calendar', summary: 'Delete an event', auth: identity, scopes: ['calendar:write'], params: eventParams, ok: json('Deleted') },

  // Webhooks
  { method: 'get', path: '/v0/webhooks/deliveries', tag: 'Webhooks', summary: 'payment.received deliveries, newest first', auth: sellerOrOps, query: deliveryListQuery, ok: json('A page of deliveries') },
  { method: 'get', path: '/v0/webhooks/deliveries/:id', tag: 'Webhooks', summary: 'One delivery with its attempts', auth: sellerOrOps, params: deliveryIdParam, ok: json('The delivery') },
  { method: 'post', path: '/v0/webhooks/deliveries/:id/retry', tag: 'Webhooks', summary: 'Deliver again now', auth: sellerOrOps, params: deliveryIdParam, ok: { status: 202, description: 'Queued' }, also: { 409: 'The delivery is already under way or delivered' } },
  { method: 'post', path: '/v0/webhooks/endpoints/:id/rotate-secret', tag: 'Webhooks', summary: "Replace an endpoint's webhook signing secret (shown once)", auth: platform, params: deliveryIdParam, ok: json('The new secret') },

  // Team chat
  { method: 'get', path: '/v0/chat/install/:state', tag: 'Chat', summary: 'The install link: redirects to the chat platform\'s consent page', auth: 'none', params: installParams, html: true, ok: { status: 302, description: 'Redirect to the consent page' }, also: { 410: 'The link is unknown, used or expired' } },
  { method: 'get', path: '/v0/chat/oauth/callback', tag: 'Chat', summary: 'Where the chat platform returns after consent', auth: 'none', query: callbackQuery, html: true, ok: { status: 200, description: 'Connected', type: 'text/html' }, also: { 409: 'Already connected', 410: 'The install link expired', 502: 'The chat platform refused the code', 503: 'Chat is not configured' } },
  { method: 'post', path: '/v0/chat/events', tag: 'Chat', summary: "The chat platform's Events API (signed by the platform)", auth: 'none', body: 'any', ok: json('Accepted'), also: { 503: 'Chat is not configured' } },
  { method: 'get', path: '/v0/chat/connection', tag: 'Chat', summary: 'The connected workspace, if any', auth: identity, scopes: ['chat:read'], ok: json('The connection') },
  { method: 'post', path: '/v0/chat/connect', tag: 'Chat', summary: 'An install link for a person to approve (15 minutes)', auth: identity, scopes: ['chat:send'], ok: created('The link'), also: { 409: 'Already connected', 503: 'Chat is not configured' } },
  { method: 'delete', path: '/v0/chat/connection', tag: 'Chat', summary: 'Disconnect and revoke the bot token', auth: identity, scopes: ['chat:send'], ok: json('Disconnected'), also: { 409: 'Not connected' } },
  { method: 'get', path: '/v0/chat/channels', tag: 'Chat', summary: 'Channels the bot can see', auth: identity, scopes: ['chat:read'], ok: json('Channels'), also: { 409: 'Not connected', 502: 'The chat platform failed' } },
  { method: 'post', path: '/v0/chat/messages', tag: 'Chat', summary: 'Post to a channel or thread', auth: identity, scopes: ['chat:send'], body: chatSendBody, ok: created('The posted message'), also: { 409: 'Not connected', 502: 'The chat platform failed' } },
  { method: 'get', path: '/v0/chat/messages', tag: 'Chat', summary: 'Messages people posted where the bot is', auth: identity, scopes: ['chat:read'], query: chatListQuery, ok: json('Messages'), also: { 409: 'Not connected' } },

  // Wallet and buying
  { method: 'get', path: '/v0/wallet', tag: 'Wallet', summary: "The identity's USDC smart-account wallet and balance", auth: identity, scopes: ['wallet:read'], ok: json('The wallet') },
  { method: 'post', path: '/v0/payments/mandates', tag: 'Buying', summary: 'A spending mandate: caps for payments_pay', auth: identity, scopes: ['payments:spend'], body: mandateBody, ok: created('The mandate') },
  { method: 'get', path: '/v0/payments/mandates', tag: 'Buying', summary: 'List mandates', auth: identity, scopes: ['payments:read'], ok: json('Mandates') },
  { method: 'get', path: '/v0/payments/mandates/:id', tag: 'Buying', summary: 'One mandate with what it has spent', auth: identity, scopes: ['payments:read'], params: mandateIdParam, ok: json('The mandate') },
  { method: 'delete', path: '/v0/payments/mandates/:id', tag: 'Buying', summary: 'Revoke a mandate', auth: identity, scopes: ['payments:spend'], params: mandateIdParam, ok: json('The revoked mandate') },
  { method: 'post', path: '/v0/payments/pay', tag: 'Buying', summary: 'Call an x402 API and pay its price from the wallet, within the mandate', auth: identity, scopes: ['payments:spend'], body: payBody, fetchesCallerUrl: true, ok: json('The paid response'), also: { 402: 'The seller refused the payment', 409: 'A mandate cap or wallet state stops it', 422: 'The challenge cannot be paid', 502: 'The seller failed', 504: 'The seller did not answer in time' } },
  { method: 'get', path: '/v0/wallet/channels', tag: 'Buying', summary: "The identity's payment channels (batch-settlement): deposited, charged, claimed, balance, refunded, the latest timed withdrawal", auth: identity, scopes: ['payments:read'], ok: json('Channels', answers.walletChannels) },
  { method: 'post', path: '/v0/wallet/channels/:id/refund', tag: 'Buying', summary: "Ask a channel's seller for its remainder back (cooperative refund)", auth: identity, scopes: ['payments:spend'], params: walletChannelParam, fetchesCallerUrl: true, ok: json('What came back'), also: { 404: 'Not a channel of this identity', 502: 'The seller refused or failed' } },
  { method: 'post', path: '/v0/wallet/channels/:id/withdraw', tag: 'Buying', summary: "Start a channel's timed withdrawal (its seller does not refund): what accepted vouchers did not commit comes back after the channel's withdraw delay, finished by the backend", auth: identity, scopes: ['payments:spend'], params: walletChannelParam, ok: json('The withdrawal started', answers.channelWithdrawalStarted), also: { 404: 'Not a channel of this identity', 409: 'A withdrawal is already pending (withdrawal_pending) or a call is still out on the channel (channel_busy)', 422: 'Accepted vouchers commit everything the channel holds (nothing_to_withdraw)', 502: 'The withdrawal transaction failed', 503: 'This server cannot send transactions now' } },
  { method: 'get', path: '/v0/payments/activity', tag: 'Buying', summary: "The identity's outgoing payments, newest first", auth: identity, scopes: ['payments:read'], query: activityQuery, ok: json('A page of payments') },

  // Selling: set-up, facilitator, records
  { method: 'put', path: '/v0/payments/acceptance', tag: 'Payments', summary: 'Turn payment acceptance on or off, and where payments go', auth: platform, body: acceptanceBody, ok: json('The acceptance settings') },
  { method: 'get', path: '/v0/payments/acceptance', tag: 'Payments', summary: 'The acceptance settings', auth: sellerOrOps, ok: json('The acceptance settings') },
  { method: 'post', path: '/v0/payments/seller-keys', tag: 'Payments', summary: 'A seller key for middleware and facilitator calls (shown once)', auth: platform, body: sellerKeyBody, ok: created('The key') },
  { method: 'get', path: '/v0/payments/seller-keys', tag: 'Payments', summary: 'List seller keys (prefixes only)', auth: platform, ok: json('Keys') },
  { method: 'delete', path: '/v0/payments/seller-keys/:id', tag: 'Payments', summary: 'Revoke a seller key', auth: platform, params: paymentIdParam, ok: json('Revoked') },
  { method: 'post', path: '/v0/payments/endpoints', tag: 'Payments', summary: 'Register a paid endpoint: URL, price, webhook, discovery', auth: platform, body: endpointBody, fetchesCallerUrl: true, ok: created('The endpoint (its webhook secret shown once)'), also: { 409: 'The URL is already registered', 422: 'The URL check failed', 502: 'The URL could not be fetched', 504: 'The URL did not answer in time' } },
  { method: 'get', path: '/v0/payments/endpoints', tag: 'Payments', summary: 'List endpoints', auth: sellerOrOps, ok: json('Endpoints') },
  { method: 'get', path: '/v0/payments/endpoints/:id', tag: 'Payments', summary: 'One endpoint', auth: sellerOrOps, params: paymentIdParam, ok: json('The endpoint') },
  { method: 'patch', path: '/v0/payments/endpoints/:id', tag: 'Payments', summary: 'Change an endpoint', auth: platform, params: paymentIdParam, body: endpointPatch, ok: json('The endpoint'), also: { 409: 'The URL is already registered' } },
  { method: 'post', path: '/v0/payments/endpoints/:id/rotate-webhook-secret', tag: 'Payments', summary: "Replace an endpoint's webhook secret (shown once)", auth: platform, params: paymentIdParam, ok: json('The new secret'), also: { 409: 'The endpoint has no webhook' } },
  { method: 'delete', path: '/v0/payments/endpoints/:id', tag: 'Payments', summary: 'Delete an endpoint', auth: platform, params: paymentIdParam, ok: json('Deleted') },
  { method: 'get', path: '/v0/payments/settings', tag: 'Payments', summary: 'What the seller middleware needs to build challenges', auth: seller, ok: json('Seller settings'), also: { 409: 'Payment acceptance is off' } },
  { method: 'post', path: '/v0/payments/redeem', tag: 'Payments', summary: "Verify and settle a buyer's X-Payment header (agentgate's middleware)", auth: seller, body: redeemBody, ok: json('Settled', answers.redeemed), also: { 402: 'Refused, with the reason and the requirement to pay', 503: 'Settlement is not available (no relayer of this process can send: nothing was charged)' } },
  { method: 'post', path: '/v0/payments/channels/pay', tag: 'Payments', summary: "A batch-settlement call through agentgate's middleware: a deposit with its first voucher, or a voucher, accepted once (the channel's state is in the database)", auth: seller, body: channelPayBody, ok: json('Accepted (held while the handler runs when `hold`): the call\'s charge and the channel after it in paymentResponse.extra', answers.redeemed), also: { 402: 'Refused, with the reason and, for a voucher that is not the next one, where the channel stands (channelState, voucherState)', 503: 'A deposit cannot be sent now (no relayer can send: nothing was charged)' } },
  { method: 'post', path: '/v0/payments/channels/vouchers/:id/capture', tag: 'Payments', summary: 'Charge a held channel call (the handler succeeded)', auth: seller, params: voucherIdParam, ok: json('Captured', answers.redeemed), also: { 409: 'The hold expired or was released: nothing was charged' } },
  { method: 'post', path: '/v0/payments/channels/vouchers/:id/release', tag: 'Payments', summary: 'Release a held channel call (the handler failed): nothing is charged', auth: seller, params: voucherIdParam, ok: json('Released (false: it was not held any more)', answers.channelReleased) },
  { method: 'post', path: '/v0/payments/sign-in-with-x', tag: 'Payments', summary: "Sign-In-With-X: whether a buyer's signed SIGN-IN-WITH-X header proves it paid for the resource (agentgate's middleware); each signed message opens it once", auth: seller, body: signInBody, ok: json('Granted, or why not', answers.signedIn) },
  { method: 'post', path: '/v0/payments/holds', tag: 'Payments', summary: "Verify a buyer's payment and hold it while the seller's handler runs (agentgate's middleware, settle after the handler)", auth: seller, body: holdBody, ok: { status: 201, description: 'Held: the authorization is claimed, nothing is charged yet', schema: answers.held }, also: { 402: 'Refused, with the reason and the requirement to pay', 503: 'Settlement is not available (nothing was claimed)' } },
  { method: 'post', path: '/v0/payments/holds/:id/capture', tag: 'Payments', summary: 'Settle a held payment (the handler succeeded); for upto, charge the amount the request used; for auth-capture, capture it from the escrow', auth: seller, params: paymentIdParam, body: captureBody, ok: json('Settled', answers.redeemed), also: { 400: 'upto: the amount is above the permit\'s maximum (settlement_exceeds_amount); the hold stays, nothing was charged', 402: 'The settlement failed: nothing was charged', 409: 'The hold was released or expired', 503: 'Settlement is not available (nothing was charged)' } },
  { method: 'post', path: '/v0/payments/holds/:id/release', tag: 'Payments', summary: 'Drop a held payment (the handler failed): nothing is charged (auth-capture: the authorization is voided, back to the buyer)', auth: seller, params: paymentIdParam, ok: json('Released', answers.holdReleased), also: { 409: 'The hold was already captured' } },
  { method: 'get', path: '/v0/payments/channels', tag: 'Payments', summary: "The seller's batch-settlement channels, newest first: deposited, accepted, claimed, refunded, state", auth: sellerOrOps, query: paymentPageQuery, ok: json('A page of channels', answers.channelList) },
  { method: 'get', path: '/v0/payments/channels/:channelId', tag: 'Payments', summary: 'One channel with its sums', auth: sellerOrOps, params: channelIdParam, ok: json('The channel', answers.channel) },
  { method: 'get', path: '/v0/payments/channels/:channelId/calls', tag: 'Payments', summary: "A channel's paid calls, newest first, each with the claim transaction that carried it once claimed", auth: sellerOrOps, params: channelIdParam, query: paymentPageQuery, ok: json('A page of calls', answers.channelCallList) },
  { method: 'get', path: '/v0/payments', tag: 'Payments', summary: 'Incoming payments, newest first (of one network: ?network=polygon-amoy or eip155:80002)', auth: sellerOrOps, query: paymentListQuery, ok: json('A page of payments', answers.paymentList) },
  { method: 'post', path: '/v0/payments/:id/refund', tag: 'Payments', summary: 'Refund a payment, in part (amount, USDC) or all that is left, at most what was paid: an auth-capture one from the escrow, an exact one paid to an agentgate wallet of the org from that wallet under its identity\'s mandate; an Idempotency-Key header makes a retry answer the first refund', auth: sellerOrOps, params: paymentIdParam, body: refundBody, ok: json('The refund, with its signed receipt', answers.refund), also: { 409: 'Not refundable: an exact payment to an address that is not an agentgate wallet of the org (refund_not_possible), not captured, more than is left (refund_exceeds_captured), past the refund deadline, the wallet short of funds (refund_funding_unavailable), its identity\'s mandate refusing it (mandate_not_found, mandate_daily_cap_exceeded, ...), another refund of it in flight, or an Idempotency-Key used for another amount', 502: 'The refund transaction failed on chain', 503: 'The operator cannot send or fund the refund now: nothing was refunded' } },
  { method: 'get', path: '/v0/payments/:id/refunds', tag: 'Payments', summary: "A payment's refunds, oldest first", auth: sellerOrOps, params: paymentIdParam, ok: json('The refunds', answers.refundList) },
  { method: 'get', path: '/v0/payments/:id', tag: 'Payments', summary: 'One payment with its signed receipts; a batch-settlement channel call (`chc_…`) with its receipt and claim', auth: sellerOrOps, params: paymentIdParam, ok: json('The payment, or the channel call', z.union([answers.paymentDetail, answers.channelCallDetail])) },

  // Probes
  { method: 'get', path: '/health', tag: 'Probes', summary: 'Liveness: the process answers', auth: 'none', ok: json('{status: "ok"}', answers.health) },
  { method: 'get', path: '/ready', tag: 'Probes', summary: 'Readiness: the database, the chain and the SMTP listener answer and the process is not stopping; degraded when no relayer lane of the deployment can send, or when the oldest due webhook delivery has waited over 60 s. Also what this process does in settlement, who holds which lane, and the webhook backlog', auth: 'none', ok: json('{status: "ready" | "degraded", checks, settlement, webhooks}', answers.ready), also: { 503: 'Something it needs does not answer; `checks` says what' } },

  // This document and its reference page
  { method: 'get', path: '/openapi.json', tag: 'Docs', summary: 'This OpenAPI 3.1 document', auth: 'none', ok: json('The document') },
  { method: 'get', path: '/docs', tag: 'Docs', summary: 'The API reference, rendered from this document', auth: 'none', ok: { status: 200, description: 'An HTML page', type: 'text/html' } },
  { method: 'get', path: '/docs/:asset', tag: 'Docs', summary: 'The reference page\'s style sheet (reference.css)', auth: 'none', ok: { status: 200, description: 'A style sheet', type: 'text/css' }, also: { 404: 'No such file' } },

  // The standard x402 facilitator API
  { method: 'get', path: '/v0/x402/supported', tag: 'x402 facilitator', summary: 'The kinds this facilitator settles and the extensions it supports', auth: 'none', ok: json('Supported kinds', answers.supported) },
  { method: 'get', path: '/v0/x402/discovery/resources', tag: 'x402 facilitator', summary: 'Bazaar discovery list: endpoints whose sellers opted in, and resources cataloged from settled payments\' bazaar declarations', auth: 'none', query: discoveryQuery, ok: json('A page of resources', answers.discovery), also: { 503: 'Settlement is not available' } },
  { method: 'get', path: '/v0/x402/discovery/search', tag: 'x402 facilitator', summary: 'Bazaar discovery search: the same catalog, matched against a query, cursor pages', auth: 'none', query: searchQuery, ok: json('A page of matching resources', answers.discoverySearch), also: { 503: 'Settlement is not available' } },
  { method: 'post', path: '/v0/x402/verify', tag: 'x402 facilitator', summary: 'Check a payment against requirements, moving nothing (EXTENSION-RESPONSES header: what becomes of a bazaar declaration; batch-settlement: a deposit, voucher or refund voucher, answered with the channel\'s snapshot)', auth: seller, body: facilitatorBody, ok: json('The verdict', answers.verifyAnswer), also: { 412: { description: 'upto: the payer has not approved Permit2 for the maximum (permit2_allowance_required): approve once, then pay again', schema: answers.verifyAnswer }, 503: 'Settlement is not available' } },
  { method: 'post', path: '/v0/x402/settle', tag: 'x402 facilitator', summary: 'Verify and settle a payment on chain; a settled bazaar declaration is cataloged (EXTENSION-RESPONSES header); batch-settlement: a deposit, a claim of many channels, a settle, or a cooperative refund, each sent once', auth: seller, body: facilitatorBody, ok: json('The settlement; a failure is never a success', answers.settleAnswer), also: { 409: { description: 'The payment identifier was used for another payment', schema: answers.settleAnswer }, 412: { description: 'upto: the payer has not approved Permit2 (permit2_allowance_required); nothing moved', schema: answers.settleAnswer }, 503: 'Settlement is not available' } },
];

/** `GET /v0/payments/:id` as an OpenAPI path, `/v0/payments/{id}`. */
export const openApiPath = (pattern: string) => pattern.replace(/:(\w+)/g, '{$1}');

/** `GET /v0/payments/:id`: the key the app's routers and this list are compared by. */
export const routeKey = (op: Pick<Operation, 'method' | 'path'>) => `${op.method.toUpperCase()} ${op.path}`;

export type { z };
