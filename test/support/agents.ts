import type { TestServer } from './server.js';

let counter = 0;

/** Signs up an agent from its own client address (tests run with TRUST_PROXY so limits stay per test). */
export async function signUp(server: TestServer) {
  counter += 1;
  const ip = `10.${(process.pid >> 8) & 255}.${process.pid & 255}.${counter % 250}`;
  const res = await server.request('POST', '/v0/agent-signup', { body: {}, headers: { 'x-forwarded-for': ip } });
  if (res.status !== 201) throw new Error(`signup failed: ${res.status} ${res.text}`);
  return res.body as {
    user_id: string; user_email: string; org_id: string; platform_key: string; agent_card_url: string;
    identity: { identityId: string; name: string; emailAddress: string; scopes: string[]; apiKeyPrefix: string; rawKey: string };
  };
}
