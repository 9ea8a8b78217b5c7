import { Schema, type Connection, type Model } from 'mongoose';
import { z } from 'zod';
import type { ActivityLog } from '../platform/activity-log.js';
import { covers, listEntryInput, type ListOwner } from './mail-lists.js';

/**
 * An identity's or its org's mail settings. Each setting is a document of its own, keyed by owner and
 * name: two people changing two settings at once never undo each other (FerretDB rewrites a whole
 * document on every update), and nothing in the background ever writes here.
 *
 * - `admitUnverified`: unverified received mail (no DMARC pass, no aligned SPF or DKIM pass) lands in
 *   the inbox like any other instead of under the `unauthenticated` label. The identity's own setting
 *   wins over its org's; unset everywhere it is false.
 * - `approval` (`never`, `always`, `outside-list`) and `approvalList` (addresses and domains): whether a
 *   send waits for the org admin as a draft: every send, or sends to any recipient not on the list.
 */
export const APPROVAL_MODES = ['never', 'always', 'outside-list'] as const;
export type ApprovalMode = (typeof APPROVAL_MODES)[number];

export const mailSettingsInput = z.object({
  admitUnverified: z.boolean().nullable().optional()
    .describe('Admit received mail that is not verified into the inbox; null removes the setting (the org\'s applies, else false)'),
  approval: z.enum(APPROVAL_MODES).nullable().optional()
    .describe('Sends that wait for the org admin\'s approval as drafts: never, always, or outside-list (any recipient not on approvalList); null removes the setting'),
  approvalList: z.array(listEntryInput).max(500).nullable().optional()
    .describe('Addresses and domains a send may go to without approval when approval is outside-list; null removes the setting'),
}).strict().refine((b) => Object.keys(b).length > 0, 'give at least one setting');

export type MailSettingsInput = z.output<typeof mailSettingsInput>;
const NAMES = ['admitUnverified', 'approval', 'approvalList'] as const;
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

export interface MailSettings { admitUnverified: boolean | null; approval: ApprovalMode | null; approvalList: string[] | null }
type Source = 'identity' | 'org' | 'default';
/** What applies to an identity, and where each value comes from. */
export interface EffectiveMailSettings {
  admitUnverified: boolean; approval: ApprovalMode; approvalList: string[];
  source: { admitUnverified: Source; approval: Source; approvalList: Source };
}

/** The recipients a send must wait for approval for (empty: it may go now). */
export function needingApproval(settings: Pick<EffectiveMailSettings, 'approval' | 'approvalList'>, recipients: string[]): string[] {
  if (settings.approval === 'never') return [];
  if (settings.approval === 'always') return recipients;
  return recipients.filter((r) => !settings.approvalList.some((entry) => covers(entry, r)));
}

export class MailSettingsStore {
  private readonly settings: Model<SettingDoc>;

  /** `admitByDefault`: what applies where neither the identity nor its org set admitUnverified (MAIL_ADMIT_UNVERIFIED). */
  constructor(conn: Connection, private readonly logs: ActivityLog, private readonly admitByDefault = false) {
    this.settings = conn.models.MailSetting ?? conn.model<SettingDoc>('MailSetting', schema, 'mail_settings');
  }

  private async of(owner: string, orgId: string): Promise<MailSettings> {
    const docs = await this.settings.find({ owner, orgId }).lean();
    const value = (name: SettingName) => docs.find((d) => d.name === name)?.value;
    const admit = value('admitUnverified');
    const approval = value('approval');
    const list = value('approvalList');
    return {
      admitUnverified: typeof admit === 'boolean' ? admit : null,
      approval: (APPROVAL_MODES as readonly unknown[]).includes(approval) ? approval as ApprovalMode : null,
      approvalList: Array.isArray(list) ? list as string[] : null,
    };
  }

  /** The owner's own settings (null: not set there). */
  get(owner: ListOwner): Promise<MailSettings> {
    return this.of(ownerKey(owner), owner.orgId);
  }

  /** What applies to an identity: its own setting, else its org's, else the default. */
  async effective(identity: { _id: string; orgId: string }): Promise<EffectiveMailSettings> {
    const [own, org] = await Promise.all([this.of(identity._id, identity.orgId), this.of(`org:${identity.orgId}`, identity.orgId)]);
    const source = (name: SettingName): Source => (own[name] !== null ? 'identity' : org[name] !== null ? 'org' : 'default');
    return {
      admitUnverified: own.admitUnverified ?? org.admitUnverified ?? this.admitByDefault,
      approval: own.approval ?? org.approval ?? 'never',
      approvalList: own.approvalList ?? org.approvalList ?? [],
      source: { admitUnverified: source('admitUnverified'), approval: source('approval'), approvalList: source('approvalList') },
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
