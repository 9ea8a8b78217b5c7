// Installs schemathesis (from PyPI, into ~/.cache/agentgate) ahead of the tests: `.ci/run` calls it so
// the test run downloads nothing. The schemathesis test does the same on its own when this was skipped.
import { schemathesisCommand } from '../test/support/schemathesis.js';

console.log(`[fuzzer] schemathesis at ${schemathesisCommand((line) => console.log(`[fuzzer] ${line}`))}`);
