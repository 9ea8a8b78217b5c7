import { html, rawHtml, type SafeHtml } from '../html.js';

/** A refused filter field's message, by field name ("to", "q", ...): shown under the field, not as an error page. */
export type FieldErrors = Record<string, string>;

export const fieldError = (errors: FieldErrors, name: string) =>
  (errors[name] ? html`<p class="field-error" id="err-${name}">${errors[name]}</p>` : '');

export const invalid = (errors: FieldErrors, name: string) =>
  (errors[name] ? html` aria-invalid="true" aria-describedby="err-${name}"` : '');

export const selected = (value: string | undefined, option: string) => (value === option ? html` selected` : '');

/**
 * A UTC day typed as YYYY-MM-DD, the form the tables print (a native date input shows the browser's
 * locale, e.g. 11/24/2026). console.js adds a calendar button that fills it from the native picker.
 */
export function dayInput(input: { id: string; name: string; label: string; value?: string; errors: FieldErrors }): SafeHtml {
  return html`<div class="field"><label for="${input.id}">${input.label}</label>
    <input id="${input.id}" name="${input.name}" value="${input.value ?? ''}" placeholder="YYYY-MM-DD" maxlength="10" autocomplete="off" spellcheck="false" data-date-picker${rawHtml(' pattern="[0-9]{4}-[0-9]{2}-[0-9]{2}"')}${invalid(input.errors, input.name)}>
    ${fieldError(input.errors, input.name)}</div>`;
}

/** The Endpoint filter: any, or one of the org's endpoints by URL. */
export function endpointSelect(input: { id: string; value?: string; endpoints: Array<{ _id: string; url: string }>; errors: FieldErrors }): SafeHtml {
  return html`<div class="field"><label for="${input.id}">Endpoint</label>
        <select id="${input.id}" name="endpoint"${invalid(input.errors, 'endpoint')}>
          <option value="">Any</option>
          ${input.endpoints.map((e) => html`<option value="${e._id}"${selected(input.value, e._id)}>${e.url}</option>`)}
        </select>${fieldError(input.errors, 'endpoint')}</div>`;
}

/** Zod's issues by field: the first message of each. */
export function errorsByField(issues: Array<{ path: PropertyKey[]; message: string }>): FieldErrors {
  const errors: FieldErrors = {};
  for (const issue of issues) {
    const name = String(issue.path[0] ?? 'form');
    errors[name] ??= issue.message;
  }
  return errors;
}

const LABELS: Record<string, string> = { q: 'Search', status: 'Status', state: 'State', endpoint: 'Endpoint', payer: 'Payer address', payment: 'Payment id', from: 'From', to: 'To', page: 'Page' };

/** The summary above a refused filter form: each field by its label, with its message. */
export function filterAlert(errors: FieldErrors): SafeHtml | '' {
  const entries = Object.entries(errors);
  if (entries.length === 0) return '';
  return html`<p class="alert field wide" role="alert" id="filter-error">Fix the filter: ${entries.map(([name, message], i) => html`${i ? '; ' : ''}<strong>${LABELS[name] ?? name}</strong> ${message}`)}.</p>`;
}
