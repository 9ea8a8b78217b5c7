import { z } from 'zod';
import { toolDefiner, type ToolDefinition } from '../../platform/mcp-tool.js';
import type { MailToolDeps } from '../tools.js';
import { createDomainBody, domainParams } from './routes.js';
import { localPart } from './domain-service.js';
import { presentAddress, presentAddresses, presentDomain } from './present.js';

const defineTool = toolDefiner<MailToolDeps>();

/**
 * The org's own mail domains, as an agent reaches them over MCP: the same calls as /v0/domains with an
 * identity key (an address is taken for the calling identity itself).
 */
export const domainTools: ToolDefinition<MailToolDeps>[] = [
  defineTool({
    name: 'mail_domains',
    title: 'List mail domains',
    description: 'The org\'s own mail domains and their standing as last checked: pending (records not all published yet), verified (its addresses send and receive), failing (a record broke; its addresses neither send nor receive).',
    scope: 'mail:read',
    input: z.object({}),
    async run({ mail }, principal) {
      const domains = (await mail.domains.list(principal.orgId)).map(presentDomain);
      return { domains, count: domains.length };
    },
  }),
  defineTool({
    name: 'mail_domain_add',
    title: 'Add a mail domain',
    description: 'Add a domain of the org\'s own (e.g. itscompany.com) for mail. Answers the DNS records its owner must publish (verification TXT, MX, SPF, DKIM, DMARC); check them with mail_domain_check once published.',
    scope: 'mail:manage',
    input: z.object({ domain: z.string().describe('The domain name, e.g. itscompany.com') }),
    async run({ mail }, principal, input) {
      const { domain } = createDomainBody.parse(input);
      return presentDomain(await mail.domains.create(principal.orgId, domain, { identityId: principal.identityId }));
    },
  }),
  defineTool({
    name: 'mail_domain_check',
    title: 'Check a mail domain\'s DNS records',
    description: 'Reads each of the domain\'s records from DNS now and says, record by record: ok, missing, wrong (with what was found) or unknown (DNS did not answer). The domain is verified once all required records are ok.',
    scope: 'mail:read',
    input: z.object({ domainId: z.string().describe('The domain\'s id (dom_...), from mail_domains') }),
    async run({ mail }, principal, input) {
      const { domainId } = domainParams.parse(input);
      return presentDomain(await mail.domains.get(principal.orgId, domainId, { check: true }));
    },
  }),
  defineTool({
    name: 'mail_address_take',
    title: 'Take an address on a mail domain',
    description: 'Take an address such as support@itscompany.com on a verified domain of your org for yourself: mail to it arrives in your inbox, and you can send as it (from).',
    scope: 'mail:manage',
    input: z.object({
      domainId: z.string().describe('The verified domain\'s id (dom_...)'),
      localPart: z.string().describe('The part before the @, e.g. support'),
    }),
    async run({ mail }, principal, input) {
      const { domainId } = domainParams.parse({ domainId: input.domainId });
      return presentAddress(await mail.domains.addAddress(principal.orgId, domainId, localPart.parse(input.localPart), principal.identityId));
    },
  }),
  defineTool({
    name: 'mail_addresses',
    title: 'List your addresses',
    description: 'Your addresses: your inbox address, and those you have on your org\'s domains (usable while the domain is verified).',
    scope: 'mail:read',
    input: z.object({}),
    async run({ mail }, principal) {
      const identity = await mail.identityOf(principal.identityId);
      return presentAddresses(identity.emailAddress, await mail.domains.addressesOf(principal.identityId));
    },
  }),
];
