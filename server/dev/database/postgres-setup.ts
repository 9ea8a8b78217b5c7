/**
 * What we set up inside the cluster before every start, through PostgreSQL's single-user mode (no SQL
 * client library, and nothing listens yet). Idempotent, so clusters made by earlier versions catch up.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { exitReason } from '../child-processes.js';

export const POSTGRES_USER = 'agentgate';

/**
 * FerretDB 1.24 turns every equality filter, `_id` included, into `(_jsonb -> 'field') @> value`, which
 * the btree indexes it creates for createIndex cannot serve: every query is a sequential scan, and an
 * `_id` lookup in a 100,000-document collection takes ~20 ms. An event trigger (installed in single-user
 * mode before the server starts, idempotently) gives every field FerretDB indexes a GIN index on the same
 * expression, which serves `@>`: the same filters become index scans. FerretDB and the application are
 * unchanged; sorts and limits are still done by FerretDB (docs/operators/ferretdb.md).
 *
 * Without `fastupdate`: with it (PostgreSQL's default), a GIN index queues new entries in a pending list of
 * up to 4 MB that every lookup reads through, so each equality cost milliseconds whatever it matched. With
 * 200,000 rows inserted 1,000 at a time, the lookup of the 10 rows of one status read 175 pages (50,425
 * queued entries) in 5.0 ms; without it, 2 pages in 0.06 ms, for 14 % more time inserting (3.2 s against
 * 2.8 s). These indexes hold one key per row, the case fastupdate helps least. Indexes made by earlier
 * versions are switched at the next start and their pending list merged.
 */
const INDEX_TRIGGER_SQL = `
CREATE OR REPLACE FUNCTION agentgate_gin_for_ferretdb_indexes() RETURNS event_trigger LANGUAGE plpgsql AS $fn$
DECLARE
  cmd record;
  meta record;
  expr text;
BEGIN
  FOR cmd IN SELECT * FROM pg_event_trigger_ddl_commands() WHERE command_tag = 'CREATE INDEX' LOOP
    SELECT ix.indrelid, ix.indnatts, am.amname INTO meta
      FROM pg_index ix JOIN pg_class c ON c.oid = ix.indexrelid JOIN pg_am am ON am.oid = c.relam
      WHERE ix.indexrelid = cmd.objid;
    CONTINUE WHEN meta.amname IS DISTINCT FROM 'btree';
    FOR i IN 1..meta.indnatts LOOP
      expr := pg_get_indexdef(cmd.objid, i, false);
      CONTINUE WHEN position('_jsonb -> ' in expr) = 0;
      EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %s USING gin (%s) WITH (fastupdate = off)', 'gin_' || md5(meta.indrelid::text || expr), meta.indrelid::regclass::text, expr);
    END LOOP;
  END LOOP;
END
$fn$;

DROP EVENT TRIGGER IF EXISTS agentgate_gin_for_ferretdb_indexes;

CREATE EVENT TRIGGER agentgate_gin_for_ferretdb_indexes ON ddl_command_end WHEN TAG IN ('CREATE INDEX') EXECUTE FUNCTION agentgate_gin_for_ferretdb_indexes();

DO $up$
DECLARE
  ix record;
BEGIN
  FOR ix IN SELECT c.oid, c.oid::regclass::text AS name FROM pg_class c JOIN pg_am am ON am.oid = c.relam
    WHERE c.relkind = 'i' AND am.amname = 'gin' AND c.relname LIKE 'gin\\_%' AND NOT coalesce(c.reloptions @> ARRAY['fastupdate=off'], false) LOOP
    EXECUTE format('ALTER INDEX %s SET (fastupdate = off)', ix.name);
    PERFORM gin_clean_pending_list(ix.oid);
  END LOOP;
END
$up$;

`;

/**
 * Only TCP from 127.0.0.1, and only with the password: PostgreSQL's superuser can run programs, so no other
 * local user may log in (initdb's trust rules would let any of them). There is no Unix socket to allow.
 */
const HBA = '# Written by agentgate at every start (server/dev/database/postgres-setup.ts).\nhost all all 127.0.0.1/32 scram-sha-256\n';

/** Installs the index trigger, sets our user's password and the login rules. */
export async function setUpCluster(postgres: string, dataDir: string, password: string, spawnAs: object, env: NodeJS.ProcessEnv): Promise<void> {
  if (!/^[A-Za-z0-9_-]+$/.test(password)) throw new Error('the PostgreSQL password must be base64url');
  writeFileSync(join(dataDir, 'pg_hba.conf'), HBA, { mode: 0o600 });
  const sql = `${INDEX_TRIGGER_SQL}\nALTER ROLE ${POSTGRES_USER} PASSWORD '${password}';\n\n`;
  // -j: a statement ends at a semicolon followed by an empty line, so the function body may hold semicolons.
  const child = spawn(postgres, ['--single', '-j', '-D', dataDir, 'postgres'], { ...spawnAs, env, stdio: ['pipe', 'ignore', 'pipe'] });
  const exited = exitReason(child);
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => { stderr += d.toString(); });
  child.stdin?.end(sql);
  const reason = await exited;
  if (child.exitCode !== 0 || /\bERROR\b/.test(stderr)) throw new Error(`setting up PostgreSQL in ${dataDir} failed (${reason}): ${stderr.trim().slice(-500)}`);
}
