export default async function globalTeardown() {
  await globalThis.__AGENTGATE_SERVICES__?.mongo.stop();
}
