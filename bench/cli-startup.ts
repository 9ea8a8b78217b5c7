/**
 * How long the `agentgate` command takes to answer `--version` and `--help` (in this checkout: through
 * bin/agentgate.js, which answers --version from package.json alone and loads only the CLI's entry for
 * --help). Each is run 7 times as its own process; the median, fastest and slowest are printed.
 *
 *   npx tsx bench/cli-startup.ts
 *
 * Measured on the 2-core development machine, shared with other test runs (issue 23): --version 5353 ms
 * and --help 4551 ms when the entry point loaded the whole server first; 38 ms and 139 ms after.
 */
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const cli = join(dirname(fileURLToPath(import.meta.url)), '..', 'bin', 'agentgate.js');
const RUNS = 7;

for (const arg of ['--version', '--help']) {
  const times: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const started = performance.now();
    execFileSync(process.execPath, [cli, arg], { stdio: 'ignore' });
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  console.log(`agentgate ${arg.padEnd(9)}  median ${times[RUNS >> 1]!.toFixed(0).padStart(5)} ms  (fastest ${times[0]!.toFixed(0)}, slowest ${times[RUNS - 1]!.toFixed(0)})`);
}
