// The official x402 Python SDK (PyPI `x402`) with what its EVM clients need (test/support/python-venv.ts),
// for the interop tests in which a Python buyer pays our routes (test/interop/python/).
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pythonVenv } from './python-venv.js';

export const X402_PYTHON_VERSION = '2.25.0';

/**
 * `evm` (eth-account, web3: signing and the RPC reads of its channel client), `svm` (solana, solders: its
 * Solana client) and `requests` (its HTTP client integration) are the extras a buyer script uses; the packages it imports are pinned to the
 * versions this was written against.
 */
const REQUIREMENTS = [`x402[evm,svm,requests]==${X402_PYTHON_VERSION}`, 'eth-account==0.14.0', 'web3==8.0.0', 'requests==2.34.2', 'solana==0.39.0', 'solders==0.27.1'];

/** The virtualenv's python, with the SDK installed first if it is not there yet. */
export function x402Python(log: (line: string) => void = () => {}, env: NodeJS.ProcessEnv = process.env): string {
  return join(pythonVenv(`x402-python-${X402_PYTHON_VERSION}`, REQUIREMENTS, log, env), 'bin', 'python');
}

/** The buyer script of the Python interop tests (test/interop/python/buyer.py: what it pays, from its environment). */
export const PYTHON_BUYER_SCRIPT = fileURLToPath(new URL('../interop/python/buyer.py', import.meta.url));

/** A call the Python buyer made: its answer and the settlement it got. */
export interface PythonPaidCall { status: number; body: unknown; paymentType: string | null; settlement: { success: boolean; transaction: string; network: string; payer?: string; extra?: any } | null }
export interface PythonBuyerRun {
  buyer: string;
  exact: PythonPaidCall | null;
  calls: PythonPaidCall[];
  replay: { status: number; error: string | null } | null;
}

/** Runs the Python buyer script (asynchronously: the backend and the shop answer it from this process). */
/** The Solana buyer script (test/interop/python/svm_buyer.py). */
export const PYTHON_SVM_BUYER_SCRIPT = fileURLToPath(new URL('../interop/python/svm_buyer.py', import.meta.url));

export function runPythonBuyer<T = PythonBuyerRun>(python: string, env: Record<string, string>, script = PYTHON_BUYER_SCRIPT): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(python, [script], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => { stdout += chunk; });
    child.stderr.on('data', (chunk) => { stderr += chunk; });
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) reject(new Error(`the Python buyer exited with ${code}:\n${stderr}`));
      else resolve(JSON.parse(stdout) as T);
    });
  });
}
