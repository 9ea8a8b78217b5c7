import Router from '@koa/router';
import { PACKAGE } from '../platform/package-info.js';
import { z } from 'zod';
import type { Config } from '../platform/config.js';
import type { RateLimiter } from '../platform/rate-limit.js';
import { parseInput } from '../platform/validate.js';
import { signUpAgent, type SignupDeps } from './signup-service.js';
import { IDENTITY_TYPES } from './identity-types.js';

const WINDOW_MS = 60_000;
export const signupBody = z.object({}).strict();

export interface SignupRouteDeps extends SignupDeps {
  config: Pick<Config, 'BASE_URL' | 'SIGNUP_RATE_LIMIT_PER_MINUTE'>;
  rateLimiter: RateLimiter;
}

/** Unauthenticated routes of SPEC 4.1: signup, the CLI helper text and identity types. */
export function signupRoutes(deps: SignupRouteDeps): Router {
  const { config, rateLimiter } = deps;
  const router = new Router();

  router.post('/v0/agent-signup', async (ctx) => {
    parseInput(signupBody, ctx.request.body, 'body');
    // ctx.ip honours X-Forwarded-For only when TRUST_PROXY is set (app.proxy).
    await rateLimiter.consume(`signup:${ctx.ip}`, config.SIGNUP_RATE_LIMIT_PER_MINUTE, WINDOW_MS);
    ctx.status = 201;
    ctx.body = await signUpAgent(deps);
  });

  router.get('/v0/agent-signup/cli', (ctx) => {
    ctx.type = 'text/plain; charset=utf-8';
    ctx.body = cliInstructions(config.BASE_URL);
  });

  router.get('/v0/identity-types', (ctx) => {
    ctx.body = IDENTITY_TYPES;
  });

  return router;
}

export const cliInstructions = (baseUrl: string) => `# agentgate CLI
# 1. Install
npm install -g ${PACKAGE.name}    # the npm package ${PACKAGE.name} installs the agentgate command

# 2. Log in with an identity key and your org id (from the signup response)
agentgate login --key <identity_key> --org <org_id> --url ${baseUrl}

# Or sign up a new agent (reuses saved credentials when they are still valid)
agentgate signup --url ${baseUrl}

# Check who you are
agentgate whoami
`;
