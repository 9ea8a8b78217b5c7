/**
 * A weather API on Koa with two paid routes (/weather, and /forecast priced per request). Run `npm run
 * dev` first (it sets up a seller on the local chain), then `npm run example:koa-seller` and pay it with
 * `npm run example:buyer -- <url>`. Any port works (`PORT=5055 npm run example:koa-seller`): once
 * listening, it registers its paid routes for http://localhost:<port> (or PUBLIC_ORIGIN) with the dev
 * seller's platform key (syncEndpoints).
 */
import Router from '@koa/router';
import Koa from 'koa';
import { paymentMiddleware, type PaymentMiddlewareOptions } from '../../adapters/koa.js';
import type { SettledPayment } from '../../middleware/index.js';
import { isMain, listenFailed, loadDevSeller, required, syncExampleEndpoints } from '../dev-seller.js';
import { forecastDays, forecastFor, multiDayForecast, CITIES, WEATHER_PRICE, WEATHER_ROUTES } from '../weather.js';

type SellerOptions = Omit<Extract<PaymentMiddlewareOptions, { backendUrl: string }>, 'routes'>;

export function createWeatherApp(options: SellerOptions): Koa {
  const app = new Koa();
  const router = new Router();
  router.get('/weather', (ctx) => {
    const payment = ctx.state.payment as SettledPayment;
    ctx.body = { ...forecastFor(String(ctx.query.city ?? 'Lisbon')), paidBy: payment.payer, paymentId: payment.paymentId };
  });
  // Priced per request by ?days= (see WEATHER_ROUTES): the buyer paid for exactly these days.
  router.get('/forecast', (ctx) => {
    ctx.body = { ...multiDayForecast(String(ctx.query.city ?? 'Lisbon'), forecastDays(new URLSearchParams(ctx.querystring))), paidBy: (ctx.state.payment as SettledPayment).payer };
  });
  router.get('/cities', (ctx) => {
    ctx.body = { cities: CITIES };
  });
  app.use(
    paymentMiddleware({
      ...options,
      routes: WEATHER_ROUTES,
    }),
  );
  app.use(router.routes());
  return app;
}

if (isMain(import.meta.url)) {
  const dev = loadDevSeller();
  const port = Number(process.env.PORT ?? 4022);
  const app = createWeatherApp({
    backendUrl: required(dev, 'backendUrl', 'AGENTGATE_URL'),
    apiKey: required(dev, 'sellerKey', 'AGENTGATE_SELLER_KEY'),
    publicOrigin: process.env.PUBLIC_ORIGIN,
    trustProxy: process.env.TRUST_PROXY === 'true',
  });
  app.listen(port, () => {
    console.log(`weather API (Koa) on http://localhost:${port}: GET /weather costs ${WEATHER_PRICE}, GET /forecast?days=N $0.01 a day, GET /cities is free`);
    // After listening: the backend fetches a new URL for its 402 before registering it.
    void syncExampleEndpoints(dev, WEATHER_ROUTES, port);
  }).on('error', (error) => listenFailed(port, error));
}
