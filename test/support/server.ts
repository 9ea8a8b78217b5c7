import { randomBytes } from 'node:crypto';
import mongoose, { type Connection } from 'mongoose';
import { loadConfig, type Config } from '../../server/platform/config.js';
import { freePort } from '../../server/platform/net.js';
import { startServer, type RunningServer } from '../../server/server.js';
import { DEV_EXTENSION } from '../../server/dev/routes.js';
import { chainConfig } from './chain.js';
import type { Logger } from '../../server/platform/logger.js';
import { startTestDns, type TestDns } from './dns-server.js';

export function testDbName(): string {
  return `t_${randomBytes(6).toString('hex')}`;
}

/** A connection to a fresh database on the shared test server for the file's tests (call it at the top), dropped after them. */
export function useTestConnection(): () => Connection {
  let conn: Connection | undefined;
  beforeAll(async () => {
    conn = await mongoose.createConnection(process.env.AGENTGATE_TEST_MONGODB_URI!, { dbName: testDbName() }).asPromise();
  });
  afterAll(async () => {
    await conn?.dropDatabase().catch(() => {});
    await conn?.close();
  });
  return () => {
    if (!conn) throw new Error('the test connection is open only inside tests and hooks');
    return conn;
  };
}

/** Test configuration: dev mode, a throw-away master key, the shared test MongoDB and a fresh database. */
/** A server's request limits turned off: for tests that send thousands of requests to exercise routes, not limits. */
export const NO_REQUEST_LIMITS = { RATE_LIMIT_PER_KEY: '0', RATE_LIMIT_PER_SELLER_KEY: '0', RATE_LIMIT_PER_ORG: '0', RATE_LIMIT_PER_ANONYMOUS: '0' } as const;

export async function testConfig(overrides: Record<string, string> = {}): Promise<Config> {
  const uri = process.env.AGENTGATE_TEST_MONGODB_URI;
  if (!uri) throw new Error('AGENTGATE_TEST_MONGODB_URI is not set: run the tests with `npm test`');
  const port = overrides.PORT ?? String(await freePort());
  return loadConfig({
    AGENTGATE_MODE: 'dev',
    HOST: '127.0.0.1',
    PORT: port,
    BASE_URL: `http://127.0.0.1:${port}`,
    MAIL_DOMAIN: 'agents.test',
    DID_DOMAIN: `127.0.0.1%3A${port}`,
    MASTER_KEY: randomBytes(32).toString('hex'),
    MONGODB_URI: uri,
    MONGODB_DB: testDbName(),
    SMTP_PORT: '0',
    JOBS_PROCESS_EVERY_MS: '200',
    // A test that reads the logs sets its own level (or LOG_LEVEL=debug npm test to watch them all).
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
    ...(await chainConfig()),
    ...overrides,
  });
}

export interface TestServer extends RunningServer {
  config: Config;
  /**
   * The loopback DNS server received mail is authenticated against (MAIL_DNS_SERVERS), unless the test
   * gave its own. By default any domain without records of its own publishes SPF allowing 127.0.0.1, so
   * mail a test sends over SMTP from loopback as `ada@example.org` passes SPF aligned with its From.
   */
  dns?: TestDns;
  /** Stops this server and keeps its database (another server may share it); close() also drops it. */
  stop(): Promise<void>;
  /** JSON request helper: returns status, headers and parsed body. */
  request(method: string, path: string, options?: { key?: string; body?: unknown; rawBody?: string; headers?: Record<string, string> }): Promise<{ status: number; headers: Headers; body: any; text: string }>;
}

/** A whole backend on its own database and port; close() drops the database. `log` captures its log lines. */
export async function startTestServer(overrides: Record<string, string> = {}, options: { log?: Logger } = {}): Promise<TestServer> {
  const dns = overrides.MAIL_DNS_SERVERS ? undefined : await startTestDns();
  if (dns) overrides = { ...overrides, MAIL_DNS_SERVERS: dns.server };
  let config = await testConfig(overrides);
  let server: Awaited<ReturnType<typeof startServer>>;
  for (let attempt = 1; ; attempt++) {
    try {
      server = await startServer(config, { extension: config.mode === 'dev' ? DEV_EXTENSION : undefined, log: options.log });
      break;
    } catch (err) {
      // freePort() hands out a port another process on this machine may take before we listen on it.
      if ((err as { code?: string }).code !== 'EADDRINUSE' || overrides.PORT || attempt === 5) throw err;
      config = await testConfig({ ...overrides, MONGODB_DB: config.MONGODB_DB });
    }
  }
  return {
    ...server,
    config,
    dns,
    async stop() {
      await server.close();
      await dns?.close();
    },
    async close() {
      // Workers first, so no job poll runs into the dropped database.
      await server.app.jobs.stop();
      await server.app.db.dropDatabase().catch(() => {});
      await server.close();
      await dns?.close();
    },
    async request(method, path, options = {}) {
      const headers: Record<string, string> = { ...(options.headers ?? {}) };
      if (options.key) headers.authorization = `Bearer ${options.key}`;
      let body: string | undefined = options.rawBody;
      if (options.body !== undefined) body = JSON.stringify(options.body);
      if (body !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) headers['content-type'] = 'application/json';
      const response = await fetch(server.url + path, { method, headers, body });
      const text = await response.text();
      let parsed: unknown = undefined;
      try { parsed = text ? JSON.parse(text) : undefined; } catch { parsed = undefined; }
      return { status: response.status, headers: response.headers, body: parsed, text };
    },
  };
}
