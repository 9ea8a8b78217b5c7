import { escapeHtml } from '../platform/html.js';

/** Markup that is already safe: only `html` and `rawHtml` make one, so a plain string is always escaped. */
export class SafeHtml {
  constructor(readonly text: string) {}
  toString() { return this.text; }
}

type Value = SafeHtml | string | number | boolean | null | undefined | Value[];

function render(value: Value): string {
  if (value === null || value === undefined || value === false) return '';
  if (Array.isArray(value)) return value.map(render).join('');
  if (value instanceof SafeHtml) return value.text;
  return escapeHtml(String(value));
}

/**
 * Templates for console pages: every interpolated value is escaped unless it is itself `html`, so data
 * from payments, endpoints and logs (chosen by sellers and buyers) can never become markup.
 */
export function html(strings: TemplateStringsArray, ...values: Value[]): SafeHtml {
  let out = strings[0]!;
  values.forEach((value, i) => { out += render(value) + strings[i + 1]!; });
  return new SafeHtml(out);
}

/** For markup built here from constants only (never from input). */
export const rawHtml = (text: string) => new SafeHtml(text);
