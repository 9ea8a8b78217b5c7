import { rmSync } from 'node:fs';

export default async function globalTeardown() {
  const services = globalThis.__AGENTGATE_SERVICES__;
  if (services) services.stopping = true;
  await Promise.all([services?.mongo.stop(), services?.chain.stop()]);
  if (process.env.AGENTGATE_TEST_LOCKS) rmSync(process.env.AGENTGATE_TEST_LOCKS, { recursive: true, force: true });
}
