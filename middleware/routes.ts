import { lenientReadings } from './canonical-path.js';

/**
 * Route patterns, compiled once: "GET /weather", "/api/*", "POST /items/:id", "/files/*rest".
 * - The verb is optional (no verb: every method). "GET" also covers HEAD, because Express and
 *   @koa/router both answer HEAD with the GET handler.
 * - ":name" matches one non-empty segment part ([^/]+); "*" or "*name" matches anything, slashes
 *   included. A trailing "/*" also matches the bare prefix ("/api/*" protects "/api").
 * - Matching is on the lower-cased canonical path (canonical-path.ts), trailing slash ignored.
 * - The most specific pattern wins: an exact literal path beats any pattern with parameters; then more
 *   literal characters win; then a pattern with a verb beats one without.
 */

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

export class InvalidRoutePatternError extends Error {
  override readonly name = 'InvalidRoutePatternError';
  constructor(
    readonly pattern: string,
    reason: string,
  ) {
    super(`invalid route pattern ${JSON.stringify(pattern)}: ${reason}`);
  }
}

export interface CompiledRoute<T> {
  readonly pattern: string;
  /** Upper-case verb, or undefined for any method. */
  readonly method: string | undefined;
  /** The pattern's path, normalized (collapsed slashes, no trailing slash), case as written. */
  readonly path: string;
  /** True when the path has no parameters or wildcards, i.e. it names exactly one resource. */
  readonly literal: boolean;
  readonly value: T;
  /** For ordering: literal characters in the path. */
  readonly literalLength: number;
  readonly regex: RegExp | undefined;
}

export type RouteMatch<T> =
  | { readonly kind: 'match'; readonly route: CompiledRoute<T> }
  | { readonly kind: 'none' }
  /** Unprotected as written, protected under a reading another server might apply: refuse it. */
  | { readonly kind: 'ambiguous' };

export class RouteTable<T> {
  private readonly literals = new Map<string, CompiledRoute<T>[]>();
  private readonly dynamic: CompiledRoute<T>[] = [];

  constructor(routes: Iterable<readonly [pattern: string, value: T]>) {
    const seen = new Set<string>();
    for (const [pattern, value] of routes) {
      const route = compileRoute(pattern, value);
      const identity = `${route.method ?? '*'} ${route.path.toLowerCase()}`;
      if (seen.has(identity)) throw new InvalidRoutePatternError(pattern, 'duplicates another pattern');
      seen.add(identity);
      if (route.literal) {
        const key = route.path.toLowerCase();
        const list = this.literals.get(key) ?? [];
        list.push(route);
        list.sort(byVerbFirst);
        this.literals.set(key, list);
      } else {
        this.dynamic.push(route);
      }
    }
    this.dynamic.sort((a, b) => b.literalLength - a.literalLength || byVerbFirst(a, b));
  }

  /** `key` is the lower-cased canonical path; `method` is upper-case. */
  match(method: string, key: string): RouteMatch<T> {
    const found = this.find(method, key);
    if (found) return { kind: 'match', route: found };
    for (const reading of lenientReadings(key)) {
      if (this.find(method, reading)) return { kind: 'ambiguous' };
    }
    return { kind: 'none' };
  }

  private find(method: string, key: string): CompiledRoute<T> | undefined {
    const literals = this.literals.get(key);
    if (literals) {
      for (const route of literals) if (methodMatches(route.method, method)) return route;
    }
    for (const route of this.dynamic) {
      if (methodMatches(route.method, method) && route.regex!.test(key)) return route;
    }
    return undefined;
  }
}

function methodMatches(routeMethod: string | undefined, method: string): boolean {
  return routeMethod === undefined || routeMethod === method || (routeMethod === 'GET' && method === 'HEAD');
}

function byVerbFirst(a: CompiledRoute<unknown>, b: CompiledRoute<unknown>): number {
  return (a.method === undefined ? 1 : 0) - (b.method === undefined ? 1 : 0);
}

const PARAM = /^:[A-Za-z_$][A-Za-z0-9_$]*/;
const WILDCARD = /^\*(?:[A-Za-z_$][A-Za-z0-9_$]*)?/;
const UNSUPPORTED = /[{}()[\]?+!\\]/;

export function compileRoute<T>(pattern: string, value: T): CompiledRoute<T> {
  const parts = pattern.trim().split(/\s+/);
  if (parts.length > 2) throw new InvalidRoutePatternError(pattern, 'expected "[METHOD] /path"');
  const [verb, rawPath] = parts.length === 2 ? [parts[0]!.toUpperCase(), parts[1]!] : [undefined, parts[0]!];
  if (verb !== undefined && !METHODS.has(verb)) throw new InvalidRoutePatternError(pattern, `unknown method ${verb}`);
  if (!rawPath.startsWith('/')) throw new InvalidRoutePatternError(pattern, 'path must start with "/"');
  if (UNSUPPORTED.test(rawPath)) {
    throw new InvalidRoutePatternError(pattern, 'only literal segments, ":param" and "*" are supported');
  }
  if (/%|[^\x21-\x7e]/.test(rawPath)) {
    throw new InvalidRoutePatternError(pattern, 'write the path decoded and in printable ASCII');
  }
  const segments = rawPath.split('/').filter((s) => s !== '');
  if (segments.some((s) => s === '.' || s === '..')) throw new InvalidRoutePatternError(pattern, 'dot segment');
  const path = '/' + segments.join('/');

  let regexSource = '';
  let literalLength = 0;
  let literal = true;
  segments.forEach((segment, index) => {
    const isLast = index === segments.length - 1;
    if (isLast && WILDCARD.exec(segment)?.[0] === segment) {
      // Trailing "/*": the bare prefix and everything below it.
      regexSource += '(?:/.*)?';
      literal = false;
      return;
    }
    regexSource += '/';
    literalLength += 1;
    let rest = segment;
    while (rest.length > 0) {
      const param = PARAM.exec(rest);
      const wildcard = param ? null : WILDCARD.exec(rest);
      if (param) {
        regexSource += '[^/]+';
        rest = rest.slice(param[0].length);
        literal = false;
      } else if (wildcard) {
        regexSource += '.*';
        rest = rest.slice(wildcard[0].length);
        literal = false;
      } else {
        const next = rest.search(/[:*]/);
        const text = next === -1 ? rest : next === 0 ? rest[0]! : rest.slice(0, next);
        regexSource += escapeRegex(text.toLowerCase());
        literalLength += text.length;
        rest = rest.slice(text.length);
      }
    }
  });

  return {
    pattern,
    method: verb,
    path,
    literal,
    value,
    literalLength,
    regex: literal ? undefined : new RegExp(`^${regexSource}$`, 's'),
  };
}

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}
