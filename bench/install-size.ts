/**
 * What a seller installs: our seller package and the wire package it depends on (packed from this checkout, as npm would publish them) with
 * Express, against the official x402 v2 seller stack (`@x402/express`, `@x402/core`, `@x402/evm`) with
 * Express, each installed by `npm install` from the registry into its own empty folder under the temp
 * directory. Versions are the ones this repository uses (its devDependencies). Size is `du -sk` of
 * node_modules (what the install takes on disk); packages are the installed package folders, nested
 * ones included.
 *
 *   npx tsx bench/install-size.ts
 *
 * Unlike the tests, this downloads (from the registry, or npm's cache).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..');
const { devDependencies } = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> };
const versionOf = (name: string) => `${name}@${devDependencies[name]!}`;

interface Install { megabytes: number; packages: number }

/** Installed package folders under a node_modules, nested node_modules included. */
function countPackages(modules: string): number {
  if (!existsSync(modules)) return 0;
  let count = 0;
  for (const entry of readdirSync(modules, { withFileTypes: true })) {
    if (entry.name.startsWith('.') || !entry.isDirectory()) continue;
    const dirs = entry.name.startsWith('@')
      ? readdirSync(join(modules, entry.name), { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => join(modules, entry.name, d.name))
      : [join(modules, entry.name)];
    for (const dir of dirs) {
      if (existsSync(join(dir, 'package.json'))) count++;
      count += countPackages(join(dir, 'node_modules'));
    }
  }
  return count;
}

function install(root: string, name: string, specs: string[]): Install {
  const dir = join(root, name);
  mkdirSync(dir);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: `install-size-${name}`, private: true, type: 'module' }));
  execFileSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', ...specs], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
  const kilobytes = Number(execFileSync('du', ['-sk', 'node_modules'], { cwd: dir, encoding: 'utf8' }).split('\t')[0]);
  return { megabytes: kilobytes / 1024, packages: countPackages(join(dir, 'node_modules')) };
}

const root = mkdtempSync(join(tmpdir(), 'agentgate-install-size-'));
try {
  // The seller package as it would be published: `npm pack` runs its prepack build (its output is kept
  // out of the report; a failure throws with it).
  // The wire package it depends on is packed beside it (it is not on the registry from a checkout).
  const pack = (dir: string) => {
    const packed = execFileSync('npm', ['pack', '--json', '--pack-destination', root], { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    return join(root, (JSON.parse(packed.slice(packed.indexOf('\n[') + 1)) as Array<{ filename: string }>)[0]!.filename);
  };
  const seller = pack(join(repo, 'seller'));
  const wire = pack(join(repo, 'packages', 'x402-wire'));
  const ours = install(root, 'agentgate', [seller, wire, versionOf('express')]);
  const official = install(root, 'official', [versionOf('@x402/express'), versionOf('@x402/core'), versionOf('@x402/evm'), versionOf('express')]);
  console.log(`seller install: agentgate ${ours.megabytes.toFixed(1)} MB / ${ours.packages} packages, official ${official.megabytes.toFixed(1)} MB / ${official.packages} packages`);
  console.log(`ratio agentgate/official: size ${(ours.megabytes / official.megabytes).toFixed(2)}, packages ${(ours.packages / official.packages).toFixed(2)} (target: below 1)`);
} finally {
  rmSync(root, { recursive: true, force: true });
}
