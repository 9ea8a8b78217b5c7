import Router from '@koa/router';
import { PACKAGE } from '../platform/package-info.js';
import type { Config } from '../platform/config.js';
import { notFound } from '../platform/errors.js';
import { openApiDocument } from './document.js';
import { REFERENCE_CSS, renderReferencePage } from './reference-page.js';
import type { Operation } from './operations.js';

/**
 * GET /openapi.json, the OpenAPI 3.1 document, and GET /docs, an API reference rendered from it on the
 * server (reference-page.ts): plain HTML and one stylesheet, no script, nothing from elsewhere, so it
 * works offline under a strict Content-Security-Policy and installs no third-party code.
 */

/** The only files /docs/:asset serves (a Map, so no name reaches Object.prototype). */
const ASSETS = new Map<string, { body: string; type: string }>([
  ['reference.css', { body: REFERENCE_CSS, type: 'text/css; charset=utf-8' }],
]);
const VERSION = PACKAGE.version;

/** `operations`: everything the app mounts, so the document describes exactly this app. */
export function openApiRoutes({ config }: { config: Pick<Config, 'BASE_URL'> }, operations: readonly Operation[]): Router {
  const router = new Router();
  let built: Record<string, unknown> | undefined;
  let document: string | undefined;
  let page: string | undefined;
  const documentObject = () => (built ??= openApiDocument({ baseUrl: config.BASE_URL, version: VERSION, operations }));

  router.get('/openapi.json', (ctx) => {
    document ??= JSON.stringify(documentObject());
    ctx.set('Access-Control-Allow-Origin', '*');
    ctx.type = 'application/json';
    ctx.body = document;
  });

  router.get('/docs', (ctx) => {
    // No script at all, and only our own stylesheet.
    ctx.set('Content-Security-Policy', "default-src 'none'; style-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = (page ??= renderReferencePage(documentObject()));
  });

  router.get('/docs/:asset', (ctx) => {
    const asset = ASSETS.get(ctx.params.asset ?? '');
    if (!asset) throw notFound('No such file');
    ctx.set('Cache-Control', 'public, max-age=3600');
    ctx.type = asset.type;
    ctx.body = asset.body;
  });

  return router;
}
