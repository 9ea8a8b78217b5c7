import Router from '@koa/router';
import type { AppContext } from '../context.js';
import { escapeHtml } from '../platform/html.js';
import type { Operation } from '../openapi/operations.js';
import { DEV_ACCOUNTS } from './chain/dev-accounts.js';

/**
 * GET / on `agentgate dev`: what runs and where, the links a newcomer needs (console, API reference,
 * chat workspace, probes) and the dev accounts. Production answers / with 404 as before.
 */
export function landingPageRoutes(app: AppContext): Router {
  const router = new Router();
  router.get('/', (ctx) => {
    const base = app.config.BASE_URL;
    const chatOrigin = app.config.CHAT_API_URL.replace(/\/api\/?$/, '');
    const link = (href: string, text: string, note: string) => `<li><a href="${escapeHtml(href)}">${escapeHtml(text)}</a> ${escapeHtml(note)}</li>`;
    ctx.set('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>agentgate dev</title>
<style>body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#1b2230;line-height:1.5}
code{font-family:ui-monospace,monospace;font-size:.9em;background:#eef0f4;padding:.1rem .3rem;border-radius:4px}
table{border-collapse:collapse}td,th{padding:.25rem .75rem;border-bottom:1px solid #dfe3e8;text-align:left}a{color:#2f44c2}</style></head>
<body><main>
<h1>agentgate dev</h1>
<p>The backend runs on <code>${escapeHtml(base)}</code> with a local database, a local chain (chain id ${app.chain?.chainId ?? '-'}, USDC <code>${escapeHtml(app.chain?.usdc.address ?? '-')}</code>), SMTP on loopback and a local chat workspace.</p>
<h2>Links</h2>
<ul>
${link('/console', 'Ops console', '— payments, receipts, webhooks, endpoints, seller keys (sign in with a platform key)')}
${link('/docs', 'API reference', '— rendered from /openapi.json')}
${link('/openapi.json', 'OpenAPI document', '')}
${link(chatOrigin, 'Chat workspace', '— invite the bot, post as a person')}
${link('/dev/mail', 'Mail catcher', '— mail agents sent to outside addresses; answer it as the recipient')}
${link('/health', '/health', '— liveness')} ${link('/ready', '/ready', '— database, chain, SMTP and relayer')}
<li>${metricsNote(app)}</li>
</ul>
<h2>Start</h2>
<p>Sign up an agent: <code>curl -s -X POST ${escapeHtml(base)}/v0/agent-signup -H 'content-type: application/json' -d '{}'</code></p>
<p>The dev seller's keys and example endpoints are in <code>.agentgate/dev-seller.json</code>.</p>
<h2>Dev accounts</h2>
<p>Anvil's well-known test accounts (public keys, local chains only); 1 to 9 are funded buyers; 0 is the relayer, whose test USDC funds auth-capture refunds.</p>
<table><thead><tr><th>#</th><th>address</th></tr></thead><tbody>
${DEV_ACCOUNTS.map((a) => `<tr><td>${a.index}</td><td><code>${a.address}</code></td></tr>`).join('\n')}
</tbody></table>
</main></body></html>
`;
  });
  return router;
}

/** /metrics is off unless configured (a 404 otherwise): say how to turn it on rather than link a 404. */
function metricsNote(app: AppContext): string {
  const { METRICS_TOKEN, METRICS_PORT, METRICS_HOST } = app.config;
  if (METRICS_TOKEN) return '<code>/metrics</code> (Prometheus) with <code>Authorization: Bearer $METRICS_TOKEN</code>';
  if (METRICS_PORT !== undefined) return `<code>/metrics</code> (Prometheus) on its own listener, <code>http://${escapeHtml(METRICS_HOST)}:${METRICS_PORT}/metrics</code>`;
  return '<code>/metrics</code> (Prometheus) is off: start with <code>METRICS_TOKEN=&lt;16 or more characters&gt;</code> (then <code>Authorization: Bearer</code> it) or <code>METRICS_PORT</code>';
}

export const landingPageOperation: Operation = {
  method: 'get', path: '/', tag: 'Docs', summary: 'agentgate dev only: what runs, the links, the dev accounts', auth: 'none',
  ok: { status: 200, description: 'An HTML page', type: 'text/html' },
};
