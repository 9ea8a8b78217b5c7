import type { CommandIO } from './account-commands.js';
import { callBackend } from './backend.js';
import { target } from './receipt-commands.js';

// `agentgate domains`: the org's own mail domains through /v0/domains with the saved platform key (or
// --key): add one and print the records to publish, check them through DNS, rotate the DKIM key, delete
// it, and give an identity an address on it.

interface Options { url?: string; key?: string; json?: boolean; identity?: string }

async function call(io: CommandIO, options: Options, method: string, path: string, body?: unknown): Promise<{ status: number; body: any } | undefined> {
  const t = target(io, options);
  if (!t) return undefined;
  const res = await callBackend(`${t.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${t.key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: await res.json().catch(() => undefined) };
}

/** A domain and its records, one line each, with what DNS showed when it was checked. */
function printDomain(io: CommandIO, d: any): void {
  io.out(`${d.domainId}  ${d.domain}  ${d.status}${d.checkedAt ? `  (checked ${d.checkedAt})` : '  (not checked yet)'}`);
  if (d.problem) io.out(`  ${d.problem}`);
  for (const r of d.records) {
    const state = r.status ? r.status.padEnd(7) : 'publish';
    io.out(`  ${state}  ${r.type.padEnd(3)}  ${r.name}  ${r.type === 'MX' ? `${r.priority} ` : ''}${r.value}${r.required ? '' : '  (not required yet)'}`);
    if (r.status === 'wrong') io.out(`           found: ${r.found.join(' | ')}`);
  }
}

export async function domainsCommand(io: CommandIO, action: string | undefined, args: string[], options: Options): Promise<number> {
  const [first, second] = args;
  const request: Record<string, () => [string, string, unknown?] | undefined> = {
    list: () => ['GET', '/v0/domains'],
    add: () => (first ? ['POST', '/v0/domains', { domain: first }] : undefined),
    check: () => (first ? ['GET', `/v0/domains/${encodeURIComponent(first)}`] : undefined),
    'rotate-dkim': () => (first ? ['POST', `/v0/domains/${encodeURIComponent(first)}/dkim/rotate`] : undefined),
    remove: () => (first ? ['DELETE', `/v0/domains/${encodeURIComponent(first)}`] : undefined),
    address: () => (first && second && options.identity ? ['POST', `/v0/domains/${encodeURIComponent(first)}/addresses`, { localPart: second, identityId: options.identity }] : undefined),
  };
  const asked = action && Object.hasOwn(request, action) ? request[action]!() : undefined;
  if (!asked) {
    io.out('usage: agentgate domains list | add <domain> | check <domainId> | rotate-dkim <domainId> | remove <domainId> | address <domainId> <localPart> --identity <identityId>');
    return 2;
  }
  const res = await call(io, options, ...asked);
  if (!res) return 2;
  if (res.status >= 300) {
    io.out(`agentgate domains ${action}: ${res.status} ${res.body?.message ?? ''}`.trim());
    return 1;
  }
  if (options.json) {
    io.out(JSON.stringify(res.body, null, 2));
    return 0;
  }
  if (action === 'list') {
    for (const d of res.body.domains) io.out(`${d.domainId}  ${d.domain}  ${d.status}`);
    if (!res.body.domains.length) io.out('no domains yet: agentgate domains add <domain>');
  } else if (action === 'remove') {
    io.out(`deleted ${first} and its addresses`);
  } else if (action === 'address') {
    io.out(`${res.body.address} now delivers to ${res.body.identityId}, who can send as it`);
  } else {
    printDomain(io, res.body);
    if (action === 'add') io.out(`publish these records, then: agentgate domains check ${res.body.domainId}`);
  }
  return 0;
}
