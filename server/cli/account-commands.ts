import { loadCredentials, saveCredentials, saveCredentialsAside, credentialsPath } from './credentials.js';
import { backendUrl, callBackend, commandKey } from './backend.js';

export interface CommandIO {
  out(line: string): void;
  env: NodeJS.ProcessEnv;
}


async function whoamiWith(url: string, key: string): Promise<{ status: number; body: any }> {
  const res = await callBackend(`${url}/v0/whoami`, { headers: { authorization: `Bearer ${key}` } });
  return { status: res.status, body: await res.json().catch(() => undefined) };
}

/**
 * SPEC 4.1 client rule: a client with saved credentials calls whoami first; a 200 means it is already
 * signed up, and only a missing or refused key leads to a new signup.
 */
export async function signupCommand(io: CommandIO, options: { url?: string }): Promise<number> {
  const saved = loadCredentials(io.env);
  const url = backendUrl(io.env, options.url);
  if (saved?.platformKey && saved.url === url) {
    const me = await whoamiWith(url, saved.platformKey);
    if (me.status === 200) {
      io.out(`already signed up as ${me.body.user.email} (org ${me.body.org.id}); credentials in ${credentialsPath(io.env)}`);
      return 0;
    }
  }
  const res = await callBackend(`${url}/v0/agent-signup`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  const body = await res.json().catch(() => undefined) as any;
  if (res.status !== 201) {
    io.out(`signup failed: ${res.status} ${body?.message ?? ''}`.trim());
    return 1;
  }
  const file = saveCredentials({
    url, orgId: body.org_id, platformKey: body.platform_key, identityKey: body.identity.rawKey,
    identityId: body.identity.identityId, email: body.identity.emailAddress,
  }, io.env);
  io.out(`signed up as ${body.identity.emailAddress} (org ${body.org_id}, identity ${body.identity.identityId})`);
  io.out(`credentials saved to ${file} (keys are shown only once)`);
  return 0;
}

export async function loginCommand(io: CommandIO, options: { key?: string; org?: string; url?: string }): Promise<number> {
  if (!options.key || !options.org) {
    io.out('usage: agentgate login --key <identity key> --org <org id> [--url <base url>]');
    return 2;
  }
  const url = backendUrl(io.env, options.url);
  const me = await whoamiWith(url, options.key);
  if (me.status !== 200) {
    io.out(`login failed: the key was refused (${me.status} ${me.body?.message ?? ''})`.trim());
    return 1;
  }
  const orgOfKey = me.body.org?.id;
  if (orgOfKey !== options.org) {
    io.out(`login failed: the key belongs to org ${orgOfKey}, not ${options.org}`);
    return 1;
  }
  // Never drop a key the user cannot see again: the same org keeps its saved platform key; another org's
  // credentials are moved aside, not overwritten.
  const saved = loadCredentials(io.env);
  const sameOrg = saved?.orgId === options.org && saved.url === url;
  if (saved?.platformKey && !sameOrg) {
    const aside = saveCredentialsAside(saved, io.env);
    io.out(`the credentials of org ${saved.orgId ?? '(unknown)'} were moved to ${aside}`);
  }
  const file = saveCredentials({
    ...(sameOrg ? saved : {}), url, orgId: options.org, identityKey: options.key, identityId: me.body.identityId, email: me.body.email,
  }, io.env);
  io.out(`logged in as ${me.body.email} (identity ${me.body.identityId}); credentials saved to ${file}`);
  return 0;
}

/** `agentgate whoami`: who a key belongs to, asked of the backend every command uses (--url, AGENTGATE_URL, ...). */
export async function whoamiCommand(io: CommandIO, options: { url?: string; key?: string } = {}): Promise<number> {
  const url = backendUrl(io.env, options.url);
  const key = commandKey(io.env, url, options.key, (saved) => saved.identityKey ?? saved.platformKey);
  if ('missing' in key) {
    io.out(`not logged in at ${url}: ${key.missing}`);
    return 1;
  }
  const me = await whoamiWith(url, key.key);
  if (me.status !== 200) {
    io.out(`${url} refused the key (${me.status}); run \`agentgate login\` again, or pass another with --key`);
    return 1;
  }
  io.out(JSON.stringify(me.body, null, 2));
  return 0;
}
