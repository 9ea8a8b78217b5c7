import type Router from '@koa/router';
import type { Context } from 'koa';
import type { Config } from '../platform/config.js';
import type { PaymentService } from '../payments/payment-service.js';
import { AppError } from '../platform/errors.js';
import { parseInput } from '../platform/validate.js';
import { endpointBody, endpointPatch } from '../payments/routes.js';
import { sessionOf, type ConsoleGuards } from './access.js';
import { endpointCreateForm, endpointEditForm, idParam } from './schemas.js';
import { endpointDeletePage, endpointEditPage, endpointsPage, secretOncePage, type EndpointFormValues } from './views/endpoints.js';
import { sendHtml, seeOther } from './render.js';

/** A refusal the person can fix in the form (validation, URL check, duplicate): shown above the form. */
const fixable = (err: unknown): err is AppError => err instanceof AppError && err.status >= 400 && err.status < 500 && err.status !== 404;

/** The endpoints and their registration (the pages run the same registration code as the API). */
export interface EndpointPageDeps {
  config: Pick<Config, 'mode'>;
  payments: Pick<PaymentService, 'endpoints' | 'registration'>;
}

/**
 * Endpoints: list for everyone signed in; register and edit for the platform key, through the same
 * schemas and registration code as POST/PATCH /v0/payments/endpoints.
 */
export function endpointPages(router: Router, deps: EndpointPageDeps, guards: ConsoleGuards): void {
  const orgOf = (ctx: Context) => sessionOf(ctx).orgId;
  const devMode = deps.config.mode === 'dev';

  router.get('/endpoints', guards.session, async (ctx) => {
    const notice = ctx.query.deleted === '1' ? 'Endpoint deleted.' : undefined;
    sendHtml(ctx, endpointsPage({ session: sessionOf(ctx), endpoints: await deps.payments.endpoints.list(orgOf(ctx)), devMode, notice }));
  });

  router.post('/endpoints', guards.sameOrigin, guards.session, guards.csrf, guards.admin, async (ctx) => {
    const raw = ctx.request.body as Record<string, string>;
    const shown: EndpointFormValues = { url: raw.url, priceUsdc: raw.priceUsdc, description: raw.description, webhookUrl: raw.webhookUrl, discoverable: raw.discoverable === 'on', skipUrlCheck: raw.skipUrlCheck === 'on' };
    try {
      const body = parseInput(endpointBody, parseInput(endpointCreateForm, raw, 'body'), 'body');
      if (body.skipUrlCheck && !devMode) throw new AppError(400, 'validation_error', 'body.skipUrlCheck: only allowed in dev mode');
      const { endpoint, webhookSecret } = await deps.payments.registration.register(orgOf(ctx), body);
      if (!webhookSecret) return seeOther(ctx, '/console/endpoints');
      sendHtml(ctx, secretOncePage({ session: sessionOf(ctx), title: `Registered ${endpoint.url}`, label: 'Webhook signing secret', secret: webhookSecret, back: '/console/endpoints', backLabel: 'Back to endpoints' }), 201);
    } catch (err) {
      if (!fixable(err)) throw err;
      sendHtml(ctx, endpointsPage({ session: sessionOf(ctx), endpoints: await deps.payments.endpoints.list(orgOf(ctx)), devMode, form: shown, error: err.message }), err.status);
    }
  });

  router.get('/endpoints/:id/edit', guards.session, guards.admin, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    sendHtml(ctx, endpointEditPage({ session: sessionOf(ctx), endpoint: await deps.payments.endpoints.get(orgOf(ctx), id) }));
  });

  router.post('/endpoints/:id', guards.sameOrigin, guards.session, guards.csrf, guards.admin, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    const current = await deps.payments.endpoints.get(orgOf(ctx), id);
    const raw = ctx.request.body as Record<string, string>;
    try {
      const change = parseInput(endpointPatch, parseInput(endpointEditForm, raw, 'body'), 'body');
      const { endpoint, webhookSecret } = await deps.payments.registration.update(orgOf(ctx), id, change);
      if (!webhookSecret) return seeOther(ctx, '/console/endpoints');
      sendHtml(ctx, secretOncePage({ session: sessionOf(ctx), title: `New webhook for ${endpoint.url}`, label: 'Webhook signing secret', secret: webhookSecret, back: '/console/endpoints', backLabel: 'Back to endpoints' }));
    } catch (err) {
      if (!fixable(err)) throw err;
      const shown: EndpointFormValues = { priceUsdc: raw.priceUsdc, description: raw.description, webhookUrl: raw.webhookUrl, discoverable: raw.discoverable === 'on' };
      sendHtml(ctx, endpointEditPage({ session: sessionOf(ctx), endpoint: current, form: shown, error: err.message }), err.status);
    }
  });

  router.get('/endpoints/:id/delete', guards.session, guards.admin, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    sendHtml(ctx, endpointDeletePage({ session: sessionOf(ctx), endpoint: await deps.payments.endpoints.get(orgOf(ctx), id) }));
  });

  // The same operation as DELETE /v0/payments/endpoints/{id}; the confirmation page above comes first.
  router.post('/endpoints/:id/delete', guards.sameOrigin, guards.session, guards.csrf, guards.admin, async (ctx) => {
    const { id } = parseInput(idParam, ctx.params, 'params');
    await deps.payments.endpoints.delete(orgOf(ctx), id);
    seeOther(ctx, '/console/endpoints?deleted=1');
  });
}
