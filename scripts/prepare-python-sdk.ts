// Installs the official x402 Python SDK (from PyPI, into ~/.cache/agentgate) ahead of the tests: `.ci/run`
// calls it so the test run downloads nothing. The Python interop test does the same on its own when this
// was skipped.
import { x402Python } from '../test/support/python-sdk.js';

console.log(`[python-sdk] x402 at ${x402Python((line) => console.log(`[python-sdk] ${line}`))}`);
