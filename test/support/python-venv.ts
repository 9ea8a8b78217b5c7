// Python packages from PyPI for the tests, each set in a virtualenv of its own cached beside FerretDB's
// build (~/.cache/agentgate). `.ci/run` installs them before the tests (scripts/prepare-*.ts), so a test
// run downloads nothing; a test run on a machine that skipped that step installs them once itself, as the
// database setup builds FerretDB.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

export const cacheDir = (env: NodeJS.ProcessEnv = process.env) => join(env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'agentgate');

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
  throw new Error('the tests need Python 3 with venv (python3) on PATH');
}

/**
 * The directory of virtualenv `name` holding `requirements` (pip requirement specifiers), created and
 * installed first if it is not there yet. A marker written after pip succeeds says what it holds, so an
 * install cut short, or a changed list, is installed again.
 */
export function pythonVenv(name: string, requirements: string[], log: (line: string) => void = () => {}, env: NodeJS.ProcessEnv = process.env): string {
  const dir = join(cacheDir(env), name);
  const marker = join(dir, 'agentgate-requirements.txt');
  const wanted = `${requirements.join('\n')}\n`;
  if (existsSync(marker) && readFileSync(marker, 'utf8') === wanted) return dir;
  if (!existsSync(join(dir, 'bin', 'pip'))) {
    const interpreter = python(env);
    log(`creating the virtualenv ${dir} with ${interpreter} (one time)...`);
    execFileSync(interpreter, ['-m', 'venv', dir], { stdio: 'inherit' });
  }
  log(`installing ${requirements.join(' ')} from PyPI into ${dir} (one time)...`);
  execFileSync(join(dir, 'bin', 'pip'), ['install', '--quiet', '--disable-pip-version-check', ...requirements], { stdio: 'inherit' });
  writeFileSync(marker, wanted);
  return dir;
}
