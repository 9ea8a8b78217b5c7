/**
 * A small walk over a message's MIME tree, for the two kinds of part mailparser does not hand over as
 * they are: `message/rfc822` (mailparser flattens a forwarded message into the body and lifts its
 * attachments, so the message itself is lost) and the parts of a delivery report (RFC 3464
 * `message/delivery-status`, `text/rfc822-headers`). It does not descend into an enclosed message: what
 * matters is the outer message's own parts.
 */
export interface MimePart {
  contentType: string;
  params: Record<string, string>;
  headers: Record<string, string>;
  /** The body with its Content-Transfer-Encoding undone. */
  body: Buffer;
}

const MAX_DEPTH = 8;
const MAX_PARTS = 200;

/** Header fields of one block, unfolded, names lower-cased (the first occurrence wins). */
export function parseHeaderBlock(text: string): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const line of text.replace(/\r?\n[ \t]+/g, ' ').split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    if (!(name in headers)) headers[name] = line.slice(colon + 1).trim();
  }
  return headers;
}

function parseContentType(value: string | undefined): { type: string; params: Record<string, string> } {
  const [type = 'text/plain', ...rest] = (value ?? 'text/plain').split(';');
  const params: Record<string, string> = {};
  for (const param of rest) {
    const eq = param.indexOf('=');
    if (eq > 0) params[param.slice(0, eq).trim().toLowerCase()] = param.slice(eq + 1).trim().replace(/^"(.*)"$/, '$1');
  }
  return { type: type.trim().toLowerCase(), params };
}

export function splitHead(raw: Buffer): { head: string; body: Buffer } {
  const crlf = raw.indexOf('\r\n\r\n');
  const lf = raw.indexOf('\n\n');
  const [at, sep] = crlf >= 0 && (lf < 0 || crlf <= lf) ? [crlf, 4] : lf >= 0 ? [lf, 2] : [raw.length, 0];
  return { head: raw.subarray(0, at).toString('latin1'), body: raw.subarray(at + sep) };
}

function decode(body: Buffer, encoding: string | undefined): Buffer {
  switch ((encoding ?? '').trim().toLowerCase()) {
    case 'base64': return Buffer.from(body.toString('latin1').replace(/[^A-Za-z0-9+/=]/g, ''), 'base64');
    case 'quoted-printable': return Buffer.from(body.toString('latin1').replace(/=\r?\n/g, '').replace(/=([0-9A-Fa-f]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16))), 'latin1');
    default: return body;
  }
}

/** The leaf parts of `raw` (a whole message), enclosed messages counted as one leaf each. */
export function mimeParts(raw: Buffer): MimePart[] {
  const parts: MimePart[] = [];
  const walk = (entity: Buffer, depth: number) => {
    if (parts.length >= MAX_PARTS) return;
    const { head, body } = splitHead(entity);
    const headers = parseHeaderBlock(head);
    const { type, params } = parseContentType(headers['content-type']);
    if (type.startsWith('multipart/') && params.boundary && depth < MAX_DEPTH) {
      const delimiter = Buffer.from(`--${params.boundary}`);
      let at = body.indexOf(delimiter);
      while (at >= 0) {
        const after = at + delimiter.length;
        if (body.subarray(after, after + 2).toString() === '--') break; // the closing delimiter
        const next = body.indexOf(delimiter, after);
        if (next < 0) break;
        const start = body[after] === 13 ? after + 2 : after + 1; // past the line break after the delimiter
        const end = body[next - 2] === 13 ? next - 2 : next - 1; // the line break before a delimiter belongs to it
        if (end > start) walk(body.subarray(start, end), depth + 1);
        at = next;
      }
      return;
    }
    parts.push({ contentType: type, params, headers, body: decode(body, headers['content-transfer-encoding']) });
  };
  walk(raw, 0);
  return parts;
}
