#!/usr/bin/env node
// Runs agentgate's commands on a Node.js it supports, whatever Node the machine has.
//
// agentgate needs Node.js 22 or newer. On an older Node (20 is still common on build machines), the
// commands a newcomer types (`npm run dev`, `npm test`, `agentgate`) run on Node.js 22 taken from the npm
// registry's `node` package instead, installed once into ~/.cache/agentgate/node-22 and reused, and say so
// in one line. A Node of 22 or newer is always used as it is: someone who manages Node themselves (nvm
// with the repository's .nvmrc, a version manager, a container image) is never overridden.
//
// Used three ways:
//   node bin/supported-node.js <node args...>   run `node <node args...>` on a supported Node (npm test);
//   node bin/supported-node.js --bin-dir <major>  install Node <major> if needed, print its bin folder (CI);
//   import { supportedNode } from './supported-node.js'   (bin/agentgate.js re-runs itself with it).
//
// Written for old Node versions (no top-level await, no syntax newer than Node 12's ES modules): its whole
// point is to run on them.
import { spawn, spawnSync } from 'child_process';
import { existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'fs';
import { constants, homedir } from 'os';
import { delimiter, dirname, join } from 'path';
import { fileURLToPath } from 'url';

export const MINIMUM_MAJOR = 22;

const currentMajor = Number(process.versions.node.split('.')[0]);

function cacheDir(major) {
  return join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'agentgate', 'node-' + major);
}

function binaryIn(dir) {
  return process.platform === 'win32' ? join(dir, 'node_modules', 'node', 'bin', 'node.exe') : join(dir, 'node_modules', 'node', 'bin', 'node');
}

/**
 * The path of Node.js <major> from the npm registry's `node` package, installed on first use. The install
 * goes to a folder of its own and is renamed into place, so two commands starting at once on a fresh
 * machine (npm test beside npm run dev) never see half an install.
 */
export function installedNode(major) {
  const dir = cacheDir(major);
  if (existsSync(binaryIn(dir))) return binaryIn(dir);
  const staging = dir + '.installing-' + process.pid;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });
  // A project of its own, so the install reads no package.json above it; `node` installs the platform's
  // binary package (from the same registry) in its preinstall script, approved here.
  writeFileSync(join(staging, 'package.json'), JSON.stringify({ private: true, allowScripts: { node: true } }) + '\n');
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const result = spawnSync(npm, ['install', '--no-save', '--no-package-lock', '--no-audit', '--no-fund', '--loglevel=error', 'node@' + major], {
    cwd: staging, stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8', shell: process.platform === 'win32',
  });
  if (result.status !== 0 || !existsSync(binaryIn(staging))) {
    rmSync(staging, { recursive: true, force: true });
    throw new Error('could not install Node.js ' + major + ' from the npm registry (npm install node@' + major + '): ' + ((result.stderr || '').trim() || (result.error && result.error.message) || 'exit ' + result.status));
  }
  try {
    renameSync(staging, dir);
  } catch (err) {
    rmSync(staging, { recursive: true, force: true }); // another command installed it meanwhile
    if (!existsSync(binaryIn(dir))) throw err;
  }
  return binaryIn(dir);
}

/**
 * The Node.js binary to run agentgate with: this one when it is new enough, otherwise Node.js 22 from the
 * cache (installed on first use), announced in one line on stderr.
 */
export function supportedNode() {
  if (currentMajor >= MINIMUM_MAJOR) return process.execPath;
  const fresh = !existsSync(binaryIn(cacheDir(MINIMUM_MAJOR)));
  if (fresh) process.stderr.write('agentgate: this is Node.js ' + process.versions.node + ', agentgate needs ' + MINIMUM_MAJOR + ' or newer: installing Node.js ' + MINIMUM_MAJOR + ' from the npm registry into ' + cacheDir(MINIMUM_MAJOR) + ' (once) ...\n');
  const binary = installedNode(MINIMUM_MAJOR);
  if (!fresh) process.stderr.write('agentgate: this is Node.js ' + process.versions.node + '; running on Node.js ' + MINIMUM_MAJOR + ' from ' + cacheDir(MINIMUM_MAJOR) + ' (install 22 or newer, or `nvm use`, to use your own)\n');
  return binary;
}

/**
 * Runs `<node> <args>` as a child with this terminal, its bin folder first on PATH (so whatever it starts
 * with `node` or `npx` runs on it too), and leaves with its exit code. Signals sent to this process
 * (a supervisor's SIGTERM) are passed on; Ctrl-C reaches both through the terminal's process group.
 */
export function runOn(node, args) {
  const env = Object.assign({}, process.env, { PATH: dirname(node) + delimiter + (process.env.PATH || '') });
  const child = spawn(node, args, { stdio: 'inherit', env: env });
  const forward = (signal) => () => { if (child.exitCode === null) child.kill(signal); };
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, forward(signal));
  child.on('error', (err) => { console.error(err.message); process.exit(1); });
  child.on('exit', (code, signal) => {
    process.exit(signal ? 128 + (constants.signals[signal] || 0) : code === null ? 1 : code);
  });
}

function main(args) {
  if (args[0] === '--bin-dir') {
    console.log(dirname(installedNode(Number(args[1]))));
    return;
  }
  runOn(supportedNode(), args);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  try {
    main(process.argv.slice(2));
  } catch (err) {
    console.error('agentgate: ' + err.message);
    process.exitCode = 1;
  }
}
