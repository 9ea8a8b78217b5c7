// The layout's import rules (scripts/check-imports.ts), held by the suite so CI runs them: no import
// circles in middleware/, adapters/ and server/; platform/ imports no area; production code never loads
// the dev harness; the seller package never imports the backend.
import { importCircles, importGraph, layerViolations, type ImportEdge } from '../scripts/check-imports.js';

const edges = importGraph(process.cwd());

test('the import graph covers the code', () => {
  expect(edges.length).toBeGreaterThan(500);
  expect(edges).toContainEqual({ from: 'server/cli/main.ts', to: 'server/dev/run-dev.ts', dynamic: true });
});

test('has no import circles', () => {
  expect(importCircles(edges)).toEqual([]);
});

test('keeps platform/ below the areas, the dev harness out of production, and the seller package off the backend', () => {
  expect(layerViolations(edges)).toEqual([]);
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
