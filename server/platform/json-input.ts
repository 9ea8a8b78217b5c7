import { z } from 'zod';

/**
 * How deep a request body may nest. Refused at the body parser, before any handler runs (see
 * the wire package's codec/json-depth.ts); MongoDB itself refuses documents nested past 100 levels.
 */
export const MAX_JSON_DEPTH = 32;

/**
 * A key of a free-form object we store in the clear (metadata). MongoDB refuses field names that start
 * with `$`, and a `.` would be read as a path by every later query or update, so both are refused with a
 * 400 here rather than a 500 from the database; NUL would end the name in BSON.
 */
export const storableKey = z.string().min(1).max(64)
  .refine((k) => !k.startsWith('$'), 'must not start with "$"')
  .refine((k) => !k.includes('.'), 'must not contain "."')
  .refine((k) => !k.includes('\0'), 'must not contain NUL');

/** Labels a client attaches to a vault item or an event: at most 32 keys of scalars. */
export const metadataRecord = z.record(storableKey, z.union([z.string().max(1024), z.number(), z.boolean(), z.null()]))
  .refine((m) => Object.keys(m).length <= 32, 'at most 32 keys');

/**
 * An HTTP header value we send on a client's behalf: visible ASCII, space and tab. Node refuses CR, LF,
 * NUL and anything above U+00FF when the request is built; refusing here says which header is wrong.
 */
export const outgoingHeaderValue = z.string().max(8192).regex(/^[\t\x20-\x7e]*$/, 'must be visible ASCII characters, spaces and tabs only');
