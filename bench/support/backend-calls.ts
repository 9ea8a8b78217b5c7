import { MongoClient } from 'mongodb';

/** A bench's calls to a backend's API while setting up: JSON in and out, an answer of 300 or more thrown. */
export function backendCaller(url: string) {
  return async (method: string, path: string, key: string | undefined, body?: unknown): Promise<Record<string, any>> => {
    const res = await fetch(url + path, { method, body: body === undefined ? undefined : JSON.stringify(body), headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) } });
    const json = (await res.json()) as Record<string, any>;
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
}

/** Closes a bench's backend, then drops its database (closed first: its last record writes land before the database goes). */
export function closeBackend(backend: { close(): Promise<unknown> }, mongoUri: string, dbName: string) {
  return async () => {
    await backend.close();
    const client = await new MongoClient(mongoUri).connect();
    await client.db(dbName).dropDatabase().catch(() => {}).finally(() => client.close());
  };
}
