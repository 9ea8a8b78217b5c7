import Router from '@koa/router';
import { PACKAGE } from '../platform/package-info.js';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { AppContext } from '../context.js';
import { notFound } from '../platform/errors.js';
import { openApiDocument } from './document.js';
import type { Operation } from './operations.js';

/**
 * GET /openapi.json, the OpenAPI 3.1 document, and GET /docs, an API reference rendered from it by
 * Swagger UI. Swagger UI ships prebuilt in `swagger-ui-dist` and is served from there, so the page works
 * offline; the one line that starts it lives in our own script, so the page needs no inline script and
 * keeps a strict Content-Security-Policy.
 */

const swaggerDir = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
const START_SCRIPT = `window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#api', deepLinking: true, presets: [SwaggerUIBundle.presets.apis] });
});
`;
/** Reads a file once, on first use (the bundle is 1.5 MB: not per request, and not at start-up). */
const once = (read: () => Buffer) => { let body: Buffer | undefined; return () => (body ??= read()); };

/** The only files /docs/:asset serves (a Map, so no name reaches Object.prototype). */
const ASSETS = new Map<string, { body: () => string | Buffer; type: string }>([
  ['swagger-ui.css', { body: once(() => readFileSync(join(swaggerDir, 'swagger-ui.css'))), type: 'text/css; charset=utf-8' }],
  ['swagger-ui-bundle.js', { body: once(() => readFileSync(join(swaggerDir, 'swagger-ui-bundle.js'))), type: 'text/javascript; charset=utf-8' }],
  ['start.js', { body: () => START_SCRIPT, type: 'text/javascript; charset=utf-8' }],
]);
const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>agentgate API reference</title>
<link rel="stylesheet" href="/docs/swagger-ui.css">
</head>
<body>
<main id="api"></main>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/start.js"></script>
</body>
</html>
`;
const VERSION = PACKAGE.version;

/** `operations`: everything the app mounts, so the document describes exactly this app. */
export function openApiRoutes(app: AppContext, operations: readonly Operation[]): Router {
  const router = new Router();
  let document: string | undefined;

  router.get('/openapi.json', (ctx) => {
    document ??= JSON.stringify(openApiDocument({ baseUrl: app.config.BASE_URL, version: VERSION, operations }));
    ctx.set('Access-Control-Allow-Origin', '*');
    ctx.type = 'application/json';
    ctx.body = document;
  });

  router.get('/docs', (ctx) => {
    // Swagger UI styles itself with inline style attributes and fetches the document from this origin.
    ctx.set('Content-Security-Policy', "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = PAGE;
  });

  router.get('/docs/:asset', (ctx) => {
    const asset = ASSETS.get(ctx.params.asset ?? '');
    if (!asset) throw notFound('No such file');
    ctx.set('Cache-Control', 'public, max-age=3600');
    ctx.type = asset.type;
    ctx.body = asset.body();
  });

  return router;
}
