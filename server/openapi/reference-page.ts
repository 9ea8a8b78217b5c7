import { escapeHtml } from '../platform/html.js';

/**
 * The API reference at /docs: the OpenAPI document rendered on the server into one plain HTML page (a
 * table of contents by tag, then every operation with its keys and scopes, parameters, request body and
 * responses, schemas as nested lists). It replaced Swagger UI, whose `swagger-ui-dist` package pulls in
 * `@scarf/scarf`, an install-time telemetry script that runs for everyone who installs the backend (our
 * own `scarfSettings` only applies to installs of this repository). The page needs no script, no
 * third-party file and no dependency; /openapi.json stays the machine-readable document.
 */

type Json = Record<string, unknown>;

const MAX_DEPTH = 8;
const METHOD_ORDER = ['get', 'post', 'put', 'patch', 'delete'];

/** Text with the document's `code` spans kept as <code> (descriptions use Markdown backticks). */
function prose(text: unknown): string {
  if (typeof text !== 'string' || text === '') return '';
  return escapeHtml(text).replace(/`([^`]+)`/g, '<code>$1</code>');
}

const anchorOf = (method: string, path: string) => `${method}-${path}`.replace(/[^A-Za-z0-9]+/g, '-').replace(/^-|-$/g, '');

/** A one-line name for a schema's type: `string`, `array of object`, `"a" | "b"`, `#Error`. */
function typeName(schema: Json): string {
  if (typeof schema.$ref === 'string') return schema.$ref.replace(/^#\/(components\/schemas|\$defs)\//, '');
  if ('const' in schema) return JSON.stringify(schema.const);
  if (Array.isArray(schema.enum)) return schema.enum.map((v) => JSON.stringify(v)).join(' | ');
  const variants = (schema.anyOf ?? schema.oneOf) as Json[] | undefined;
  if (Array.isArray(variants)) return variants.map(typeName).join(' | ');
  const type = Array.isArray(schema.type) ? schema.type.join(' | ') : typeof schema.type === 'string' ? schema.type : 'any';
  if (type === 'array' && schema.items && typeof schema.items === 'object') return `array of ${typeName(schema.items as Json)}`;
  return typeof schema.format === 'string' ? `${type} (${schema.format})` : type;
}

/** Limits a reader needs: lengths, ranges, patterns, defaults. */
function constraints(schema: Json): string {
  const parts: string[] = [];
  const add = (label: string, key: string) => { if (schema[key] !== undefined) parts.push(`${label} ${JSON.stringify(schema[key])}`); };
  add('min length', 'minLength'); add('max length', 'maxLength'); add('minimum', 'minimum'); add('maximum', 'maximum');
  add('at least', 'minItems'); add('at most', 'maxItems'); add('pattern', 'pattern'); add('default', 'default');
  return parts.length ? ` <span class="limits">${escapeHtml(parts.join(', '))}</span>` : '';
}

/** The fields of an object schema (and of the objects inside it), as nested lists. */
function fields(schema: Json, depth: number): string {
  if (depth > MAX_DEPTH) return '';
  const variants = (schema.anyOf ?? schema.oneOf) as Json[] | undefined;
  if (Array.isArray(variants) && variants.some((v) => v.properties)) {
    return `<ul class="fields">${variants.map((v, i) => `<li><span class="variant">variant ${i + 1}: ${escapeHtml(typeName(v))}</span>${fields(v, depth + 1)}</li>`).join('')}</ul>`;
  }
  if (schema.type === 'array' && schema.items && typeof schema.items === 'object') return fields(schema.items as Json, depth + 1);
  const properties = schema.properties as Record<string, Json> | undefined;
  if (!properties || Object.keys(properties).length === 0) return '';
  const required = new Set((schema.required as string[] | undefined) ?? []);
  const rows = Object.entries(properties).map(([name, property]) => `<li><code>${escapeHtml(name)}</code> <span class="type">${escapeHtml(typeName(property))}</span>${required.has(name) ? ' <span class="required">required</span>' : ''}${constraints(property)}${property.description ? ` — ${prose(property.description)}` : ''}${fields(property, depth + 1)}</li>`);
  return `<ul class="fields">${rows.join('')}</ul>`;
}

function schemaBlock(schema: Json | undefined): string {
  if (!schema) return '';
  return `<p><span class="type">${escapeHtml(typeName(schema))}</span>${schema.description ? ` — ${prose(schema.description)}` : ''}</p>${fields(schema, 0)}`;
}

function contentBlock(content: Record<string, { schema?: Json }> | undefined): string {
  if (!content) return '';
  return Object.entries(content).map(([type, media]) => `<div class="media"><span class="media-type">${escapeHtml(type)}</span>${schemaBlock(media.schema)}</div>`).join('');
}

function parametersBlock(parameters: Json[] | undefined): string {
  if (!parameters?.length) return '';
  const rows = parameters.map((p) => {
    const schema = (p.schema ?? {}) as Json;
    return `<tr><td><code>${escapeHtml(String(p.name))}</code></td><td>${escapeHtml(String(p.in))}</td><td><span class="type">${escapeHtml(typeName(schema))}</span>${constraints(schema)}</td><td>${p.required ? 'required' : ''}</td><td>${prose(p.description ?? schema.description)}</td></tr>`;
  });
  return `<h4>Parameters</h4><table><thead><tr><th>name</th><th>in</th><th>type</th><th></th><th></th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

function operationBlock(method: string, path: string, op: Json): string {
  const scopes = op['x-required-scopes'] as string[] | undefined;
  const body = op.requestBody as { required?: boolean; content?: Record<string, { schema?: Json }> } | undefined;
  const responses = Object.entries((op.responses ?? {}) as Record<string, { description?: string; content?: Record<string, { schema?: Json }> }>);
  return `<section class="operation" id="${anchorOf(method, path)}">
<h3><span class="method method-${method}">${method.toUpperCase()}</span> <code>${escapeHtml(path)}</code></h3>
<p class="summary">${prose(op.summary)}</p>
<p>${prose(op.description)}${scopes ? ` Scope: ${scopes.map((s) => `<code>${escapeHtml(s)}</code>`).join(', ')}.` : ''}</p>
${parametersBlock(op.parameters as Json[] | undefined)}
${body ? `<h4>Request body${body.required ? '' : ' (optional)'}</h4>${contentBlock(body.content)}` : ''}
<h4>Responses</h4>
<dl class="responses">${responses.map(([status, response]) => `<dt>${escapeHtml(status)}</dt><dd>${prose(response.description)}${/^2/.test(status) ? contentBlock(response.content) : ''}</dd>`).join('')}</dl>
</section>`;
}

/** Served as /docs/reference.css, so the page's Content-Security-Policy needs no inline style. */
export const REFERENCE_CSS = `body{font:15px/1.5 system-ui,sans-serif;margin:0;color:#1b1f24;background:#fff}
header,main,nav{max-width:1000px;margin:0 auto;padding:0 20px}header{padding-top:24px}
code{font:13px ui-monospace,monospace;background:#f2f4f7;padding:1px 4px;border-radius:3px;overflow-wrap:anywhere}
nav ul{columns:2 260px;padding-left:18px}nav li{break-inside:avoid}
.operation{border-top:1px solid #d8dee4;padding:8px 0 16px}.operation h3{margin:12px 0 4px;overflow-wrap:anywhere}
.method{display:inline-block;min-width:58px;text-align:center;font:600 12px ui-monospace,monospace;color:#fff;border-radius:3px;padding:2px 6px;background:#57606a}
.method-get{background:#0969da}.method-post{background:#1a7f37}.method-put,.method-patch{background:#9a6700}.method-delete{background:#cf222e}
.summary{font-weight:600;margin:4px 0}.type{color:#8250df;font:13px ui-monospace,monospace}.required{color:#cf222e;font-size:12px}.limits{color:#57606a;font-size:12px}
.media-type{font:12px ui-monospace,monospace;color:#57606a}.fields{margin:4px 0;padding-left:20px}
table{border-collapse:collapse;font-size:14px;width:100%;display:block;overflow-x:auto}td,th{border-bottom:1px solid #eaeef2;padding:4px 8px;text-align:left;vertical-align:top}
dl.responses{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px}dt{font:600 13px ui-monospace,monospace}dd{margin:0}`;

/** The whole page for `document` (the object /openapi.json serves). */
export function renderReferencePage(document: Json): string {
  const info = (document.info ?? {}) as Json;
  const paths = (document.paths ?? {}) as Record<string, Record<string, Json>>;
  const schemes = ((document.components as Json | undefined)?.securitySchemes ?? {}) as Record<string, { description?: string }>;
  const operations = Object.entries(paths).flatMap(([path, methods]) => Object.entries(methods)
    .sort(([a], [b]) => METHOD_ORDER.indexOf(a) - METHOD_ORDER.indexOf(b))
    .map(([method, op]) => ({ method, path, op, tag: ((op.tags as string[] | undefined) ?? ['other'])[0]! })));
  const tags = [...new Set(operations.map((o) => o.tag))];
  const toc = tags.map((tag) => `<h2>${escapeHtml(tag)}</h2><ul>${operations.filter((o) => o.tag === tag).map((o) => `<li><a href="#${anchorOf(o.method, o.path)}"><span class="method method-${o.method}">${o.method.toUpperCase()}</span> <code>${escapeHtml(o.path)}</code></a> ${prose(o.op.summary)}</li>`).join('')}</ul>`).join('');
  const sections = tags.map((tag) => `<h2 id="tag-${anchorOf('', tag)}">${escapeHtml(tag)}</h2>${operations.filter((o) => o.tag === tag).map((o) => operationBlock(o.method, o.path, o.op)).join('\n')}`).join('\n');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(String(info.title ?? 'API'))} reference</title>
<link rel="stylesheet" href="/docs/reference.css">
</head>
<body>
<header>
<h1>${escapeHtml(String(info.title ?? 'API'))} <small>${escapeHtml(String(info.version ?? ''))}</small></h1>
<p>${prose(info.description)}</p>
<p>The machine-readable document: <a href="/openapi.json">/openapi.json</a> (OpenAPI ${escapeHtml(String(document.openapi ?? ''))}). Keys go in <code>Authorization: Bearer …</code>:</p>
<ul>${Object.entries(schemes).map(([name, scheme]) => `<li><code>${escapeHtml(name)}</code>: ${prose(scheme.description)}</li>`).join('')}</ul>
</header>
<nav aria-label="Operations">${toc}</nav>
<main>
${sections}
</main>
</body>
</html>
`;
}
