// Starts the real services the suite talks to, once for all test files: a MongoDB-wire server
// (MONGODB_URI, else FerretDB, else mongodb-memory-server). Each test file then uses its own database.
// Plain ESM loading our TypeScript through tsx: jest's module mapper does not apply to global setup.
import { tsImport } from 'tsx/esm/api';

export default async function globalSetup() {
  const { provideMongoServer } = await tsImport('../../server/platform/mongo-server.ts', import.meta.url);
  const mongo = await provideMongoServer({ log: (line) => process.stderr.write(`[test services] ${line}\n`) });
  process.env.AGENTGATE_TEST_MONGODB_URI = mongo.uri;
  globalThis.__AGENTGATE_SERVICES__ = { mongo };
}
