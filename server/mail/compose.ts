import MailComposer from 'nodemailer/lib/mail-composer';

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
  });
  const raw = await composer.compile().build();
  return raw.toString('utf8');
}
