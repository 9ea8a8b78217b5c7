import MailComposer from 'nodemailer/lib/mail-composer';
import type { AttachmentContent } from './attachment-store.js';

export interface Outgoing {
  messageId: string;
  from: { name: string; address: string };
  to: string[];
  cc: string[];
  subject: string;
  text: string;
  html?: string;
  inReplyTo?: string;
  references: string[];
  date: Date;
  attachments?: AttachmentContent[];
}

/**
 * The RFC 5322 bytes of an outgoing message. Bcc is deliberately not an input: blind recipients travel
 * only in the SMTP envelope, so no copy of the message can reveal them.
 */
export async function composeMessage(mail: Outgoing): Promise<string> {
  const composer = new MailComposer({
    from: mail.from,
    to: mail.to,
    cc: mail.cc.length ? mail.cc : undefined,
    subject: mail.subject,
    text: mail.text,
    html: mail.html,
    messageId: mail.messageId,
    inReplyTo: mail.inReplyTo,
    references: mail.references.length ? mail.references : undefined,
    date: mail.date,
    attachments: mail.attachments?.map((a) => ({
      filename: a.filename, contentType: a.contentType, content: a.content,
      // An inline part is referenced from the HTML by its Content-ID; nodemailer then builds multipart/related.
      ...(a.contentId ? { cid: a.contentId } : {}),
      ...(a.contentType === 'message/rfc822' ? { contentDisposition: 'attachment' as const } : {}),
    })),
  });
  const raw = await composer.compile().build();
  return raw.toString('utf8');
}
