import { mimeParts, parseHeaderBlock, splitHead, type MimePart } from './mime-parts.js';

/** One recipient of a delivery report (RFC 3464) that the reporting server gave up on. */
export interface FailedRecipient {
  address: string;
  /** The enhanced status code, e.g. `5.1.1`. */
  status: string;
  /** What the remote server said, e.g. `smtp; 550 5.1.1 no such user`. */
  diagnostic?: string;
}

/** A bounce: which message could not be delivered, and to whom. */
export interface DeliveryReport {
  /** The undeliverable message's Message-ID, from the returned headers (or the report's own references). */
  originalMessageId?: string;
  failed: FailedRecipient[];
}

const addressOf = (field: string | undefined) => {
  const value = (field ?? '').replace(/^[^;]*;/, '').trim().replace(/^<(.*)>$/, '$1');
  return /^[^\s@<>]+@[^\s@<>]+$/.test(value) ? value.toLowerCase() : undefined;
};

const messageIdOf = (value: string | undefined) => /<[^<>\s]+>/.exec(value ?? '')?.[0];

/** Blocks of `name: value` fields separated by blank lines, as message/delivery-status is written. */
function fieldBlocks(text: string): Array<Record<string, string>> {
  return text.split(/\r?\n\s*\r?\n/).map(parseHeaderBlock).filter((block) => Object.keys(block).length > 0);
}

function returnedMessageId(parts: MimePart[]): string | undefined {
  for (const part of parts) {
    if (part.contentType === 'text/rfc822-headers') return messageIdOf(parseHeaderBlock(part.body.toString('latin1'))['message-id']);
    if (part.contentType === 'message/rfc822') {
      return messageIdOf(parseHeaderBlock(splitHead(part.body).head)['message-id']);
    }
  }
  return undefined;
}

/**
 * Reads a delivery status notification: `multipart/report; report-type=delivery-status`. Returns undefined
 * for any other message, and for a report that names no failed recipient (a delay warning, a success
 * notice): only `Action: failed` is a bounce.
 */
export function parseDeliveryReport(raw: Buffer, fallbackReferences: string[] = []): DeliveryReport | undefined {
  const contentType = parseHeaderBlock(splitHead(raw).head)['content-type'] ?? '';
  if (!/^multipart\/report\b/i.test(contentType) || !/report-type\s*=\s*"?delivery-status/i.test(contentType)) return undefined;
  const parts = mimeParts(raw);
  const status = parts.find((p) => p.contentType === 'message/delivery-status' || p.contentType === 'message/global-delivery-status');
  if (!status) return undefined;
  const failed = fieldBlocks(status.body.toString('utf8'))
    .filter((block) => (block.action ?? '').toLowerCase() === 'failed')
    .flatMap((block) => {
      const address = addressOf(block['final-recipient']) ?? addressOf(block['original-recipient']);
      return address ? [{ address, status: block.status ?? '5.0.0', ...(block['diagnostic-code'] ? { diagnostic: block['diagnostic-code'] } : {}) }] : [];
    });
  if (!failed.length) return undefined;
  return { originalMessageId: returnedMessageId(parts) ?? fallbackReferences.at(-1), failed };
}
