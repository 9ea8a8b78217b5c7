import type { DomainView } from './domain-service.js';
import type { MailAddressDoc } from './models.js';

/** A domain as the API, the tools and the CLI show it: its standing and each record to publish, with what DNS holds. */
export function presentDomain(view: DomainView) {
  const { domain } = view;
  return {
    domainId: domain._id,
    domain: domain.name,
    status: view.status,
    records: view.records.map((r) => ({
      purpose: r.purpose, type: r.type, name: r.name, value: r.value, required: r.required,
      ...(r.type === 'MX' ? { priority: 10 } : {}),
      // Unchecked yet: no status.
      ...(r.status ? { status: r.status, found: r.found ?? [] } : {}),
    })),
    ...(view.problem ? { problem: view.problem } : {}),
    checkedAt: view.checkedAt?.toISOString() ?? null,
    verifiedAt: view.verifiedAt?.toISOString() ?? null,
    ...(view.failingSince ? { failingSince: view.failingSince.toISOString() } : {}),
    createdAt: domain.createdAt.toISOString(),
  };
}

export function presentAddress(address: MailAddressDoc) {
  return { address: address._id, identityId: address.identityId, domainId: address.domainId, createdAt: address.createdAt.toISOString() };
}

/** All of an identity's addresses: its inbox address first, then those on custom domains (usable while the domain is verified). */
export function presentAddresses(inboxAddress: string, custom: (MailAddressDoc & { usable: boolean })[]) {
  const addresses = [
    { address: inboxAddress, primary: true, usable: true },
    ...custom.map((a) => ({ ...presentAddress(a), primary: false, usable: a.usable })),
  ];
  return { addresses, count: addresses.length };
}
