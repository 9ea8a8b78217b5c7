import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';

// Production mode: loopback and private targets are refused, as they would be on a public server.
let server: TestServer;
let platformKey: string;
beforeAll(async () => {
  server = await startTestServer({ AGENTGATE_MODE: 'production', TRUST_PROXY: 'true' });
  platformKey = (await signUp(server)).platform_key;
  await server.request('PUT', '/v0/payments/acceptance', { key: platformKey, body: { enabled: true, payTo: privateKeyToAccount(generatePrivateKey()).address } });
});
afterAll(async () => { await server.close(); });

describe('endpoint registration in production mode', () => {
  it.each([
    ['loopback', () => `${server.url}/weather`],
    ['cloud metadata', () => 'http://169.254.169.254/latest/meta-data/'],
    ['private network', () => 'http://10.0.0.7/weather'],
    ['IPv6 loopback', () => 'http://[::1]:8080/weather'],
  ])('refuses a %s URL without fetching it', async (_name, url) => {
    const res = await server.request('POST', '/v0/payments/endpoints', { key: platformKey, body: { url: url(), priceUsdc: '0.01' } });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('endpoint_check_failed');
  });

  it('refuses a private webhook URL', async () => {
    const res = await server.request('POST', '/v0/payments/endpoints', { key: platformKey, body: { url: 'mcp://tool/report', priceUsdc: '0.01', webhookUrl: 'http://192.168.1.10/hook' } });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('url_not_allowed');
  });
});
