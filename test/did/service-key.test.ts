import * as ed from '@noble/ed25519';
import { randomBytes } from 'node:crypto';
import mongoose from 'mongoose';
import { ed25519Signer, loadServiceKey } from '../../server/did/service-key.js';
import { loadConfig } from '../../server/platform/config.js';
import { SecretBox } from '../../server/platform/secret-box.js';
import { createLogger } from '../../server/platform/logger.js';
import { spawnAgentgate } from '../support/processes.js';
import { testDbName } from '../support/server.js';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

describe('the service signing key', () => {
  it('signs receipts natively with the same bytes @noble/ed25519 makes, and they verify', async () => {
    for (let i = 0; i < 20; i++) {
      const seed = ed.utils.randomSecretKey();
      const message = new TextEncoder().encode(`{"paymentId":"pay_${i}","amountUsdcRaw":"${i * 1000}"}`);
      const signature = await ed25519Signer(seed)(message);
      expect(Buffer.from(signature).toString('hex')).toBe(Buffer.from(await ed.signAsync(message, seed)).toString('hex'));
      expect(await ed.verifyAsync(signature, message, await ed.getPublicKeyAsync(seed))).toBe(true);
    }
  });
});

describe('without SERVICE_SIGNING_KEY in production (generated once, kept in the database)', () => {
  const uri = () => process.env.AGENTGATE_TEST_MONGODB_URI!;
  /** One deployment's settings: production, no SERVICE_SIGNING_KEY, a database of its own. */
  const deployment = (db: string, masterKey: string): Record<string, string> => ({
    AGENTGATE_MODE: 'production', HOST: '127.0.0.1', PORT: '0', SMTP_PORT: '0', BASE_URL: 'https://pay.example', MAIL_DOMAIN: 'pay.example', DID_DOMAIN: 'pay.example',
    MASTER_KEY: masterKey, MONGODB_URI: uri(), MONGODB_DB: db, LOG_LEVEL: 'info', SERVICE_SIGNING_KEY: '',
  });
  const didKey = async (url: string) => ((await (await fetch(`${url}/.well-known/did.json`)).json()) as { verificationMethod: Array<{ publicKeyMultibase: string }> }).verificationMethod[0]!.publicKeyMultibase;
  const storedKeys = async (db: string) => {
    const conn = await mongoose.createConnection(uri(), { dbName: db }).asPromise();
    try {
      return await conn.collection('service_keys').countDocuments({});
    } finally {
      await conn.close();
    }
  };
  const drop = async (db: string) => {
    const conn = await mongoose.createConnection(uri(), { dbName: db }).asPromise();
    await conn.dropDatabase().catch(() => {});
    await conn.close();
  };

  it('three `agentgate serve` started at once on a fresh database publish one key, kept across a restart; a process with another MASTER_KEY refuses to start', async () => {
    const db = testDbName();
    const env = deployment(db, randomBytes(32).toString('hex'));
    try {
      const serves = await Promise.all([1, 2, 3].map(() => spawnAgentgate('serve', env)));
      const keys = await Promise.all(serves.map((s) => didKey(s.url!)));
      await Promise.all(serves.map((s) => s.stop()));
      expect(new Set(keys).size).toBe(1);
      expect(await storedKeys(db)).toBe(1);

      const again = await spawnAgentgate('serve', env);
      expect(await didKey(again.url!)).toBe(keys[0]);
      await again.stop();

      // Its own key would sign receipts the DID document of the others does not verify.
      const other = await promisify(execFile)(process.execPath, [join(process.cwd(), 'bin', 'agentgate.js'), 'serve'], { env: { ...process.env, ...env, MASTER_KEY: randomBytes(32).toString('hex') }, timeout: 60_000 })
        .then(() => ({ code: 0, stderr: '' }), (err: { code: number; stderr: string }) => ({ code: err.code, stderr: err.stderr }));
      expect(other.code).toBe(1);
      expect(other.stderr.trim()).toBe('configuration error: the service signing key kept in the database was sealed under another MASTER_KEY: give this process the master key the other processes use (an older one in MASTER_KEYS_PREVIOUS), or set SERVICE_SIGNING_KEY');
    } finally {
      await drop(db);
    }
  }, 120_000);

  it('ten loads racing on one fresh database insert one key and all agree on it', async () => {
    const db = testDbName();
    const config = loadConfig(deployment(db, randomBytes(32).toString('hex')));
    const secrets = new SecretBox({ current: { version: config.MASTER_KEY_VERSION, key: config.MASTER_KEY } });
    // A connection each, as processes have: the race is decided by the database, not inside one driver.
    const conns = await Promise.all(Array.from({ length: 10 }, () => mongoose.createConnection(uri(), { dbName: db }).asPromise()));
    try {
      const keys = await Promise.all(conns.map((conn) => loadServiceKey(conn, config, secrets, createLogger({ level: 'silent' }))));
      expect(new Set(keys.map((k) => k.publicKeyMultibase)).size).toBe(1);
      expect(await storedKeys(db)).toBe(1);
    } finally {
      await Promise.all(conns.map((c) => c.close()));
      await drop(db);
    }
  });
});
