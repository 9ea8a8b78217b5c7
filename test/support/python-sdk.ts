// The official x402 Python SDK (PyPI `x402`) with what its EVM clients need (test/support/python-venv.ts),
// for the interop tests in which a Python buyer pays our routes (test/interop/python/).
import { join } from 'node:path';
import { pythonVenv } from './python-venv.js';

export const X402_PYTHON_VERSION = '2.25.0';

/**
 * `evm` (eth-account, web3: signing and the RPC reads of its channel client) and `requests` (its HTTP
 * client integration) are the extras a buyer script uses; the packages it imports are pinned to the
 * versions this was written against.
 */
const REQUIREMENTS = [`x402[evm,requests]==${X402_PYTHON_VERSION}`, 'eth-account==0.14.0', 'web3==8.0.0', 'requests==2.34.2'];

/** The virtualenv's python, with the SDK installed first if it is not there yet. */
export function x402Python(log: (line: string) => void = () => {}, env: NodeJS.ProcessEnv = process.env): string {
  return join(pythonVenv(`x402-python-${X402_PYTHON_VERSION}`, REQUIREMENTS, log, env), 'bin', 'python');
}
