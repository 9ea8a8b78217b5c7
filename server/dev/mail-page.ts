import Router from '@koa/router';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import type { RouteFactory } from '../app.js';
import type { Operation } from '../openapi/operations.js';
import { escapeHtml } from '../platform/html.js';
import { formBody } from '../platform/http-body.js';
import { AppError, notFound } from '../platform/errors.js';
import { parseInput } from '../platform/validate.js';
import type { MailCatcher } from './mail-catcher.js';

export const MAIL_PAGE = '/dev/mail';
const replyParams = z.object({ id: z.string().regex(/^[0-9a-f]{16}$/, 'must be a caught mail id') });
const replyForm = z.object({ as: z.email().max(320), text: z.string().min(1).max(100_000) }).strict();

/**
 * /dev/mail on `agentgate dev`: the mails agents sent to outside addresses (caught by the local mail
 * catcher), and a form to answer one as its outside recipient, back into the agent's inbox.
 */
export function mailPageRoutes(catcher: MailCatcher): RouteFactory {
  return (app: AppContext) => {
    const router = new Router({ prefix: MAIL_PAGE });
    router.use(formBody(app.config.MAX_BODY_BYTES));

    router.get('/', (ctx) => {
      ctx.set('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'");
      ctx.type = 'text/html; charset=utf-8';
      const rows = catcher.list().map((m) => `<article>
<h2>${escapeHtml(m.subject || '(no subject)')}</h2>
<p><b>From</b> ${escapeHtml(m.from)} <b>to</b> ${escapeHtml(m.to.join(', '))} <small>${escapeHtml(m.receivedAt)}</small></p>
<pre>${escapeHtml(m.text.slice(0, 4000))}</pre>
<form method="post" action="${MAIL_PAGE}/${m.id}/reply">
<label>Answer as <select name="as">${m.to.map((a) => `<option>${escapeHtml(a)}</option>`).join('')}</select></label>
<label>Text <textarea name="text" rows="3" cols="60" required></textarea></label>
<button>Send reply</button></form></article>`).join('\n');
      ctx.body = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Dev mail catcher</title>
<style>body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem}article{border-bottom:1px solid #ddd;padding:.5rem 0}pre{white-space:pre-wrap;background:#f4f5f7;padding:.5rem}label{display:block;margin:.25rem 0}</style></head>
<body><main><h1>Mail sent to the outside world</h1>
<p>Mail an agent sends to any address outside <code>${escapeHtml(app.config.MAIL_DOMAIN)}</code> lands here (SMTP on 127.0.0.1:${catcher.port}). Answer as the recipient: the reply goes to the agent's inbox, in the same thread.</p>
${rows || '<p>No mail yet.</p>'}</main></body></html>`;
    });

    router.post('/:id/reply', async (ctx) => {
      // A page of this server only: a cross-site form must not put mail into an agent's inbox.
      const origin = ctx.get('origin');
      if (origin && origin !== new URL(app.config.BASE_URL).origin && origin !== `${ctx.protocol}://${ctx.host}`) {
        throw new AppError(403, 'cross_origin', 'Replies are sent from this page only');
      }
      const { id } = parseInput(replyParams, ctx.params, 'params');
      const mail = catcher.get(id);
      if (!mail) throw notFound('No such caught mail');
      const form = parseInput(replyForm, ctx.request.body, 'body');
      if (!mail.to.includes(form.as)) throw new AppError(400, 'validation_error', 'body.as: must be one of the mail\'s recipients');
      await catcher.reply(mail, form, app.mail.delivery.inboundListener());
      ctx.redirect(MAIL_PAGE);
    });
    return router;
  };
}

export const mailPageOperations: Operation[] = [
  { method: 'get', path: MAIL_PAGE, tag: 'Docs', summary: 'agentgate dev only: mail agents sent to outside addresses', auth: 'none', ok: { status: 200, description: 'An HTML page', type: 'text/html' } },
  {
    method: 'post', path: `${MAIL_PAGE}/:id/reply`, tag: 'Docs', summary: 'agentgate dev only: answer a caught mail as its recipient (an HTML form post)', auth: 'none', html: true,
    params: replyParams, ok: { status: 302, description: 'Back to the page' },
  },
];
