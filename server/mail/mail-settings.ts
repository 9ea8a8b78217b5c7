import { Schema, type Connection, type Model } from 'mongoose';
import { z } from 'zod';
import type { ActivityLog } from '../logs/activity-log.js';
import type { ListOwner } from './mail-lists.js';

/**
 * An identity's or its org's mail settings. Each setting is a document of its own, keyed by owner and
 * name: two people changing two settings at once never undo each other (FerretDB rewrites a whole
 * document on every update), and nothing in the background ever writes here.
 *
 * - `admitUnverified`: unverified received mail (no DMARC pass, no aligned SPF or DKIM pass) lands in
 *   the inbox like any other instead of under the `unauthenticated` label. The identity's own setting
 *   wins over its org's; unset everywhere it is false.
 */
export const mailSettingsInput = z.object({
  admitUnverified: z.boolean().nullable().optional()
    .describe('Admit received mail that is not verified into the inbox; null removes the setting (the org\'s applies, else false)'),
}).strict().refine((b) => Object.keys(b).length > 0, 'give at least one setting');

export type MailSettingsInput = z.output<typeof mailSettingsInput>;
const NAMES = ['admitUnverified'] as const;
type SettingName = (typeof NAMES)[number];

interface SettingDoc { _id: string; owner: string; orgId: string; name: SettingName; value: unknown; updatedAt: Date }

const schema = new Schema<SettingDoc>({
  _id: String,
  owner: { type: String, required: true, index: true },
  orgId: { type: String, required: true },
  name: { type: String, required: true },
  value: { type: Schema.Types.Mixed },
  updatedAt: { type: Date, required: true },
}, { versionKey: false, minimize: false });

const ownerKey = (owner: ListOwner) => owner.identityId ?? `org:${owner.orgId}`;

export interface MailSettings { admitUnverified: boolean | null }
/** What applies to an identity, and where each value comes from. */
export interface EffectiveMailSettings { admitUnverified: boolean; source: { admitUnverified: 'identity' | 'org' | 'default' } }

export class MailSettingsStore {
  private readonly settings: Model<SettingDoc>;

  constructor(conn: Connection, private readonly logs: ActivityLog) {
    this.settings = conn.models.MailSetting ?? conn.model<SettingDoc>('MailSetting', schema, 'mail_settings');
  }

  private async of(owner: string, orgId: string): Promise<MailSettings> {
    const docs = await this.settings.find({ owner, orgId }).lean();
    const value = (name: SettingName) => docs.find((d) => d.name === name)?.value;
    const admit = value('admitUnverified');
    return { admitUnverified: typeof admit === 'boolean' ? admit : null };
  }

  /** The owner's own settings (null: not set there). */
  get(owner: ListOwner): Promise<MailSettings> {
    return this.of(ownerKey(owner), owner.orgId);
  }

  /** What applies to an identity: its own setting, else its org's, else the default. */
  async effective(identity: { _id: string; orgId: string }): Promise<EffectiveMailSettings> {
    const [own, org] = await Promise.all([this.of(identity._id, identity.orgId), this.of(`org:${identity.orgId}`, identity.orgId)]);
    const admit = own.admitUnverified ?? org.admitUnverified;
    return {
      admitUnverified: admit ?? false,
      source: { admitUnverified: own.admitUnverified !== null ? 'identity' : org.admitUnverified !== null ? 'org' : 'default' },
    };
  }

  async update(owner: ListOwner, input: MailSettingsInput): Promise<MailSettings> {
    const key = ownerKey(owner);
    for (const name of NAMES) {
      const value = input[name];
      if (value === undefined) continue;
      if (value === null) await this.settings.deleteOne({ _id: `${key}|${name}` });
      else await this.settings.updateOne({ _id: `${key}|${name}` }, { $set: { owner: key, orgId: owner.orgId, name, value, updatedAt: new Date() } }, { upsert: true });
    }
    await this.logs.record({
      orgId: owner.orgId, ...(owner.identityId ? { identityId: owner.identityId } : {}), action: 'mail.settings_updated', category: 'mail',
      description: `Mail settings of the ${owner.identityId ? 'identity' : 'org'} updated`, targetType: 'mail_settings', targetId: key,
      metadata: { ...input },
    });
    return this.get(owner);
  }
}
