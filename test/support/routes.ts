import type Router from '@koa/router';
import type { AppContext } from '../../server/context.js';
import { appRouters } from '../../server/app.js';
import { DEV_EXTENSION } from '../../server/dev/routes.js';

/**
 * `METHOD /pattern` of every API route a test server mounts (HEAD left out: Koa adds it to every GET).
 * The ops console (/console) is left out: its pages are HTML forms behind a cookie session and a CSRF
 * token, not API operations; test/console/console-http.test.ts fuzzes them with a live session instead.
 */
export function mountedRoutes(app: AppContext): string[] {
  return [...new Set(mountedRouteList(app))].sort();
}

/** Routes two routers (or one router twice) mount: the first answers, the other's handler never runs. */
export function routesMountedTwice(app: AppContext): string[] {
  const seen = new Set<string>();
  return mountedRouteList(app).filter((route) => seen.has(route) || !seen.add(route));
}

function mountedRouteList(app: AppContext): string[] {
  const routes: string[] = [];
  for (const mounted of appRouters(app, DEV_EXTENSION)) {
    const router = mounted as Router & { stack: Array<{ path: string; methods: string[] }> };
    for (const layer of router.stack) {
      if (layer.path === '/console' || layer.path.startsWith('/console/')) continue;
      for (const method of layer.methods) if (method !== 'HEAD') routes.push(`${method} ${layer.path}`);
    }
  }
  return routes;
}
