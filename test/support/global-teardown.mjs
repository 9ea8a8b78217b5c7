export default async function globalTeardown() {
  const services = globalThis.__AGENTGATE_SERVICES__;
  await Promise.all([services?.mongo.stop(), services?.chain.stop()]);
}
