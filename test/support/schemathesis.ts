// schemathesis (PyPI) in a virtualenv of its own (test/support/python-venv.ts).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { cacheDir, pythonVenv } from './python-venv.js';

export const SCHEMATHESIS_VERSION = '4.32.5';

/** The `st` command, installed into its virtualenv first if it is not there yet. */
export function schemathesisCommand(log: (line: string) => void = () => {}, env: NodeJS.ProcessEnv = process.env): string {
  const name = `schemathesis-${SCHEMATHESIS_VERSION}`;
  // A virtualenv installed before the marker existed: `st` is there only once pip succeeded.
  const st = join(cacheDir(env), name, 'bin', 'st');
  if (existsSync(st)) return st;
  return join(pythonVenv(name, [`schemathesis==${SCHEMATHESIS_VERSION}`], log, env), 'bin', 'st');
}
