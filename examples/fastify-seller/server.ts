/**
 * A weather API on Fastify with two paid routes (/weather, and /forecast priced per request). Run `npm run
 * dev` first (it sets up a seller on the local chain), then `npm run example:fastify-seller` and pay it
 * with `npm run example:buyer -- http://localhost:4024/weather`. Any port works (`PORT=5055 npm run
 * example:fastify-seller`): once listening, it registers its paid routes for http://localhost:<port> (or
 * PUBLIC_ORIGIN) with the dev seller's platform key (syncEndpoints).
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { paymentMiddleware, type PaymentMiddlewareOptions } from '../../adapters/fastify.js';
import { isMain, listenFailed, loadDevSeller, required, syncExampleEndpoints } from '../dev-seller.js';
import { forecastDays, forecastFor, multiDayForecast, CITIES, WEATHER_PRICE, WEATHER_ROUTES } from '../weather.js';

type SellerOptions = Omit<Extract<PaymentMiddlewareOptions, { backendUrl: string }>, 'routes'>;

export function createWeatherApp(options: SellerOptions): FastifyInstance {
  const app = Fastify();
  app.register(
    paymentMiddleware({
      ...options,
      routes: WEATHER_ROUTES,
    }),
  );
  app.get<{ Querystring: { city?: string } }>('/weather', async (request) => {
    const { payer, paymentId } = request.payment;
    return { ...forecastFor(request.query.city ?? 'Lisbon'), paidBy: payer, paymentId };
  });
  // Priced per request by ?days= (see WEATHER_ROUTES): the buyer paid for exactly these days.
  app.get<{ Querystring: { city?: string } }>('/forecast', async (request) => {
    const days = forecastDays(new URL(request.url, 'http://x').searchParams);
    return { ...multiDayForecast(request.query.city ?? 'Lisbon', days), paidBy: request.payment.payer };
  });
  app.get('/cities', async () => ({ cities: CITIES }));
  return app;
}

if (isMain(import.meta.url)) {
  const dev = loadDevSeller();
  const port = Number(process.env.PORT ?? 4024);
  const app = createWeatherApp({
    backendUrl: required(dev, 'backendUrl', 'AGENTGATE_URL'),
    apiKey: required(dev, 'sellerKey', 'AGENTGATE_SELLER_KEY'),
    publicOrigin: process.env.PUBLIC_ORIGIN,
    trustProxy: process.env.TRUST_PROXY === 'true',
  });
  // Fastify's default host, localhost, is both 127.0.0.1 and ::1.
  app.listen({ port }, (error) => {
    if (error) listenFailed(port, error);
    console.log(`weather API (Fastify) on http://localhost:${port}: GET /weather costs ${WEATHER_PRICE}, GET /forecast?days=N $0.01 a day, GET /cities is free`);
    // After listening: the backend fetches a new URL for its 402 before registering it.
    void syncExampleEndpoints(dev, WEATHER_ROUTES, port);
  });
}
