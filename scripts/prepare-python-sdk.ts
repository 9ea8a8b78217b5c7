// Installs the official x402 Python SDK (from PyPI, into ~/.cache/agentgate) ahead of the tests: `.ci/run`
// calls it so the test run downloads nothing. The suite's global setup (test/support/global-setup.mjs)
// does the same when this was skipped.
import { x402Python } from '../test/support/python-sdk.js';

console.log(`[python-sdk] x402 at ${x402Python((line) => console.log(`[python-sdk] ${line}`))}`);
