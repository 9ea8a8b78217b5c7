/**
 * Canonical JSON: the exact bytes a receipt signature covers. The backend signs with this and any
 * verifier recomputes it, so both sides must agree byte for byte:
 * - object keys sorted recursively by UTF-16 code units (plain `Array.prototype.sort`, as RFC 8785);
 * - no whitespace; strings and numbers as `JSON.stringify` writes them;
 * - properties whose value is `undefined` are left out (as JSON.stringify does);
 * - anything JSON cannot represent faithfully (bigint, NaN, Infinity, functions, symbols,
 *   `undefined` inside arrays) throws rather than being silently changed.
 * Receipt bodies carry amounts as strings (`amountUsdcRaw`), so number formatting never matters there.
 */
export function canonicalJson(value: unknown): string {
  return write(value, new Set());
}

export class CanonicalJsonError extends TypeError {
  override readonly name = 'CanonicalJsonError';
}

function write(value: unknown, ancestors: Set<object>): string {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return JSON.stringify(value);
    case 'number':
      if (!Number.isFinite(value)) throw new CanonicalJsonError(`cannot encode ${value}`);
      return JSON.stringify(value);
    case 'object':
      break;
    default:
      throw new CanonicalJsonError(`cannot encode a ${typeof value}`);
  }
  if (value === null) return 'null';
  if (ancestors.has(value)) throw new CanonicalJsonError('cannot encode a circular structure');
  ancestors.add(value);
  try {
    if (Array.isArray(value)) {
      return `[${value.map((item) => write(item, ancestors)).join(',')}]`;
    }
    if (value instanceof Date) return JSON.stringify(value.toISOString());
    const entries: string[] = [];
    for (const key of Object.keys(value).sort()) {
      const item = (value as Record<string, unknown>)[key];
      if (item === undefined) continue;
      entries.push(`${JSON.stringify(key)}:${write(item, ancestors)}`);
    }
    return `{${entries.join(',')}}`;
  } finally {
    ancestors.delete(value);
  }
}
