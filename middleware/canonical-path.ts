/**
 * One canonical form of a request path, so that route matching cannot be dodged by spelling the same
 * path differently. The guarantee we need: every request target that Express 5 or Koa (@koa/router)
 * could route to a protected handler is either matched as protected or refused (400). Both routers
 * match the raw, still-encoded pathname case-insensitively with an optional trailing slash, and cut
 * the path at the first "?" or "#" (parseurl falls back to url.parse, which also trims whitespace and
 * folds "\" into "/"). So we:
 * - accept origin-form ("/a?b") and absolute-form ("http://h/a") targets, and cut at "?" / "#";
 * - refuse raw bytes outside printable ASCII (whitespace, controls, NBSP, BOM) and raw "\";
 * - decode percent-escapes exactly once, refusing malformed escapes, invalid UTF-8, encoded "/", "\"
 *   or NUL, decoded control characters, and anything that still looks encoded (double encoding);
 * - collapse empty segments ("//") and drop the trailing slash;
 * - refuse "." and ".." segments instead of resolving them: a router sees "/x/.." as a path whose last
 *   segment is "..", which a ":param" route matches, so resolving would unprotect it;
 * - compare lower-cased (both routers are case-insensitive by default).
 * Decoding is stricter than the routers (they never decode before matching), which only ever makes
 * more requests protected, never fewer.
 */

export type PathRejection =
  | 'invalid_request_target'
  | 'invalid_character'
  | 'backslash'
  | 'malformed_percent_encoding'
  | 'encoded_separator'
  | 'double_encoding'
  | 'dot_segment';

export type CanonicalPath =
  | {
      readonly ok: true;
      /** Decoded, collapsed, no trailing slash, case kept: "/Weather/today". */
      readonly path: string;
      /** `path` lower-cased, for matching. */
      readonly key: string;
    }
  | { readonly ok: false; readonly reason: PathRejection };

const SLASH = 0x2f;
const DOT = 0x2e;
const PERCENT = 0x25;
const BACKSLASH = 0x5c;
const QUESTION = 0x3f;
const HASH = 0x23;

const ABSOLUTE_FORM = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i;
const ENCODED_FORBIDDEN = /%(?:2f|5c|00)/i;
const STILL_ENCODED = /%[0-9a-f]{2}/i;
// Decoded C0 controls and DEL: nothing a router or a handler should see in a path.
const CONTROL = /[\u0000-\u001f\u007f]/;

/** `target` is the request target as received: path plus optional query (Node's `req.url`). */
export function canonicalizePath(target: string): CanonicalPath {
  let raw = target;
  if (raw.charCodeAt(0) !== SLASH) {
    const absolute = ABSOLUTE_FORM.exec(raw);
    if (!absolute) return reject('invalid_request_target');
    raw = raw.slice(absolute[0].length);
    if (raw.length === 0 || raw.charCodeAt(0) === QUESTION || raw.charCodeAt(0) === HASH) raw = '/' + raw;
    if (raw.charCodeAt(0) !== SLASH) return reject('invalid_request_target');
  }

  // One pass over the raw bytes: find the end of the path and whether anything needs more work.
  let end = raw.length;
  let encoded = false;
  let irregular = false; // "//", a segment starting with "." or a trailing "/"
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    if (c === QUESTION || c === HASH) {
      end = i;
      break;
    }
    if (c <= 0x20 || c >= 0x7f) return reject('invalid_character');
    if (c === BACKSLASH) return reject('backslash');
    if (c === PERCENT) encoded = true;
    else if (c === SLASH || c === DOT) {
      if (raw.charCodeAt(i - 1) === SLASH) irregular = true;
    }
  }
  let path = end === raw.length ? raw : raw.slice(0, end);
  if (path.length > 1 && path.charCodeAt(path.length - 1) === SLASH) irregular = true;

  if (!encoded && !irregular) return accept(path);

  if (encoded) {
    if (ENCODED_FORBIDDEN.test(path)) return reject('encoded_separator');
    try {
      path = decodeURIComponent(path);
    } catch {
      return reject('malformed_percent_encoding'); // bad escape or invalid UTF-8
    }
    if (STILL_ENCODED.test(path)) return reject('double_encoding');
    if (CONTROL.test(path)) return reject('invalid_character');
  }

  const segments: string[] = [];
  for (const segment of path.split('/')) {
    if (segment === '') continue;
    if (segment === '.' || segment === '..') return reject('dot_segment');
    segments.push(segment);
  }
  return accept('/' + segments.join('/'));
}

function accept(path: string): CanonicalPath {
  return { ok: true, path, key: path.toLowerCase() };
}

function reject(reason: PathRejection): CanonicalPath {
  return { ok: false, reason };
}

const LENIENT_TRIGGER = /[;\s\u0080-\uffff]/;
const INVISIBLE = /\p{Cf}/gu;

/**
 * Other readings of an already canonical path that some server or proxy in front of the app might
 * apply: matrix parameters cut at ";" (Tomcat, Jetty, Spring), whitespace trimmed per segment,
 * invisible format characters (zero-width space, BOM) dropped, and Unicode compatibility folding
 * (fullwidth "ｗ" -> "w"). Express and Koa do none of these; the Paywall
 * uses them only to refuse a path that is unprotected as written but protected in another reading.
 */
export function lenientReadings(key: string): string[] {
  if (!LENIENT_TRIGGER.test(key)) return [];
  const readings = new Set<string>();
  const fold = (segments: string[]) =>
    '/' +
    segments
      .map((s) => s.normalize('NFKC').replace(INVISIBLE, '').toLowerCase().trim())
      .filter((s) => s !== '')
      .join('/');
  const segments = key.split('/').filter((s) => s !== '');
  readings.add(fold(segments));
  readings.add(fold(segments.map((s) => s.split(';')[0]!)));
  readings.delete(key);
  return [...readings];
}
