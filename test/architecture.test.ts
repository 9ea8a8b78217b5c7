// The layout's import rules (scripts/check-imports.ts), held by the suite so CI runs them: no import
// circles in middleware/, adapters/ and server/; platform/ imports no area; production code never loads
// the dev harness; the seller package never imports the backend; each package declares what it imports;
// only the composition root and the entry points import the composition root (areas take what they use);
// no import runs back up through MCP; the webhook engine imports no area. And the scheme layout
// (scripts/check-schemes.ts): one folder per scheme and side with the same files, one name per scheme.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { dependencyViolations, importCircles, importGraph, layerViolations, type ImportEdge } from '../scripts/check-imports.js';
import { driftingSchemeNames, schemeLayoutProblems, SCHEMES, SIDES } from '../scripts/check-schemes.js';

const edges = importGraph(process.cwd());

test('the import graph covers the code', () => {
  expect(edges.length).toBeGreaterThan(500);
  expect(edges).toContainEqual({ from: 'server/cli/main.ts', to: 'server/dev/run-dev.ts', dynamic: true });
});

test('has no import circles', () => {
  expect(importCircles(edges)).toEqual([]);
});

test('keeps platform/ below the areas, the dev harness out of production, the seller package off the backend, and the areas off the composition root', () => {
  expect(layerViolations(edges)).toEqual([]);
});

test('the checker finds an area that imports the composition root, and lets the root and the entry points do so', () => {
  const edge = (from: string, to: string): ImportEdge => ({ from, to, dynamic: false });
  expect(layerViolations([
    edge('server/mail/routes.ts', 'server/context.ts'),
    edge('server/console/routes.ts', 'server/app.ts'),
    edge('server/mcp/server.ts', 'server/server.ts'),
    edge('server/app.ts', 'server/context.ts'),
    edge('server/server.ts', 'server/app.ts'),
    edge('server/cli/admin-commands.ts', 'server/context.ts'),
    edge('server/dev/faucet.ts', 'server/context.ts'),
    edge('server/mail/routes.ts', 'server/mail/mail-service.ts'),
  ])).toEqual([
    'server/mail/routes.ts -> server/context.ts: an area takes the services it uses as parameters and does not import the composition root',
    'server/console/routes.ts -> server/app.ts: an area takes the services it uses as parameters and does not import the composition root',
    'server/mcp/server.ts -> server/server.ts: an area takes the services it uses as parameters and does not import the composition root',
  ]);
});

