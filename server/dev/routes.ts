import type { RouteFactory } from '../app.js';
import type { Operation } from '../openapi/operations.js';
import { faucetOperation, faucetRoutes } from './faucet.js';

/**
 * What `agentgate dev` and the tests mount on top of the production app: the faucet. `agentgate serve`
 * never imports this folder (the architecture test checks it).
 */
export const DEV_EXTENSION: { routes: RouteFactory[]; operations: Operation[] } = {
  routes: [faucetRoutes],
  operations: [faucetOperation],
};
