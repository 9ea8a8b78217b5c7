import { join } from 'node:path';
import { loadConfig } from '../platform/config.js';
import { provideMongoServer } from '../platform/mongo-server.js';
import { startServer } from '../server.js';
import { devStateDir, persistentSecret } from './local-state.js';

/**
 * `agentgate dev`: the backend on embedded defaults. Every value can still be overridden from the
 * environment; what is not given is filled with a safe local default.
 */
export async function runDev(env: NodeJS.ProcessEnv = process.env): Promise<{ stop(): Promise<void> }> {
  const stateDir = devStateDir(env);
  const port = env.PORT ?? '3000';
  const master = env.MASTER_KEY ? { value: env.MASTER_KEY, created: false } : persistentSecret(stateDir, 'master.key');
  if (master.created) {
    console.warn(`[agentgate] generated a development master key in ${join(stateDir, 'master.key')}; set MASTER_KEY in production`);
  }
  const mongo = await provideMongoServer({ env, dataDir: join(stateDir, 'db'), log: (l) => console.log(`[agentgate] ${l}`) });
  const config = loadConfig({
    AGENTGATE_MODE: 'dev',
    HOST: '127.0.0.1',
    PORT: port,
    BASE_URL: `http://localhost:${port}`,
    MAIL_DOMAIN: 'agents.localhost',
    DID_DOMAIN: `localhost%3A${port}`,
    ...env,
    MASTER_KEY: master.value,
    MONGODB_URI: mongo.uri,
  });
  const server = await startServer(config);
  console.log(`[agentgate] dev backend on ${config.BASE_URL} (database: ${mongo.kind})`);
  console.log(`[agentgate] sign up an agent:  curl -s -X POST ${config.BASE_URL}/v0/agent-signup -H 'content-type: application/json' -d '{}'`);
  return {
    async stop() {
      await server.close();
      await mongo.stop();
    },
  };
}
