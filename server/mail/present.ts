import type { MessageDoc, ThreadDoc } from './message-model.js';
import type { AttachmentRef } from './attachment-store.js';
import type { Authentication } from './mail-auth.js';

const NOTHING_CHECKED: Authentication = {
  spf: { result: 'none', domain: null }, dkim: { result: 'none', domain: null }, dmarc: { result: 'none', domain: null }, arc: { result: 'none', domain: null }, verified: false,
};

/**
 * Who sent the message, as its reader sees it: received mail carries the verdict it got as it arrived;
 * our own sent copy is verified by construction (our inbox, our DKIM), marked `internal`.
 */
export function authenticationOf(message: MessageDoc): Authentication {
  if (message.direction === 'sent') {
    const domain = message.inboxId.slice(message.inboxId.lastIndexOf('@') + 1).toLowerCase();
    return { spf: { result: 'pass', domain }, dkim: { result: 'pass', domain }, dmarc: { result: 'pass', domain }, arc: { result: 'none', domain: null }, verified: true, internal: true };
  }
  const { spf, dkim, dmarc, arc, verified, internal } = message.authentication ?? NOTHING_CHECKED;
  return { spf, dkim, dmarc, arc, verified, ...(internal ? { internal } : {}) };
}

/** A message as SPEC 2.4 shows it; `cc`, `html` and the sender's delivery state only on single reads. */
export function presentMessage(message: MessageDoc, options: { single?: boolean } = {}) {
  const body: Record<string, unknown> = {
    messageId: message.messageId,
    threadId: message.threadId,
    inboxId: message.inboxId,
    from: message.from,
    to: message.to,
    subject: message.subject,
    text: message.text,
    ...(message.direction === 'received' ? { extractedText: message.extractedText ?? '' } : {}),
    labels: message.labels,
    attachments: (message.attachments ?? []).map(presentAttachment),
    authentication: authenticationOf(message),
    createdAt: message.createdAt.toISOString(),
  };
  if (options.single) {
    body.cc = message.cc ?? [];
    if (message.direction === 'sent' && message.bcc?.length) body.bcc = message.bcc; // only the sender ever sees these
    if (message.html !== undefined) body.html = message.html;
    if (message.inReplyTo) body.inReplyTo = message.inReplyTo;
    if (message.references?.length) body.references = message.references;
    if (message.delivery) body.delivery = presentDelivery(message.delivery);
  }
  return body;
}

export function presentAttachment(a: AttachmentRef) {
  return {
    attachmentId: a.attachmentId, filename: a.filename, contentType: a.contentType, size: a.size,
    ...(a.inline ? { inline: true, contentId: a.contentId } : {}),
  };
}

function presentDelivery(delivery: NonNullable<MessageDoc['delivery']>) {
  return {
    status: delivery.status,
    attempts: delivery.attempts,
    recipients: delivery.recipients.map((r) => ({ address: r.address, status: r.status, ...(r.error ? { error: r.error } : {}) })),
    lastError: delivery.lastError ?? null,
    updatedAt: delivery.updatedAt.toISOString(),
  };
}

/** The 201 body of send and reply (SPEC 4.2): the send shape, which is a superset of the reply shape. */
export function presentSent(message: MessageDoc) {
  return {
    messageId: message.messageId,
    threadId: message.threadId,
    inboxId: message.inboxId,
    from: message.from,
    to: message.to,
    subject: message.subject,
    labels: message.labels,
    // Only when there are some: the SPEC's send answer has no such field.
    ...(message.attachments?.length ? { attachments: message.attachments.map(presentAttachment) } : {}),
    createdAt: message.createdAt.toISOString(),
  };
}

export function presentLabels(message: MessageDoc) {
  return { messageId: message.messageId, labels: message.labels, createdAt: message.createdAt.toISOString() };
}

export function presentThread(thread: ThreadDoc, messages?: MessageDoc[]) {
  return {
    threadId: thread._id,
    inboxId: thread.inboxId,
    subject: thread.subject,
    messageCount: thread.messageCount,
    createdAt: thread.createdAt.toISOString(),
    updatedAt: thread.updatedAt.toISOString(),
    ...(messages ? { messages: messages.map((m) => presentMessage(m)) } : {}),
  };
}
