import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import mongoose, { type Connection } from 'mongoose';
import { isDuplicateKey } from '../platform/errors.js';
import { randomHex } from '../platform/ids.js';

/** What a message document keeps of each attachment; the bytes live in GridFS under `attachmentId`. */
export interface AttachmentRef {
  attachmentId: string;
  filename: string;
  contentType: string;
  size: number;
  /** Content-ID of an inline part (an image the HTML shows with `cid:`), without angle brackets. */
  contentId?: string;
  inline?: boolean;
}

/** An attachment with its bytes, on its way into or out of the store. */
export interface AttachmentContent {
  filename: string;
  contentType: string;
  content: Buffer;
  contentId?: string;
  inline?: boolean;
}

export const newAttachmentId = () => `att_${randomHex(12)}`;

/**
 * The id of an inbound part: the same bytes of the same message get the same id, so a message the
 * sending server delivers again (after a 451, say) stores no second copy of its attachments.
 */
export const inboundAttachmentId = (messageId: string, index: number, content: Buffer) =>
  `att_${createHash('sha256').update(`${messageId}\n${index}\n`).update(content).digest('hex').slice(0, 24)}`;

/**
 * Attachment bytes in GridFS (bucket `mail_attachments`), never inside message documents, so a list of
 * messages reads no attachment bytes. The GridFS file id is our attachment id, which makes a second
 * upload of the same id a no-op. Works on MongoDB and on FerretDB 1.24 alike (upload, ranged chunk reads
 * by `files_id`, delete); `test/mail/attachments.test.ts` runs it on the embedded engine.
 */
export class AttachmentStore {
  private readonly bucket: mongoose.mongo.GridFSBucket;
  private readonly files: mongoose.mongo.Collection<{ _id: string; length: number }>;

  constructor(conn: Connection) {
    const db = conn.db;
    if (!db) throw new Error('AttachmentStore needs an open database connection');
    // The driver mongoose bundles, so the bucket and the connection's Db come from one driver version.
    this.bucket = new mongoose.mongo.GridFSBucket(db, { bucketName: 'mail_attachments' });
    this.files = db.collection<{ _id: string; length: number }>('mail_attachments.files');
  }

  /** Stores the bytes under `id`; an id already stored (same content by construction) is left as it is. */
  async put(id: string, attachment: AttachmentContent, owner: { inboxId: string }): Promise<AttachmentRef> {
    if (!(await this.stored(id))) {
      const upload = this.bucket.openUploadStreamWithId(id as never, attachment.filename, { metadata: { contentType: attachment.contentType, inboxId: owner.inboxId } });
      try {
        await new Promise<void>((resolve, reject) => {
          upload.once('finish', () => resolve());
          upload.once('error', reject);
          upload.end(attachment.content);
        });
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
        // Chunks under this id are there already. GridFS writes the files document last: with it, a
        // concurrent delivery of the same message stored the same bytes first. Without it, an upload died
        // halfway (or is still writing): these bytes go under an id of their own, and nothing is aborted,
        // since abort() would delete every chunk of the id, another writer's too.
        if (!(await this.stored(id))) return this.put(newAttachmentId(), attachment, owner);
      }
    }
    return {
      attachmentId: id, filename: attachment.filename, contentType: attachment.contentType, size: attachment.content.length,
      ...(attachment.contentId ? { contentId: attachment.contentId } : {}), ...(attachment.inline ? { inline: true } : {}),
    };
  }

  /** Whether an upload of `id` completed (its files document exists). */
  private async stored(id: string): Promise<boolean> {
    return !!(await this.files.findOne({ _id: id }, { projection: { _id: 1 } }));
  }

  /** A sent message's whole RFC 5322 bytes, when they are too large for its outbound record. */
  async putRaw(messageDocId: string, raw: string): Promise<string> {
    const stored = await this.put(`raw_${messageDocId}`, { filename: `${messageDocId}.eml`, contentType: 'message/rfc822', content: Buffer.from(raw, 'utf8') }, { inboxId: '' });
    return stored.attachmentId;
  }

  stream(id: string): Readable {
    return this.bucket.openDownloadStream(id as never);
  }

  async read(id: string): Promise<Buffer> {
    const chunks: Buffer[] = [];
    for await (const chunk of this.stream(id)) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  }
}
