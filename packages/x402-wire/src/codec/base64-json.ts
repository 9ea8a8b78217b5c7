/**
 * The x402 headers are base64 (standard alphabet, as `btoa` writes it) of UTF-8 JSON. Decoding them is
 * the first thing we do with attacker-controlled bytes, so it is bounded, strict and never throws.
 */

/** A real payment header is about 1 KiB; 8 KiB leaves room for v2 extensions and stops abuse early. */
export const MAX_PAYMENT_HEADER_BYTES = 8 * 1024;
/** A payment payload nests four or five levels; echoed extensions get room, a stack-overflow payload does not. */
export const MAX_PAYMENT_HEADER_DEPTH = 32;

export type Base64JsonFailure = 'header_too_large' | 'invalid_base64' | 'invalid_json';

export type Base64JsonResult = { ok: true; value: unknown } | { ok: false; reason: Base64JsonFailure };

import { parseJsonWithin } from './json-depth.js';

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const utf8 = new TextDecoder('utf-8', { fatal: true });
const ASCII = /^[\x00-\x7f]*$/;

export function decodeBase64Json(headerValue: string, maxLength = MAX_PAYMENT_HEADER_BYTES, maxDepth = MAX_PAYMENT_HEADER_DEPTH): Base64JsonResult {
  if (headerValue.length > maxLength) return { ok: false, reason: 'header_too_large' };
  const text = headerValue.trim();
  if (text.length % 4 === 1 || !BASE64.test(text)) return { ok: false, reason: 'invalid_base64' };
  // atob and TextDecoder rather than Buffer: the core runs on web runtimes too (Hono on Workers, Deno).
  // Without its padding, as Buffer read it: atob refuses padding that does not fit the length.
  let binary: string;
  try {
    binary = atob(text.replace(/=+$/, ''));
  } catch {
    return { ok: false, reason: 'invalid_base64' };
  }
  // A payment header is ASCII JSON: then the bytes are the text, and copying them out one by one to
  // decode UTF-8 (the slowest step here by far) is needless.
  let json = binary;
  if (!ASCII.test(binary)) {
    try {
      json = utf8.decode(Uint8Array.from(binary, (char) => char.charCodeAt(0)));
    } catch {
      return { ok: false, reason: 'invalid_json' };
    }
  }
  const value = parseJsonWithin(json, maxDepth);
  return value === undefined ? { ok: false, reason: 'invalid_json' } : { ok: true, value };
}

export function encodeBase64Json(value: unknown): string {
  const json = JSON.stringify(value);
  if (ASCII.test(json)) return btoa(json);
  const bytes = new TextEncoder().encode(json);
  let binary = '';
  // In slices: one argument per byte, and a call takes only so many.
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}
