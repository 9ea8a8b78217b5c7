import http from 'node:http';
import https from 'node:https';
import { Resolver } from 'did-resolver';
import { getResolver } from 'web-did-resolver';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';

let server: TestServer;
const realHttpsRequest = https.request;
beforeAll(async () => {
  server = await startTestServer({ TRUST_PROXY: 'true' });
  // web-did-resolver always speaks https (through cross-fetch/node-fetch, which picks `https.request` per
  // request). Send its requests for the test server's host to the plain-http port; everything else is untouched.
  https.request = ((options: any, callback?: any) => {
    if (typeof options === 'object' && options.protocol === 'https:' && options.hostname === '127.0.0.1' && Number(options.port) === server.port) {
      return http.request({ ...options, protocol: 'http:', agent: undefined }, callback);
    }
    return (realHttpsRequest as any)(options, callback);
  }) as typeof https.request;
});
afterAll(async () => { https.request = realHttpsRequest; await server.close(); });

describe('a standard did:web resolver (did-resolver + web-did-resolver)', () => {
  it('accepts our identity and service DID documents', async () => {
    const agent = await signUp(server);
    const resolver = new Resolver(getResolver());
    const did = `did:web:${server.config.DID_DOMAIN}:identities:${agent.identity.identityId}`;
    const result = await resolver.resolve(did);
    expect(result.didResolutionMetadata).toEqual({ contentType: 'application/did+ld+json' });
    expect(result.didDocument?.id).toBe(did);
    expect(result.didDocument?.assertionMethod).toEqual([`${did}#key-1`]);
    expect(result.didDocument?.verificationMethod?.[0]).toMatchObject({ id: `${did}#key-1`, type: 'Multikey', controller: did });

    const service = await resolver.resolve(`did:web:${server.config.DID_DOMAIN}`);
    expect(service.didResolutionMetadata.error).toBeUndefined();
    expect(service.didDocument?.verificationMethod?.[0]?.publicKeyMultibase).toBe(server.app.serviceKey.publicKeyMultibase);

    const unknown = await resolver.resolve(`did:web:${server.config.DID_DOMAIN}:identities:id-0000000000000000`);
    expect(unknown.didResolutionMetadata.error).toBe('notFound');
  });
});
