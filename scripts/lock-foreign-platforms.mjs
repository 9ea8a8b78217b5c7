#!/usr/bin/env node
// Adds lockfile entries for platform-specific optional packages (darwin, win32, arm, ...) that the
// package registry reachable here does not serve. Without them `npm ci` refuses the lockfile as "out of
// sync"; with them, npm skips each one on a machine whose os/cpu does not match, exactly as it does with
// a lockfile written against the full registry. Run after any `npm install` that rewrites the lockfile.
import { readFileSync, writeFileSync } from 'node:fs';

const file = new URL('../package-lock.json', import.meta.url);
const lock = JSON.parse(readFileSync(file, 'utf8'));
const packages = lock.packages;

const CPU = { amd64: 'x64', x64: 'x64', arm64: 'arm64', arm: 'arm', ia32: 'ia32', ppc64: 'ppc64', s390x: 's390x', loong64: 'loong64', riscv64: 'riscv64' };
const OS = ['darwin', 'linux', 'win32', 'android', 'freebsd', 'openharmony'];

function platformOf(name) {
  const parts = name.split('/').pop().split('-');
  const os = parts.find((p) => OS.includes(p));
  const cpu = parts.slice(parts.indexOf(os) + 1).map((p) => CPU[p]).find(Boolean);
  return os && cpu ? { os: [os], cpu: [cpu] } : undefined;
}

let added = 0;
for (const [path, pkg] of Object.entries(packages)) {
  for (const [dep, version] of Object.entries(pkg.optionalDependencies ?? {})) {
    const target = `node_modules/${dep}`;
    if (packages[target] || packages[`${path}/node_modules/${dep}`]) continue;
    const platform = platformOf(dep);
    if (!platform) continue;
    packages[target] = { version, ...platform, optional: true, ...(pkg.dev ? { dev: true } : {}) };
    added++;
  }
}
writeFileSync(file, `${JSON.stringify(lock, null, 2)}\n`);
console.log(`added ${added} foreign-platform optional entries to package-lock.json`);
