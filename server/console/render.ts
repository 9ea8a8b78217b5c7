import type { Context } from 'koa';
import type { SafeHtml } from './html.js';

export function sendHtml(ctx: Context, body: SafeHtml, status = 200): void {
  ctx.status = status;
  ctx.type = 'text/html; charset=utf-8';
  ctx.body = body.text;
}

/** After a successful form post: 303, so reloading the next page does not post again. */
export function seeOther(ctx: Context, location: string): void {
  ctx.status = 303;
  ctx.redirect(location);
}
