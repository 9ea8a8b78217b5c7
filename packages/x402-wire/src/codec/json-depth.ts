/**
 * Nesting limits for JSON from someone else (a request body, a payment header, a seller's response).
 * JSON.parse copes with deep nesting, but every recursive walk after it (JSON.stringify, schema checks,
 * BSON encoding) can overflow the stack, so deep input is refused before it is parsed.
 */

/**
 * True when `text` nests arrays or objects deeper than `max`. One pass over the raw text that skips
 * string contents: no recursion and no allocation, whatever the input.
 */
export function exceedsJsonDepth(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
      continue;
    }
    if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) { if (++depth > max) return true; }
    else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

/** JSON.parse that gives undefined for invalid JSON and for JSON nested deeper than `maxDepth`. */
export function parseJsonWithin(text: string, maxDepth: number): unknown {
  if (exceedsJsonDepth(text, maxDepth)) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
