/**
 * A weather API on Hono (served on Node by @hono/node-server) with two paid routes (/weather, and
 * /forecast priced per request). Run `npm run dev` first (it sets up a seller on the local chain), then
 * `npm run example:hono-seller` and pay it with `npm run example:buyer -- http://localhost:4023/weather`.
 * Any port works (`PORT=5055 npm run example:hono-seller`): once listening, it registers its paid routes
 * for http://localhost:<port> (or PUBLIC_ORIGIN) with the dev seller's platform key (syncEndpoints).
 */
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { paymentMiddleware, type PaymentEnv, type PaymentMiddlewareOptions } from '../../adapters/hono.js';
import { isMain, listenFailed, loadDevSeller, required, syncExampleEndpoints } from '../dev-seller.js';
import { forecastDays, forecastFor, multiDayForecast, CITIES, WEATHER_PRICE, WEATHER_ROUTES } from '../weather.js';

type SellerOptions = Omit<Extract<PaymentMiddlewareOptions, { backendUrl: string }>, 'routes'>;

export function createWeatherApp(options: SellerOptions): Hono<PaymentEnv> {
  const app = new Hono<PaymentEnv>();
  app.use(
    paymentMiddleware({
      ...options,
      routes: WEATHER_ROUTES,
    }),
  );
  app.get('/weather', (c) => {
    const payment = c.get('payment');
    return c.json({ ...forecastFor(c.req.query('city') ?? 'Lisbon'), paidBy: payment.payer, paymentId: payment.paymentId });
  });
  // Priced per request by ?days= (see WEATHER_ROUTES): the buyer paid for exactly these days.
  app.get('/forecast', (c) => {
    const days = forecastDays(new URL(c.req.url).searchParams);
    return c.json({ ...multiDayForecast(c.req.query('city') ?? 'Lisbon', days), paidBy: c.get('payment').payer });
  });
  app.get('/cities', (c) => c.json({ cities: CITIES }));
  return app;
}

if (isMain(import.meta.url)) {
  const dev = loadDevSeller();
  const port = Number(process.env.PORT ?? 4023);
  const app = createWeatherApp({
    backendUrl: required(dev, 'backendUrl', 'AGENTGATE_URL'),
    apiKey: required(dev, 'sellerKey', 'AGENTGATE_SELLER_KEY'),
    publicOrigin: process.env.PUBLIC_ORIGIN,
    trustProxy: process.env.TRUST_PROXY === 'true',
  });
  serve({ fetch: app.fetch, port }, () => {
    console.log(`weather API (Hono) on http://localhost:${port}: GET /weather costs ${WEATHER_PRICE}, GET /forecast?days=N $0.01 a day, GET /cities is free`);
    // After listening: the backend fetches a new URL for its 402 before registering it.
    void syncExampleEndpoints(dev, WEATHER_ROUTES, port);
  }).on('error', (error) => listenFailed(port, error));
}
