import { z } from 'zod';
import { AppError } from './errors.js';

/**
 * Cursor pagination over (sortField desc, _id desc). The token carries the last item's sort value and
 * id, so items that share a timestamp are neither skipped nor repeated, and items inserted after the
 * first page do not shift later pages. It reads as a timestamp followed by the tie-breaking id.
 */
export interface Cursor { at: Date; id: string }

export function encodeCursor(cursor: Cursor): string {
  return Buffer.from(`${cursor.at.toISOString()}|${cursor.id}`, 'utf8').toString('base64url');
}

export function decodeCursor(token: string): Cursor {
  const invalid = new AppError(400, 'invalid_page_token', 'pageToken is malformed; pass nextPageToken from a previous response');
  if (token.length > 512 || !/^[A-Za-z0-9_-]+$/.test(token)) throw invalid;
  const text = Buffer.from(token, 'base64url').toString('utf8');
  const [iso, id, ...rest] = text.split('|');
  const at = new Date(iso ?? '');
  if (rest.length || !id || Number.isNaN(at.getTime()) || at.toISOString() !== iso) throw invalid;
  return { at, id };
}

/**
 * Newest-first order as one string: fixed-width ISO 8601 time, then the document id that breaks ties
 * within a millisecond. Compares like (time, id), and is exactly the text a page token carries.
 */
export const sortKeyOf = (at: Date, id: string) => `${at.toISOString()}|${id}`;

/** Mongo filter for "strictly after the cursor" in a (field desc, _id desc) ordering. */
export function afterCursor(field: string, cursor: Cursor | undefined): Record<string, unknown> {
  if (!cursor) return {};
  return { $or: [{ [field]: { $lt: cursor.at } }, { [field]: cursor.at, _id: { $lt: cursor.id } }] };
}

/**
 * A whole-number query parameter from `min`: an empty value (`?offset=`) is refused like any other
 * non-number, where coercion alone would read it as 0 (`Number('')`).
 */
export const wholeNumberParam = (min: number, max: number) =>
  z.preprocess((value) => (value === '' ? Number.NaN : value), z.coerce.number().int().min(min).max(max));

export const limitParam = (defaultLimit = 50, max = 100) =>
  z.coerce.number().int().min(1).max(max).default(defaultLimit);

/** Fetches one extra row to learn whether another page exists without a count query. */
export function pageOf<T>(rows: T[], limit: number, cursorOf: (row: T) => Cursor): { items: T[]; nextPageToken?: string } {
  const items = rows.slice(0, limit);
  const last = items[items.length - 1];
  return rows.length > limit && last ? { items, nextPageToken: encodeCursor(cursorOf(last)) } : { items };
}
