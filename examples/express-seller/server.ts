/**
 * A weather API on Express with two paid routes (/weather, and /forecast priced per request). Run `npm run
 * dev` first (it sets up a seller on the local chain), then `npm run example:express-seller` and pay it
 * with `npm run example:buyer`. Any port works (`PORT=5055 npm run example:express-seller`): once
 * listening, it registers its paid routes for http://localhost:<port> (or PUBLIC_ORIGIN) with the dev
 * seller's platform key (syncEndpoints).
 */
import express, { type Express } from 'express';
import { paymentMiddleware, type PaymentMiddlewareOptions } from '../../adapters/express.js';
import type { SettledPayment } from '../../middleware/index.js';
import { isMain, listenFailed, loadDevSeller, required, syncExampleEndpoints } from '../dev-seller.js';
import { forecastDays, forecastFor, multiDayForecast, CITIES, WEATHER_PRICE, WEATHER_ROUTES } from '../weather.js';

type SellerOptions = Omit<Extract<PaymentMiddlewareOptions, { backendUrl: string }>, 'routes'>;

export function createWeatherApp(options: SellerOptions): Express {
  const app = express();
  app.use(
    paymentMiddleware({
      ...options,
      routes: WEATHER_ROUTES,
    }),
  );
  app.get('/weather', (req, res) => {
    const payment = res.locals.payment as SettledPayment;
    res.json({ ...forecastFor(String(req.query.city ?? 'Lisbon')), paidBy: payment.payer, paymentId: payment.paymentId });
  });
  // Priced per request by ?days= (see WEATHER_ROUTES): the buyer paid for exactly these days.
  app.get('/forecast', (req, res) => {
    const days = forecastDays(new URL(req.originalUrl, 'http://x').searchParams);
    res.json({ ...multiDayForecast(String(req.query.city ?? 'Lisbon'), days), paidBy: res.locals.payment.payer });
  });
  app.get('/cities', (_req, res) => {
    res.json({ cities: CITIES });
  });
  return app;
}

if (isMain(import.meta.url)) {
  const dev = loadDevSeller();
  const port = Number(process.env.PORT ?? 4021);
  const app = createWeatherApp({
    backendUrl: required(dev, 'backendUrl', 'AGENTGATE_URL'),
    apiKey: required(dev, 'sellerKey', 'AGENTGATE_SELLER_KEY'),
    publicOrigin: process.env.PUBLIC_ORIGIN,
    trustProxy: process.env.TRUST_PROXY === 'true',
  });
  // Express 5 passes a listen error (the port in use) to this callback instead of throwing it.
  app.listen(port, (error?: Error) => {
    if (error) listenFailed(port, error);
    console.log(`weather API (Express) on http://localhost:${port}: GET /weather costs ${WEATHER_PRICE}, GET /forecast?days=N $0.01 a day, GET /cities is free`);
    // After listening: the backend fetches a new URL for its 402 before registering it.
    void syncExampleEndpoints(dev, WEATHER_ROUTES, port);
  });
}
