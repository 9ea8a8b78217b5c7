// Readies the dev and test database ahead of time: builds FerretDB with Go (from the Go module proxy)
// and links the embedded PostgreSQL's libraries. `.ci/run` calls it before the tests, so a test run
// downloads nothing; `agentgate dev` and the test setup do the same on their own when it was skipped.
import { installFerretdb } from '../server/dev/database/ferretdb-build.js';
import { postgresBinaries } from '../server/dev/database/postgres-binaries.js';
import { postgresRunAsUser } from '../server/dev/database/unprivileged-user.js';

const log = (line: string) => console.log(`[database] ${line}`);
const ferretdb = await installFerretdb(process.env, log);
const postgres = postgresBinaries(postgresRunAsUser());
log(`FerretDB at ${ferretdb}; PostgreSQL ${postgres.version} at ${postgres.postgres}`);
