// schemathesis (PyPI) in a virtualenv of its own, cached beside FerretDB's build (~/.cache/agentgate).
// `.ci/run` installs it before the tests (scripts/prepare-fuzzer.ts), so a test run downloads nothing;
// a test run on a machine that skipped that step installs it once, as the database setup builds FerretDB.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

export const SCHEMATHESIS_VERSION = '4.32.5';

const venvDir = (env: NodeJS.ProcessEnv) =>
  join(env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'agentgate', `schemathesis-${SCHEMATHESIS_VERSION}`);

/**
 * The newest Python 3.12+ on PATH, else python3. CPython 3.11 can fail inside hypothesis with "AST
 * constructor recursion depth mismatch" while schemathesis builds its strategies, an interpreter bug
 * fixed in later versions.
 */
function python(env: NodeJS.ProcessEnv): string {
  const pyenvVersions = join(env.PYENV_ROOT ?? join(homedir(), '.pyenv'), 'versions');
  const installed = existsSync(pyenvVersions)
    ? readdirSync(pyenvVersions).filter((v) => /^3\.(1[2-9])\./.test(v)).sort((a, b) => b.localeCompare(a, undefined, { numeric: true })).map((v) => join(pyenvVersions, v, 'bin', 'python3'))
    : [];
  for (const candidate of ['python3.13', 'python3.12', ...installed, 'python3']) {
    if (spawnSync(candidate, ['-c', 'import venv'], { stdio: 'ignore' }).status === 0) return candidate;
  }
  throw new Error('schemathesis needs Python 3 with venv (python3) on PATH');
}

/** The `st` command, installed into its virtualenv first if it is not there yet. */
export function schemathesisCommand(log: (line: string) => void = () => {}, env: NodeJS.ProcessEnv = process.env): string {
  const dir = venvDir(env);
  const st = join(dir, 'bin', 'st');
  if (existsSync(st)) return st;
  const interpreter = python(env);
  log(`installing schemathesis ${SCHEMATHESIS_VERSION} from PyPI into ${dir} with ${interpreter} (one time)...`);
  execFileSync(interpreter, ['-m', 'venv', dir], { stdio: 'inherit' });
  execFileSync(join(dir, 'bin', 'pip'), ['install', '--quiet', '--disable-pip-version-check', `schemathesis==${SCHEMATHESIS_VERSION}`], { stdio: 'inherit' });
  return st;
}
