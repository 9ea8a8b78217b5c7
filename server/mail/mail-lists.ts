import { Schema, type Connection, type Model } from 'mongoose';
import { z } from 'zod';
import { AppError, isDuplicateKey, notFound } from '../platform/errors.js';
import type { ActivityLog } from '../platform/activity-log.js';

/**
 * Allow and block lists: who an identity takes mail from and sends mail to. Each list belongs to one
 * identity, or to its org (then it applies to every identity of the org, and only the org's platform key
 * edits it). An entry is an address (`ada@example.org`) or a whole domain (`example.org`, which also covers
 * its subdomains).
 */
export const LIST_KINDS = ['receive-allow', 'receive-block', 'send-allow', 'send-block'] as const;
export type ListKind = (typeof LIST_KINDS)[number];

const DOMAIN = /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+(?:[a-z]{2,63}|xn--[a-z0-9-]{1,59})$/;

/** `ada@example.org`, or a domain written `example.org`, `@example.org` or `*@example.org`. */
export const listEntryInput = z.string().trim().toLowerCase().max(254)
  .transform((value) => value.replace(/^\*?@/, ''))
  .refine((value) => (value.includes('@') ? z.email().safeParse(value).success : DOMAIN.test(value)),
    'must be an email address (ada@example.org) or a domain (example.org)');

export const listKindInput = z.enum(LIST_KINDS, { message: `must be one of ${LIST_KINDS.join(', ')}` });

interface ListEntryDoc {
  _id: string;
  /** An identity id, or `org:<orgId>` for the org-wide lists. */
  owner: string;
  orgId: string;
  kind: ListKind;
  entry: string;
  createdAt: Date;
}

const schema = new Schema<ListEntryDoc>({
  _id: String,
  owner: { type: String, required: true, index: true },
  orgId: { type: String, required: true },
  kind: { type: String, required: true },
  entry: { type: String, required: true },
  createdAt: { type: Date, required: true },
}, { versionKey: false });

/** Whose lists: an identity's own, or its org's. */
export type ListOwner = { orgId: string; identityId?: string };
const ownerKey = (owner: ListOwner) => owner.identityId ?? `org:${owner.orgId}`;
/** One document per (owner, kind, entry): the id itself, so adding an entry twice is one unique insert. */
const entryId = (owner: string, kind: ListKind, entry: string) => `${owner}|${kind}|${entry}`;

export interface ListEntry { kind: ListKind; entry: string; type: 'address' | 'domain'; scope: 'identity' | 'org'; createdAt: Date }

export const covers = (entry: string, address: string): boolean => {
  const lower = address.toLowerCase();
  if (entry.includes('@')) return entry === lower;
  const domain = lower.slice(lower.lastIndexOf('@') + 1);
  return domain === entry || domain.endsWith(`.${entry}`);
};

/** The combined lists that apply to one identity: its own and its org's. */
export class MailPolicy {
  constructor(private readonly entries: ListEntry[]) {}

  private of(kind: ListKind) { return this.entries.filter((e) => e.kind === kind); }

  /**
   * Why mail from `address` is refused (a block entry, or a non-empty allow list it is not on), or null.
   * An allow entry admits only a verified sender: a From header anyone can write admits nobody.
   */
  refusesFrom(address: string, verified: boolean): string | null {
    return this.verdict('receive', address, verified);
  }

  /** Why sending to `address` is refused, or null. */
  refusesTo(address: string): string | null {
    return this.verdict('send', address, true);
  }

  private verdict(direction: 'receive' | 'send', address: string, verified: boolean): string | null {
    const blocked = this.of(`${direction}-block`).find((e) => covers(e.entry, address));
    if (blocked) return `${address} is on the ${blocked.scope === 'org' ? "org's" : "identity's"} ${direction}-block list (entry ${blocked.entry})`;
    // Each scope's allow list applies on its own: an identity's own allow entries cannot widen its org's.
    for (const scope of ['org', 'identity'] as const) {
      const allow = this.of(`${direction}-allow`).filter((e) => e.scope === scope);
      if (!allow.length) continue;
      const listed = allow.some((e) => covers(e.entry, address));
      if (!listed) return `${address} is not on the ${scope === 'org' ? "org's" : "identity's"} ${direction}-allow list`;
      if (!verified) return `${address} is on the ${scope === 'org' ? "org's" : "identity's"} ${direction}-allow list, but the mail is not verified as coming from it`;
    }
    return null;
  }
}

export class MailLists {
  private readonly lists: Model<ListEntryDoc>;

  constructor(conn: Connection, private readonly logs: ActivityLog) {
    this.lists = conn.models.MailListEntry ?? conn.model<ListEntryDoc>('MailListEntry', schema, 'mail_lists');
  }

  private present(doc: ListEntryDoc): ListEntry {
    return { kind: doc.kind, entry: doc.entry, type: doc.entry.includes('@') ? 'address' : 'domain', scope: doc.owner.startsWith('org:') ? 'org' : 'identity', createdAt: doc.createdAt };
  }

  /** The entries `owner` sees: an identity its own and its org's (read-only to it), the org its own. */
  async list(owner: ListOwner, kind?: ListKind): Promise<ListEntry[]> {
    const owners = owner.identityId ? [owner.identityId, `org:${owner.orgId}`] : [`org:${owner.orgId}`];
    // One equality per owner (an index lookup on FerretDB too), rather than an $in.
    const docs = (await Promise.all(owners.map((o) => this.lists.find({ owner: o, orgId: owner.orgId }).lean()))).flat();
    return docs.filter((d) => !kind || d.kind === kind).sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime()).map((d) => this.present(d));
  }

  async policyFor(identity: { _id: string; orgId: string }): Promise<MailPolicy> {
    return new MailPolicy(await this.list({ orgId: identity.orgId, identityId: identity._id }));
  }

  /** Adds an entry; adding one that is there already answers it unchanged (`created: false`). */
  async add(owner: ListOwner, kind: ListKind, entry: string): Promise<{ entry: ListEntry; created: boolean }> {
    const key = ownerKey(owner);
    const doc: ListEntryDoc = { _id: entryId(key, kind, entry), owner: key, orgId: owner.orgId, kind, entry, createdAt: new Date() };
    try {
      await this.lists.create(doc);
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
      const existing = await this.lists.findById(doc._id).lean();
      if (!existing) throw new AppError(409, 'conflict', 'The entry was removed concurrently; retry');
      return { entry: this.present(existing), created: false };
    }
    await this.record(owner, 'mail.list_entry_added', `${entry} added to the ${scopeName(owner)} ${kind} list`, kind, entry);
    return { entry: this.present(doc), created: true };
  }

  async remove(owner: ListOwner, kind: ListKind, entry: string): Promise<void> {
    const result = await this.lists.deleteOne({ _id: entryId(ownerKey(owner), kind, entry) });
    if (!result.deletedCount) throw notFound(`${entry} is not on the ${scopeName(owner)} ${kind} list`);
    await this.record(owner, 'mail.list_entry_removed', `${entry} removed from the ${scopeName(owner)} ${kind} list`, kind, entry);
  }

  private async record(owner: ListOwner, action: string, description: string, kind: ListKind, entry: string) {
    await this.logs.record({
      orgId: owner.orgId, ...(owner.identityId ? { identityId: owner.identityId } : {}), action, category: 'mail', description,
      targetType: 'mail_list', targetId: kind, metadata: { kind, entry, scope: owner.identityId ? 'identity' : 'org' },
    });
  }
}

const scopeName = (owner: ListOwner) => (owner.identityId ? "identity's" : "org's");