test('an area file that imports the AppContext type, even type-only, fails the check', () => {
  const root = mkdtempSync(join(tmpdir(), 'agentgate-layers-'));
  const write = (file: string, text: string) => { mkdirSync(dirname(join(root, file)), { recursive: true }); writeFileSync(join(root, file), text); };
  try {
    write('middleware/core.ts', 'export const core = 1;\n');
    write('adapters/hono.ts', "import { core } from '../middleware/core.js';\n");
    write('server/context.ts', 'export interface AppContext { mail: unknown }\n');
    write('server/app.ts', "import type { AppContext } from './context.js';\nimport { vaultRoutes } from './vault/routes.js';\n");
    write('server/vault/routes.ts', "// The route used to take the whole context: import type { AppContext } from '../context.js';\nexport function vaultRoutes(deps: { vault: unknown }) { return deps; }\n");
    write('server/mail/routes.ts', "import type { AppContext } from '../context.js';\nexport function mailRoutes(app: AppContext) { return app.mail; }\n");
    expect(layerViolations(importGraph(root))).toEqual([
      'server/mail/routes.ts -> server/context.ts: an area takes the services it uses as parameters and does not import the composition root',
    ]);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('the checker finds a circle and each kind of layering violation', () => {
  const edge = (from: string, to: string, dynamic = false): ImportEdge => ({ from, to, dynamic });
  expect(importCircles([edge('a.ts', 'b.ts'), edge('b.ts', 'c.ts'), edge('c.ts', 'a.ts'), edge('c.ts', 'd.ts')])).toEqual([['a.ts', 'b.ts', 'c.ts']]);
  expect(layerViolations([
    edge('server/platform/config.ts', 'server/mail/mail-service.ts'),
    edge('server/server.ts', 'server/dev/faucet.ts'),
    edge('server/cli/main.ts', 'server/dev/run-dev.ts'),
    edge('middleware/paywall.ts', 'server/context.ts'),
    edge('server/cli/main.ts', 'server/dev/run-dev.ts', true),
  ])).toHaveLength(4);
});

test('the checker holds the wire package apart: imported by its name only, importing nothing of ours, and the backend off the seller library', () => {
  const edge = (from: string, to: string): ImportEdge => ({ from, to, dynamic: false });
  expect(layerViolations([
    edge('server/payments/receipts.ts', 'middleware/paywall.ts'),
    edge('server/buyer/pay-service.ts', 'adapters/express.ts'),
    edge('server/payments/receipts.ts', 'packages/x402-wire/src/receipt.ts'),
    edge('middleware/paywall.ts', 'packages/x402-wire/src/codec/v2.ts'),
    edge('packages/x402-wire/src/challenge.ts', 'middleware/route-pricing.ts'),
    edge('packages/x402-wire/src/price.ts', 'server/platform/errors.ts'),
    // What is allowed: the name (its entry point), and the wire package's own files among themselves.
    edge('server/payments/receipts.ts', 'packages/x402-wire/src/index.ts'),
    edge('middleware/paywall.ts', 'packages/x402-wire/src/index.ts'),
    edge('packages/x402-wire/src/challenge.ts', 'packages/x402-wire/src/codec/v2.ts'),
  ])).toEqual([
    'server/payments/receipts.ts -> middleware/paywall.ts: the backend does not import the seller library; what both speak is in agentgate-x402-wire',
    'server/buyer/pay-service.ts -> adapters/express.ts: the backend does not import the seller library; what both speak is in agentgate-x402-wire',
    'server/payments/receipts.ts -> packages/x402-wire/src/receipt.ts: the wire package is imported by its name (agentgate-x402-wire), not by a path into its sources',
    'middleware/paywall.ts -> packages/x402-wire/src/codec/v2.ts: the wire package is imported by its name (agentgate-x402-wire), not by a path into its sources',
    'packages/x402-wire/src/challenge.ts -> middleware/route-pricing.ts: the wire package imports nothing of the seller library or the backend',
    'packages/x402-wire/src/price.ts -> server/platform/errors.ts: the wire package imports nothing of the seller library or the backend',
  ]);
});

test('a planted import of the seller library from the backend, or a path into the wire package, fails the check of real files', () => {
  const root = mkdtempSync(join(tmpdir(), 'agentgate-wire-'));
  const write = (file: string, text: string) => { mkdirSync(dirname(join(root, file)), { recursive: true }); writeFileSync(join(root, file), text); };
  try {
    write('packages/x402-wire/src/index.ts', "export * from './price.js';\n");
    write('packages/x402-wire/src/price.ts', 'export const parsePrice = (s: string) => BigInt(s);\n');
    write('middleware/price-view.ts', "export { parsePrice } from 'agentgate-x402-wire';\n");
    write('server/payments/amounts.ts', "import { parsePrice } from 'agentgate-x402-wire';\nexport const cents = parsePrice('1');\n");
    write('server/payments/planted.ts', "import { parsePrice } from '../../middleware/price-view.js';\nimport { parsePrice as p } from '../../packages/x402-wire/src/price.js';\nexport const both = [parsePrice, p];\n");
    expect(layerViolations(importGraph(root))).toEqual([
      'server/payments/planted.ts -> middleware/price-view.ts: the backend does not import the seller library; what both speak is in agentgate-x402-wire',
      'server/payments/planted.ts -> packages/x402-wire/src/price.ts: the wire package is imported by its name (agentgate-x402-wire), not by a path into its sources',
    ]);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('each package declares what its code imports', () => {
  expect(dependencyViolations(process.cwd())).toEqual([]);
});

test('the dependency check finds an undeclared import, an unused or required-peer declaration, and a backend import left to devDependencies', () => {
  const root = mkdtempSync(join(tmpdir(), 'agentgate-deps-'));
  const write = (file: string, text: string) => { mkdirSync(dirname(join(root, file)), { recursive: true }); writeFileSync(join(root, file), text); };
  try {
    write('middleware/core.ts', "import { z } from 'zod';\nimport { createHash } from 'node:crypto';\nimport { keccak256 } from 'viem';\n// import { x } from 'commented-out';\n");
    write('adapters/hono.ts', "import type { MiddlewareHandler } from 'hono';\nimport { fromCore } from '../middleware/core.js';\n");
    write('server/app.ts', "import Koa from 'koa';\nimport { Schema } from 'mongoose';\nimport '@scope/side-effect/register';\n");
    write('seller/package.json', JSON.stringify({ name: 'seller-pkg', dependencies: { zod: '^4', 'left-pad': '^1' }, peerDependencies: { hono: '^4' } }));
    write('package.json', JSON.stringify({ name: 'backend-pkg', dependencies: { koa: '3', '@scope/side-effect': '1' }, devDependencies: { mongoose: '9' } }));
    write('packages/x402-wire/src/index.ts', "import { z } from 'zod';\nimport { ed25519 } from '@noble/curves/ed25519';\n");
    write('packages/x402-wire/package.json', JSON.stringify({ name: 'agentgate-x402-wire', dependencies: { zod: '^4', '@noble/hashes': '^2' } }));
    expect(dependencyViolations(root).sort()).toEqual([
      'middleware/core.ts imports viem: not in seller/package.json',
      'package.json does not depend on the wire package agentgate-x402-wire',
      'packages/x402-wire/package.json depends on @noble/hashes, which its sources do not import',
      'packages/x402-wire/src/index.ts imports @noble/curves: not in packages/x402-wire/package.json',
      'seller/package.json depends on left-pad, which middleware/ and adapters/ do not import',
      'seller/package.json: the peer dependency hono is not optional',
      'server/app.ts imports mongoose: not in the dependencies of package.json',
    ]);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('planted imports back up through MCP, or from the webhook engine into an area, fail the check of real files', () => {
  const root = mkdtempSync(join(tmpdir(), 'agentgate-upward-'));
  const write = (file: string, text: string) => { mkdirSync(dirname(join(root, file)), { recursive: true }); writeFileSync(join(root, file), text); };
  try {
    write('server/platform/mcp-tool.ts', 'export interface ToolDefinition { name: string }\nexport const toolDefiner = () => (t: ToolDefinition) => t;\n');
    write('server/mcp/routes.ts', "import type { ToolDefinition } from '../platform/mcp-tool.js';\nexport function mcpRoutes(tools: ToolDefinition[]) { return tools; }\n");
    write('server/mail/tools.ts', "import { toolDefiner } from '../platform/mcp-tool.js';\nexport const mailTools = [toolDefiner()({ name: 'mail_send' })];\n");
    write('server/tools.ts', "import { mailTools } from './mail/tools.js';\nexport const TOOLS = [...mailTools];\n");
    write('server/app.ts', "import { mcpRoutes } from './mcp/routes.js';\nimport { TOOLS } from './tools.js';\nexport const mcp = mcpRoutes(TOOLS);\n");
    write('server/payments/models.ts', 'export interface PaymentDoc { _id: string }\n');
    write('server/webhooks/models.ts', 'export interface DeliveryDoc { _id: string }\n');
    write('server/webhooks/webhook-service.ts', "import type { DeliveryDoc } from './models.js';\nimport { isDuplicateKey } from '../platform/errors.js';\nexport type D = DeliveryDoc; export const dup = isDuplicateKey;\n");
    write('server/platform/errors.ts', 'export const isDuplicateKey = () => false;\n');
    // What is allowed above; the violations planted below.
    expect(layerViolations(importGraph(root))).toEqual([]);
    write('server/calendar/tools.ts', "import { mcpRoutes } from '../mcp/routes.js';\nexport const calendarTools = mcpRoutes([]);\n");
    write('server/agent-card/routes.ts', "import { TOOLS } from '../tools.js';\nexport const skills = TOOLS.map((t) => t.name);\n");
    write('server/mcp/server.ts', "import { TOOLS } from '../tools.js';\nexport const served = TOOLS;\n");
    write('server/webhooks/payment-outbox.ts', "import type { PaymentDoc } from '../payments/models.js';\nexport type Entry = PaymentDoc;\n");
    expect(layerViolations(importGraph(root)).sort()).toEqual([
      'server/agent-card/routes.ts -> server/tools.ts: the tool registry is the composition root\'s; an area or the MCP server is handed the tools it serves',
      'server/calendar/tools.ts -> server/mcp/routes.ts: only the composition root imports the MCP server; an area\'s tools use the kit (server/platform/mcp-tool.ts) and are gathered by server/tools.ts',
      'server/mcp/server.ts -> server/tools.ts: the tool registry is the composition root\'s; an area or the MCP server is handed the tools it serves',
      'server/webhooks/payment-outbox.ts -> server/payments/models.ts: server/webhooks/ is a generic delivery engine and imports no area (the area hands it deliveries through DeliveryQueue)',
    ]);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('every scheme has one folder per side with the same file names, and is called by its x402 name', () => {
  expect(schemeLayoutProblems(process.cwd())).toEqual([]);
  expect(driftingSchemeNames(process.cwd())).toEqual([]);
});

test('a scheme missing a side\'s file, a folder that is not a scheme, or a scheme called by a drifting name fails the check', () => {
  const root = mkdtempSync(join(tmpdir(), 'schemes-'));
  try {
    for (const { dir, files } of SIDES) {
      for (const scheme of SCHEMES) {
        for (const file of files) {
          const path = join(root, dir, scheme, 'evm', file);
          mkdirSync(dirname(path), { recursive: true });
          writeFileSync(path, 'export {};\n');
        }
      }
    }
    expect(schemeLayoutProblems(root)).toEqual([]);
    rmSync(join(root, 'server/buyer/schemes/upto/evm/payer.ts'));
    // A second chain family for one scheme: its other sides must have it too.
    mkdirSync(join(root, 'packages/x402-wire/src/schemes/exact/svm'), { recursive: true });
    for (const file of ['wire.ts', 'challenge.ts', 'reasons.ts']) writeFileSync(join(root, 'packages/x402-wire/src/schemes/exact/svm', file), 'export {};\n');
    mkdirSync(join(root, 'server/payments/schemes/channel/evm'), { recursive: true });
    writeFileSync(join(root, 'server/payments/schemes/auth-capture/evm/facilitator.ts'), 'export class EscrowFacilitator {}\nexport const channelPayer = 1;\nexport type ChannelConfig = {};\n');
    expect(schemeLayoutProblems(root)).toEqual([
      'middleware/schemes/exact/svm/seller.ts is missing: every scheme\'s seller side has seller.ts',
      'server/payments/schemes/channel: not a scheme (exact, upto, auth-capture, batch-settlement); name it by its x402 scheme',
      ...['scheme.ts', 'verify.ts', 'settle.ts', 'facilitator.ts', 'chain.ts'].map((file) => `server/payments/schemes/exact/svm/${file} is missing: every scheme's facilitator side has scheme.ts, verify.ts, settle.ts, facilitator.ts, chain.ts`),
      'server/buyer/schemes/exact/svm/payer.ts is missing: every scheme\'s buyer side has payer.ts',
      'server/buyer/schemes/upto/evm/payer.ts is missing: every scheme\'s buyer side has payer.ts',
    ]);
    expect(driftingSchemeNames(root)).toEqual([
      'server/payments/schemes/auth-capture/evm/facilitator.ts: EscrowFacilitator',
      'server/payments/schemes/auth-capture/evm/facilitator.ts: channelPayer',
    ]);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
