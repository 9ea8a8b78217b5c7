import type { AddressObject, ParsedMail } from 'mailparser';
import EmailReplyParser from 'email-reply-parser';
import type { InboundMail } from './incoming-mail.js';
import type { AttachmentContent } from './attachment-store.js';
import { mimeParts, parseHeaderBlock, splitHead } from './mime-parts.js';
import { parseDeliveryReport } from './delivery-report.js';
import { lazily } from '../platform/lazily.js';

// Loaded with the first message received (0.08 s of a start on an idle machine).
const loadMailparser = lazily(() => import('mailparser'));

const addressesOf = (field: AddressObject | AddressObject[] | undefined): string[] =>
  (Array.isArray(field) ? field : field ? [field] : [])
    .flatMap((group) => group.value.flatMap((a) => (a.group ? a.group : [a])))
    .map((a) => a.address ?? '')
    .filter(Boolean);

const asList = (value: string | string[] | undefined): string[] => (Array.isArray(value) ? value : value ? value.split(/\s+/) : [])
  .map((id) => id.trim()).filter((id) => /^<[^<>\s]+>$/.test(id));

/** Only the new text of a reply: quoted history ("On ... wrote:", "> ...") and signatures removed. */
export function extractReplyText(text: string): string {
  return new EmailReplyParser().parseReply(text).trim();
}

/**
 * NUL has no place in mail (RFC 5322 forbids it) and PostgreSQL, under the dev and test engine, cannot
 * store it: a message carrying one (a decoded body part can) would be refused with 451 on every retry.
 */
const withoutNul = (value: string) => value.replaceAll('\0', '');

const EXTENSIONS: Record<string, string> = { 'image/png': 'png', 'image/jpeg': 'jpg', 'image/gif': 'gif', 'image/webp': 'webp', 'application/pdf': 'pdf', 'text/plain': 'txt', 'message/rfc822': 'eml' };
const safeName = (name: string) => name.replace(/[\p{Cc}\/\\]/gu, '_').trim().slice(0, 255);
const nameFor = (filename: string | undefined, contentType: string, index: number) =>
  (filename && safeName(filename)) || `attachment-${index + 1}.${EXTENSIONS[contentType] ?? 'bin'}`;

/**
 * The message's attachments: mailparser's (inline images keep their Content-ID, so the HTML's `cid:`
 * links can be resolved), plus each enclosed `message/rfc822` as a whole `.eml` file, which mailparser
 * would otherwise only flatten into the body (its text stays there too, its attachments are listed).
 */
function attachmentsOf(parsed: ParsedMail, raw: Buffer): AttachmentContent[] {
  const parts: AttachmentContent[] = parsed.attachments
    .filter((a) => a.contentType !== 'text/rfc822-headers' && a.contentType !== 'message/delivery-status')
    .map((a, i) => {
      const contentId = a.contentId?.replace(/^<|>$/g, '') || undefined;
      const inline = a.contentDisposition === 'inline' && !!contentId;
      return { filename: nameFor(a.filename, a.contentType, i), contentType: a.contentType.toLowerCase(), content: a.content, ...(inline ? { contentId, inline } : {}) };
    });
  for (const part of mimeParts(raw).filter((p) => p.contentType === 'message/rfc822')) {
    const subject = parseHeaderBlock(splitHead(part.body).head).subject?.trim();
    const named = (part.params.name ?? /filename="?([^";]+)"?/i.exec(part.headers['content-disposition'] ?? '')?.[1]);
    parts.push({ filename: named ? safeName(named) : `${safeName(subject || 'message').slice(0, 200) || 'message'}.eml`, contentType: 'message/rfc822', content: part.body });
  }
  return parts;
}

/** Parses raw RFC 5322 bytes into what an inbox stores; a message without a Message-ID gets one. */
export async function parseInbound(raw: Buffer, fallbackMessageId: () => string): Promise<InboundMail> {
  const { simpleParser } = await loadMailparser();
  const parsed = await simpleParser(raw, { skipImageLinks: true, skipTextToHtml: true });
  const text = withoutNul(parsed.text ?? '').trimEnd();
  const messageId = parsed.messageId && /^<[^<>\s]+>$/.test(parsed.messageId) ? parsed.messageId : fallbackMessageId();
  const references = asList(parsed.references);
  const report = parseDeliveryReport(raw, references);
  return {
    messageId,
    from: addressesOf(parsed.from),
    to: addressesOf(parsed.to),
    cc: addressesOf(parsed.cc),
    replyTo: addressesOf(parsed.replyTo),
    subject: withoutNul(parsed.subject ?? ''),
    text,
    html: typeof parsed.html === 'string' ? withoutNul(parsed.html) : undefined,
    extractedText: extractReplyText(text),
    inReplyTo: asList(parsed.inReplyTo)[0],
    references,
    attachments: attachmentsOf(parsed, raw),
    ...(report ? { deliveryReport: report } : {}),
  };
}
