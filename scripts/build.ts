// `npm run build` (also run by `prepare` and `prepack`): the wire package into packages/x402-wire/dist/,
// the seller package into seller/dist/ and the backend into dist/. A package's own build (its `npm run
// build` and `npm pack`) compiles only what it ships and needs: the wire package alone, or the wire and
// seller packages (`build.ts wire`, `build.ts seller`); packing the seller compiled the whole backend too. The seller library and the backend
// import the wire package by its name (`agentgate-x402-wire`), which their builds leave as it is: the
// published packages depend on the published wire package, and neither ships a copy of it.
//
// All are compiled into a staging folder of this build (.building/<pid>/) and moved into place only once
// everything compiled, each with two renames. A build that fails or is interrupted (a timed-out install
// that runs `prepare`, Ctrl-C) leaves the previous dist/ and seller/dist/ as they were: deleting them first
// and compiling in place left an empty seller/dist/ for the minute the next build took.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, renameSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleBackend } from './bundle.js';

export const STAGING_ROOT = '.building';
/** The wire package's name, as the seller library and the backend import it. */
export const WIRE_PACKAGE = 'agentgate-x402-wire';

/** The staging folders of builds whose process is gone (killed mid-build), removed so they do not pile up. */
export function removeAbandonedStaging(root: string): void {
  const staging = join(root, STAGING_ROOT);
  if (!existsSync(staging)) return;
  for (const name of readdirSync(staging)) {
    const pid = Number(name);
    if (Number.isInteger(pid) && pid !== process.pid && alive(pid)) continue;
    rmSync(join(staging, name), { recursive: true, force: true });
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Puts `built` where `target` is. rename() cannot replace a folder that has files, so the old one is moved
 * aside first (into `aside`, on the same file system) and removed after: only the instant between the two
 * renames has no `target`.
 */
export function swapIn(built: string, target: string, aside: string): void {
  rmSync(aside, { recursive: true, force: true });
  if (existsSync(target)) renameSync(target, aside);
  renameSync(built, target);
  rmSync(aside, { recursive: true, force: true });
}

function compile(root: string, project: string, outDir: string): void {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const result = spawnSync(process.execPath, [tsc, '-p', project, '--outDir', outDir], { cwd: root, stdio: 'inherit' });
  if (result.status !== 0) throw new Error(`tsc -p ${project} failed${result.signal ? ` (${result.signal})` : ''}`);
}

export const BUILD_PARTS = ['wire', 'seller', 'backend'] as const;
/** In dist/: when the sources it was compiled from were read (bin/agentgate.js compares them with it). */
export const BUILD_INFO = 'build-info.json';

/** Writes dist/build-info.json: `sourcesAt`, the time (ms) the build began reading the sources. */
export function writeBuildInfo(dist: string, sourcesAt: number): void {
  writeFileSync(join(dist, BUILD_INFO), JSON.stringify({ sourcesAt }) + '\n');
}
export type BuildPart = (typeof BUILD_PARTS)[number];

/** Builds `parts` (and the wire package, which the others compile against): everything by default. */
export function build(root: string, parts: readonly BuildPart[] = BUILD_PARTS): void {
  // Before anything is read: a source saved while the build runs is newer than the build (bin/agentgate.js).
  const sourcesAt = Date.now();
  removeAbandonedStaging(root);
  const staging = join(root, STAGING_ROOT, String(process.pid));
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });
  try {
    const wire = { project: 'packages/x402-wire/tsconfig.json', built: join(staging, 'wire-dist'), target: join(root, 'packages', 'x402-wire', 'dist') };
    compile(root, wire.project, wire.built);
    // The seller package and the backend compile against the wire package just built (its declarations),
    // not its sources: what they emit imports it by name, and none of its files are emitted with them.
    const againstWire = (project: string) => {
      const config = join(staging, `${project.replace(/[/.]/g, '-')}.json`);
      writeFileSync(config, JSON.stringify({ extends: join(root, project), compilerOptions: { paths: { [WIRE_PACKAGE]: [join(wire.built, 'index.d.ts')] } } }));
      return config;
    };
    const outputs = [
      ...(parts.includes('seller') ? [{ project: againstWire('seller/tsconfig.json'), built: join(staging, 'seller-dist'), target: join(root, 'seller', 'dist') }] : []),
      ...(parts.includes('backend') ? [{ project: againstWire('tsconfig.build.json'), built: join(staging, 'dist'), target: join(root, 'dist') }] : []),
    ];
    for (const output of outputs) compile(root, output.project, output.built);
    // What `agentgate` runs: the command line and the server bundled with their dependencies (bundle.ts).
    if (parts.includes('backend')) bundleBackend(root, join(staging, 'dist'));
    // A checkout's `agentgate` runs this build instead of the sources through tsx (seconds less at every
    // start) while no source is newer than this time.
    if (parts.includes('backend')) writeBuildInfo(join(staging, 'dist'), sourcesAt);
    for (const output of [wire, ...outputs]) swapIn(output.built, output.target, join(staging, 'previous'));
  } finally {
    rmSync(staging, { recursive: true, force: true });
    try {
      rmdirSync(join(root, STAGING_ROOT));
    } catch {
      // another build's staging is still in there
    }
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    // `build.ts seller` (the seller package's build): the wire and seller packages; `build.ts wire`: the wire package.
    const asked = process.argv.slice(2);
    const unknown = asked.filter((part) => !(BUILD_PARTS as readonly string[]).includes(part));
    if (unknown.length) throw new Error(`unknown part ${unknown.join(', ')}: give any of ${BUILD_PARTS.join(', ')}, or nothing for all`);
    build(resolve(dirname(fileURLToPath(import.meta.url)), '..'), asked.length ? asked as BuildPart[] : BUILD_PARTS);
  } catch (err) {
    console.error(`build failed, dist/, seller/dist/ and packages/x402-wire/dist/ left as they were: ${(err as Error).message}`);
    process.exitCode = 1;
  }
}
