// The architecture's import rules, checked over the import graph of middleware/, adapters/ and server/
// (type-only imports included: a circle through types is still a circle a reader has to untangle).
//   1. No import circles.
//   2. server/platform/ is infrastructure: it imports no area and nothing above it.
//   3. Production code never loads the dev harness (server/dev/): nothing outside it imports it, except
//      the CLI's `dev` command through a dynamic import.
//   4. The middleware and adapters (the seller package) never import the backend.
//   5. Each package declares what its code imports: the wire package what its sources import; the seller package (seller/package.json) what
//      middleware/ and adapters/ import, as dependencies or optional peer dependencies (the frameworks),
//      with no dependency that nothing imports (a seller installs every one of them); the backend (the
//      root package.json) what server/ and contracts/ import, in dependencies or optionalDependencies
//      (devDependencies are not installed with it), and the wire package.
//   6. Areas name what they use: only the composition root (server/context.ts, app.ts, server.ts) and the
//      entry points (server/cli/, server/dev/) import the composition root. An area's route, job or tool
//      set takes the services it uses as parameters, so it never imports AppContext (nor app.ts or
//      server.ts, which hand it around).
//   7. The wire package (packages/x402-wire/, agentgate-x402-wire) imports nothing of ours; the seller
//      library and the backend import it by its name only; the backend imports nothing of the seller library.
//   8. No import runs back up through MCP: the tool kit every area's tools.ts uses is in platform/
//      (platform/mcp-tool.ts); the MCP server (server/mcp/) is imported by the composition root alone, and
//      the registry of every area's tools (server/tools.ts) sits beside it and is imported by it alone.
//   9. server/webhooks/ is a generic delivery engine: it imports no area (each area keeps its outbox and
//      hands the engine its deliveries; the composition root tells it where an endpoint's deliveries go).
// Run by `npm run lint` and by test/architecture.test.ts (so CI runs it with the suite).
import { readFileSync, readdirSync, statSync, existsSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface ImportEdge { from: string; to: string; dynamic: boolean }

const WIRE_DIR = 'packages/x402-wire/src';
/** The wire package's name; its one entry point is its index. */
export const WIRE_PACKAGE = 'agentgate-x402-wire';
const WIRE_ENTRY = `${WIRE_DIR}/index.ts`;
const ROOTS = [WIRE_DIR, 'middleware', 'adapters', 'server'];
const SPECIFIER = /(?:^|[^\w$.])(?:import|export)\s[^'";]*?from\s*['"](\.{1,2}\/[^'"]+)['"]|(?:^|[^\w$.])import\s*['"](\.{1,2}\/[^'"]+)['"]|(?:^|[^\w$.])import\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*\)/gm;

const PACKAGE_SPECIFIER = /(?:^|[^\w$.])(?:import|export)\s[^'";]*?from\s*['"]([^'"./][^'"]*)['"]|(?:^|[^\w$.])import\s*['"]([^'"./][^'"]*)['"]|(?:^|[^\w$.])import\(\s*['"]([^'"./][^'"]*)['"]\s*\)/gm;

/** A file's code without its comments (comments can quote import lines; only code counts). */
function codeOf(root: string, file: string): string {
  return readFileSync(join(root, file), 'utf8').replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
}

function sourceFiles(root: string, dir: string): string[] {
  return readdirSync(join(root, dir)).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(join(root, path)).isDirectory()) return sourceFiles(root, path);
    return path.endsWith('.ts') && !path.endsWith('.d.ts') ? [path] : [];
  });
}

/** Every relative import between our TypeScript files, `a.ts -> b.ts`, paths relative to the repository. */
export function importGraph(root: string): ImportEdge[] {
  const edges: ImportEdge[] = [];
  for (const file of ROOTS.filter((dir) => existsSync(join(root, dir))).flatMap((dir) => sourceFiles(root, dir))) {
    const code = codeOf(root, file);
    for (const match of code.matchAll(SPECIFIER)) {
      const specifier = match[1] ?? match[2] ?? match[3]!;
      const target = relative(root, resolve(root, dirname(file), specifier.replace(/\.js$/, '.ts')));
      if (existsSync(join(root, target))) edges.push({ from: file, to: target, dynamic: match[3] !== undefined });
    }
    // The wire package by its name: an edge to its entry point.
    for (const match of code.matchAll(PACKAGE_SPECIFIER)) {
      if ((match[1] ?? match[2] ?? match[3]) === WIRE_PACKAGE) edges.push({ from: file, to: WIRE_ENTRY, dynamic: match[3] !== undefined });
    }
  }
  return edges;
}

