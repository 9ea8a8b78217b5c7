import { simpleParser, type AddressObject } from 'mailparser';
import EmailReplyParser from 'email-reply-parser';
import type { InboundMail } from './mail-service.js';

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

/** Parses raw RFC 5322 bytes into what an inbox stores; a message without a Message-ID gets one. */
export async function parseInbound(raw: Buffer, fallbackMessageId: () => string): Promise<InboundMail> {
  const parsed = await simpleParser(raw, { skipImageLinks: true, skipTextToHtml: true });
  const text = withoutNul(parsed.text ?? '').trimEnd();
  const messageId = parsed.messageId && /^<[^<>\s]+>$/.test(parsed.messageId) ? parsed.messageId : fallbackMessageId();
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
    references: asList(parsed.references),
  };
}
