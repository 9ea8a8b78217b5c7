import type Router from '@koa/router';
import type { AppContext } from '../../server/platform/context.js';
import { ROUTES } from '../../server/app.js';

/** `METHOD /pattern` of every route the app's routers mount (HEAD left out: Koa adds it to every GET). */
export function mountedRoutes(app: AppContext): string[] {
  const routes = new Set<string>();
  for (const factory of ROUTES) {
    const router = factory(app) as Router & { stack: Array<{ path: string; methods: string[] }> };
    for (const layer of router.stack) {
      for (const method of layer.methods) if (method !== 'HEAD') routes.add(`${method} ${layer.path}`);
    }
  }
  return [...routes].sort();
}
