import { z } from 'zod';

/** How the server treats loopback and test-only features: `dev` allows loopback targets and the faucet. */
export type Mode = 'dev' | 'production';

const bool = z.enum(['true', 'false', '1', '0', 'yes', 'no']).transform((v) => ['true', '1', 'yes'].includes(v));
const port = z.coerce.number().int().min(0).max(65535);
const masterKey = z.string().transform((value, ctx) => {
  const bytes = /^[0-9a-fA-F]{64}$/.test(value) ? Buffer.from(value, 'hex') : Buffer.from(value, 'base64');
  if (bytes.length !== 32) {
    ctx.addIssue({ code: 'custom', message: 'must be 32 bytes, as 64 hex characters or base64' });
    return z.NEVER;
  }
  return bytes;
});
const domain = z.string().regex(/^[a-z0-9.-]+(%3A\d+)?$/i, 'must be a host name, e.g. example.com');

const schema = z.object({
  AGENTGATE_MODE: z.enum(['dev', 'production']).default('production'),
  PORT: port.default(3000),
  HOST: z.string().min(1).default('0.0.0.0'),
  BASE_URL: z.url({ protocol: /^https?$/ }).transform((u) => u.replace(/\/+$/, '')),
  MAIL_DOMAIN: domain,
  DID_DOMAIN: domain,
  MASTER_KEY: masterKey,
  MASTER_KEY_VERSION: z.coerce.number().int().min(1).default(1),
  // Older master keys kept only until `agentgate rotate-master-key` has re-wrapped everything:
  // "1:<key>,2:<key>", same encodings as MASTER_KEY.
  MASTER_KEYS_PREVIOUS: z.string().regex(/^\d+:[^,]+(,\d+:[^,]+)*$/, 'must look like "1:<key>,2:<key>"').optional(),
  MONGODB_URI: z.string().regex(/^mongodb(\+srv)?:\/\//, 'must be a mongodb:// or mongodb+srv:// URI'),
  MONGODB_DB: z.string().regex(/^[A-Za-z0-9_-]{1,60}$/).default('agentgate'),
  TRUST_PROXY: bool.default(false),
  SIGNUP_RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).default(10),
  MAX_BODY_BYTES: z.coerce.number().int().min(1024).default(1024 * 1024),
  SERVICE_SIGNING_KEY: z.string().regex(/^[0-9a-fA-F]{64}$/, 'must be a 32-byte Ed25519 seed in hex').optional(),
});

export type Env = z.input<typeof schema>;
export type Config = z.output<typeof schema> & { mode: Mode };

export class ConfigError extends Error {}

/** Validates the environment once at start-up; the first bad variable is named in one line. */
export function loadConfig(env: Record<string, string | undefined>): Config {
  const input = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const result = schema.safeParse(input);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const name = String(issue.path[0] ?? 'environment');
    const message = issue.code === 'invalid_type' && input[name] === undefined ? 'is required' : issue.message;
    throw new ConfigError(`configuration error: ${name} ${message}`);
  }
  return { ...result.data, mode: result.data.AGENTGATE_MODE };
}
