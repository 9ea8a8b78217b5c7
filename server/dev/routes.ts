import type { AppExtension } from '../app.js';
import { faucetOperation, faucetRoutes, faucetTool } from './faucet.js';
import { landingPageOperation, landingPageRoutes } from './landing-page.js';
import { mailPageOperations, mailPageRoutes } from './mail-page.js';
import type { MailCatcher } from './mail-catcher.js';

/**
 * What `agentgate dev` and the tests mount on top of the production app: the faucet, as a route and as
 * the MCP tool wallet_faucet, and the landing page at /. `agentgate serve` never imports this folder (the architecture test checks it).
 */
export const DEV_EXTENSION: Required<AppExtension> = {
  routes: [faucetRoutes, landingPageRoutes],
  operations: [faucetOperation, landingPageOperation],
  tools: [faucetTool],
};

/** The dev extension with the local mail catcher's page, when `agentgate dev` runs one. */
export function devExtension(options: { mailCatcher?: MailCatcher } = {}): Required<AppExtension> {
  if (!options.mailCatcher) return DEV_EXTENSION;
  return {
    ...DEV_EXTENSION,
    routes: [...DEV_EXTENSION.routes, mailPageRoutes(options.mailCatcher)],
    operations: [...DEV_EXTENSION.operations, ...mailPageOperations],
  };
}