/** The import circles (Tarjan's strongly connected components of two or more files, or a self-import). */
export function importCircles(edges: ImportEdge[]): string[][] {
  const next = new Map<string, string[]>();
  for (const { from, to } of edges) next.set(from, [...(next.get(from) ?? []), to]);
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const circles: string[][] = [];
  let counter = 0;
  const visit = (node: string) => {
    index.set(node, counter); low.set(node, counter); counter++;
    stack.push(node); onStack.add(node);
    for (const to of next.get(node) ?? []) {
      if (!index.has(to)) { visit(to); low.set(node, Math.min(low.get(node)!, low.get(to)!)); }
      else if (onStack.has(to)) low.set(node, Math.min(low.get(node)!, index.get(to)!));
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string;
      do { member = stack.pop()!; onStack.delete(member); component.push(member); } while (member !== node);
      if (component.length > 1 || (next.get(node) ?? []).includes(node)) circles.push(component.sort());
    }
  };
  for (const node of next.keys()) if (!index.has(node)) visit(node);
  return circles;
}

/** The composition root: it builds the AppContext and hands each area the services it uses. */
const COMPOSITION_ROOT = ['server/context.ts', 'server/app.ts', 'server/server.ts'];

/** Files that may import the composition root: the root itself and the entry points. */
function knowsTheContext(file: string): boolean {
  return COMPOSITION_ROOT.includes(file) || file.startsWith('server/cli/') || file.startsWith('server/dev/');
}

/** The registry of every area's MCP tools (rule 8). */
const TOOL_REGISTRY = 'server/tools.ts';

/** Imports that break rules 2 to 4 and 6 to 9, each as `from -> to: why`. */
export function layerViolations(edges: ImportEdge[]): string[] {
  const broken: string[] = [];
  const inWire = (file: string) => file.startsWith(`${WIRE_DIR}/`);
  for (const { from, to, dynamic } of edges) {
    if (from.startsWith('server/platform/') && !to.startsWith('server/platform/') && !inWire(to)) {
      broken.push(`${from} -> ${to}: server/platform/ is infrastructure and imports no area`);
    }
    if (inWire(from) && !inWire(to)) {
      broken.push(`${from} -> ${to}: the wire package imports nothing of the seller library or the backend`);
    }
    if (!inWire(from) && inWire(to) && to !== WIRE_ENTRY) {
      broken.push(`${from} -> ${to}: the wire package is imported by its name (${WIRE_PACKAGE}), not by a path into its sources`);
    }
    if (from.startsWith('server/') && (to.startsWith('middleware/') || to.startsWith('adapters/'))) {
      broken.push(`${from} -> ${to}: the backend does not import the seller library; what both speak is in ${WIRE_PACKAGE}`);
    }
    if (to.startsWith('server/dev/') && !from.startsWith('server/dev/') && !(from === 'server/cli/main.ts' && dynamic)) {
      broken.push(`${from} -> ${to}: production code never imports the dev harness`);
    }
    if ((from.startsWith('middleware/') || from.startsWith('adapters/')) && to.startsWith('server/')) {
      broken.push(`${from} -> ${to}: the seller package does not import the backend`);
    }
    if (from.startsWith('server/') && COMPOSITION_ROOT.includes(to) && !knowsTheContext(from)) {
      broken.push(`${from} -> ${to}: an area takes the services it uses as parameters and does not import the composition root`);
    }
    if (to.startsWith('server/mcp/') && !from.startsWith('server/mcp/') && !COMPOSITION_ROOT.includes(from)) {
      broken.push(`${from} -> ${to}: only the composition root imports the MCP server; an area's tools use the kit (server/platform/mcp-tool.ts) and are gathered by ${TOOL_REGISTRY}`);
    }
    if (to === TOOL_REGISTRY && !knowsTheContext(from)) {
      broken.push(`${from} -> ${to}: the tool registry is the composition root's; an area or the MCP server is handed the tools it serves`);
    }
    if (from.startsWith('server/webhooks/') && to.startsWith('server/') && !to.startsWith('server/webhooks/') && !to.startsWith('server/platform/')) {
      broken.push(`${from} -> ${to}: server/webhooks/ is a generic delivery engine and imports no area (the area hands it deliveries through DeliveryQueue)`);
    }
  }
  return broken;
}

