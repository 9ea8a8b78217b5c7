import type { ActivityLog } from '../platform/activity-log.js';
import { AppError, badRequest } from '../platform/errors.js';
import type { MessageDoc } from './message-model.js';
import { MAX_LABELS_PER_MESSAGE, type LabelsInput } from './mail-schemas.js';
import { logSubject, unique, type MailStore } from './mail-store.js';

// An identity's labels on its messages (read, starred, its own), changed without losing a concurrent edit.

export class MailLabels {
  constructor(private readonly store: MailStore, private readonly logs: ActivityLog) {}

  /**
   * Adds then removes labels with compare-and-set on the label array, so concurrent edits never lose one on
   * MongoDB (FerretDB 1.x does not make the compare-and-set atomic; there, racing edits can still lose one).
   */
  async updateLabels(identityId: string, messageId: string, change: LabelsInput): Promise<MessageDoc> {
    const add = unique(change.addLabels ?? []);
    const remove = new Set(change.removeLabels ?? []);
    const both = add.filter((l) => remove.has(l));
    if (both.length) throw badRequest(`A label cannot be both added and removed: ${both.join(', ')}`);
    for (let attempt = 0; attempt < 10; attempt++) {
      const current = await this.store.getMessage(identityId, messageId);
      const labels = unique([...current.labels, ...add]).filter((l) => !remove.has(l));
      if (labels.length > MAX_LABELS_PER_MESSAGE) throw badRequest(`A message can carry at most ${MAX_LABELS_PER_MESSAGE} labels`);
      const result = await this.store.messages.updateOne({ _id: current._id, labels: current.labels }, { $set: { labels } });
      if (!result.matchedCount) continue;
      await this.store.noteChange(current.inboxId);
      const updated = { ...current, labels };
      const identity = await this.store.inboxOf(identityId);
      await this.logs.record({
        orgId: identity.orgId, identityId, action: 'mail.labels_updated', category: 'mail',
        description: `Labels of "${logSubject(updated.subject)}" updated`, targetType: 'message', targetId: updated.messageId,
        metadata: { addLabels: add, removeLabels: [...remove], labels },
      });
      return updated;
    }
    throw new AppError(409, 'conflict', 'The labels changed concurrently too often; retry');
  }
}
