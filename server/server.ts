import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Config } from './platform/config.js';
import { createContext, type AppContext } from './platform/context.js';
import { createApp, type RouteFactory } from './app.js';

export interface RunningServer {
  url: string;
  port: number;
  app: AppContext;
  http: Server;
  close(): Promise<void>;
}

/** Builds the context, mounts every area and listens. `port: 0` picks a free port (tests). */
export async function startServer(config: Config, options: { extraRoutes?: RouteFactory[] } = {}): Promise<RunningServer> {
  const app = await createContext(config);
  const koa = createApp(app, options.extraRoutes);
  const http = koa.listen(config.PORT, config.HOST);
  await new Promise<void>((resolve, reject) => {
    http.once('listening', resolve);
    http.once('error', reject);
  });
  const port = (http.address() as AddressInfo).port;
  return {
    url: `http://${config.HOST === '0.0.0.0' ? '127.0.0.1' : config.HOST}:${port}`,
    port,
    app,
    http,
    async close() {
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
      await app.close();
    },
  };
}