/** The npm packages the TypeScript files under `dirs` import (type-only imports included), each with its first importer. */
export function packageImports(root: string, dirs: string[]): Map<string, string> {
  const packages = new Map<string, string>();
  for (const file of dirs.filter((dir) => existsSync(join(root, dir))).flatMap((dir) => sourceFiles(root, dir))) {
    for (const match of codeOf(root, file).matchAll(PACKAGE_SPECIFIER)) {
      const specifier = match[1] ?? match[2] ?? match[3]!;
      if (specifier.startsWith('node:') || builtinModules.includes(specifier.split('/')[0]!)) continue;
      const name = specifier.split('/').slice(0, specifier.startsWith('@') ? 2 : 1).join('/');
      if (!packages.has(name)) packages.set(name, file);
    }
  }
  return packages;
}

interface Manifest {
  name: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

/** Imports a package does not declare, and declarations it does not need (rule 5), each as one line. */
export function dependencyViolations(root: string): string[] {
  const seller = JSON.parse(readFileSync(join(root, 'seller', 'package.json'), 'utf8')) as Manifest;
  const backend = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as Manifest;
  const wireManifest = join(root, 'packages', 'x402-wire', 'package.json');
  const wire = (existsSync(wireManifest) ? JSON.parse(readFileSync(wireManifest, 'utf8')) : { name: WIRE_PACKAGE }) as Manifest;
  const broken: string[] = [];
  const wireImports = packageImports(root, [WIRE_DIR]);
  for (const [name, file] of wireImports) {
    if (!wire.dependencies?.[name]) broken.push(`${file} imports ${name}: not in packages/x402-wire/package.json`);
  }
  for (const name of Object.keys(wire.dependencies ?? {})) {
    if (!wireImports.has(name)) broken.push(`packages/x402-wire/package.json depends on ${name}, which its sources do not import`);
  }
  const sellerImports = packageImports(root, ['middleware', 'adapters']);
  for (const [name, file] of sellerImports) {
    if (!seller.dependencies?.[name] && !seller.peerDependencies?.[name]) broken.push(`${file} imports ${name}: not in seller/package.json`);
  }
  for (const name of Object.keys(seller.dependencies ?? {})) {
    if (!sellerImports.has(name)) broken.push(`seller/package.json depends on ${name}, which middleware/ and adapters/ do not import`);
  }
  for (const name of Object.keys(seller.peerDependencies ?? {})) {
    if (!seller.peerDependenciesMeta?.[name]?.optional) broken.push(`seller/package.json: the peer dependency ${name} is not optional`);
  }
  for (const [name, file] of packageImports(root, ['server', 'contracts'])) {
    if (!backend.dependencies?.[name] && !backend.optionalDependencies?.[name]) broken.push(`${file} imports ${name}: not in the dependencies of package.json`);
  }
  if (backend.dependencies?.[wire.name] === undefined) broken.push(`package.json does not depend on the wire package ${wire.name}`);
  return broken;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
  const edges = importGraph(root);
  const circles = importCircles(edges);
  const violations = [...layerViolations(edges), ...dependencyViolations(root)];
  for (const circle of circles) console.error(`import circle: ${circle.join(' <-> ')}`);
  for (const violation of violations) console.error(`layering: ${violation}`);
  console.log(`imports: ${edges.length} edges checked, ${circles.length} circles, ${violations.length} layering and dependency violations`);
  process.exitCode = circles.length || violations.length ? 1 : 0;
}
