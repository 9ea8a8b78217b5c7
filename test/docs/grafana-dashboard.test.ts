// docs/operators/grafana-dashboard.json is what an operator imports into Grafana: it must stay importable (the
// DS_PROMETHEUS input every panel uses), and its queries must name the metrics and labels the processes
// really export, so a renamed metric or a new one without a panel fails here rather than on a dashboard.
import { readFileSync } from 'node:fs';
import { Metrics } from '../../server/platform/metrics.js';

const dashboard = JSON.parse(readFileSync('docs/operators/grafana-dashboard.json', 'utf8'));
const rulesFile = JSON.parse(readFileSync('docs/operators/grafana-alert-rules.json', 'utf8'));
const alertRules: any[] = rulesFile.groups.flatMap((g: any) => g.rules);
const panels: any[] = dashboard.panels.filter((p: any) => p.type !== 'row');
const targets: Array<{ panel: string; expr: string }> = panels.flatMap((p) => p.targets.map((t: any) => ({ panel: p.title, expr: t.expr })));

const registry = new Metrics().exposed();
const exported = new Map(registry.getMetricsAsArray().map((m) => [m.name, m as unknown as { name: string; labelNames: string[]; type?: unknown }]));
/** The metrics agentgate defines itself (prom-client's process and Node.js defaults aside). */
const own = [...exported.keys()].filter((name) => !/^agentgate_(process|nodejs)_/.test(name));

/** agentgate_x_bucket / _sum / _count are series of the histogram agentgate_x. */
const baseOf = (series: string) => (exported.has(series) ? series : series.replace(/_(bucket|sum|count)$/, ''));
const metricsIn = (expr: string) => [...expr.matchAll(/\bagentgate_[a-z0-9_]+/g)].map((m) => m[0]);

describe('docs/operators/grafana-dashboard.json', () => {
  it('imports with a Prometheus data source chosen at import time', () => {
    expect(dashboard.__inputs).toEqual([expect.objectContaining({ name: 'DS_PROMETHEUS', type: 'datasource', pluginId: 'prometheus' })]);
    expect(dashboard.uid).toMatch(/^[a-z0-9-]{1,40}$/);
    expect(dashboard.schemaVersion).toBeGreaterThanOrEqual(36);
    for (const panel of panels) {
      expect([panel.title, panel.datasource]).toEqual([panel.title, { type: 'prometheus', uid: '${DS_PROMETHEUS}' }]);
      for (const target of panel.targets) expect(target.datasource).toEqual({ type: 'prometheus', uid: '${DS_PROMETHEUS}' });
      expect(panel.gridPos).toEqual({ h: expect.any(Number), w: expect.any(Number), x: expect.any(Number), y: expect.any(Number) });
      expect(panel.gridPos.x + panel.gridPos.w).toBeLessThanOrEqual(24);
    }
    const ids = dashboard.panels.map((p: any) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('has a panel for every metric agentgate exports', () => {
    const used = new Set(targets.flatMap((t) => metricsIn(t.expr).map(baseOf)));
    expect(own.length).toBeGreaterThanOrEqual(12);
    expect(own.filter((name) => !used.has(name))).toEqual([]);
  });

  it('queries only metrics that exist, grouped by labels they carry, in balanced expressions', () => {
    for (const { panel, expr } of targets) {
      const names = metricsIn(expr);
      expect([panel, names.length]).not.toEqual([panel, 0]);
      for (const series of names) expect([panel, series, exported.has(baseOf(series))]).toEqual([panel, series, true]);
      const labels = new Set(['le', 'instance', 'job', ...names.flatMap((s) => exported.get(baseOf(s))?.labelNames ?? [])]);
      for (const clause of expr.matchAll(/\bby \(([^)]*)\)/g)) {
        for (const label of clause[1]!.split(',').map((l) => l.trim())) expect([panel, label, labels.has(label)]).toEqual([panel, label, true]);
      }
      for (const [open, close] of [['(', ')'], ['{', '}'], ['[', ']']]) {
        expect([panel, expr.split(open).length]).toEqual([panel, expr.split(close).length]);
      }
    }
  });

  it('marks an alert-worthy threshold on the relayer gas balance', () => {
    const gas = panels.find((p) => p.targets.some((t: any) => t.expr.includes('agentgate_relayer_gas_balance_eth')));
    expect(gas.fieldConfig.defaults.thresholds.steps.some((s: any) => s.color === 'red')).toBe(true);
    expect(gas.description).toMatch(/alert/i);
  });

  it('shows the oldest due webhook delivery with a red line at 30 s, the threshold the alert rule fires on', () => {
    const backlog = panels.find((p) => p.targets.some((t: any) => t.expr.includes('agentgate_webhook_oldest_due_seconds')));
    expect(backlog.fieldConfig.defaults.unit).toBe('s');
    expect(backlog.fieldConfig.defaults.thresholds.steps).toContainEqual({ color: 'red', value: 30 });
    const rule = alertRules.find((r) => r.uid === 'agentgate-webhook-backlog');
    expect(rule.data[0].model.expr).toBe('max(agentgate_webhook_oldest_due_seconds)');
    expect(rule.data.find((d: any) => d.model.type === 'threshold').model.conditions[0].evaluator).toEqual({ type: 'gt', params: [30] });
  });
});

describe('docs/operators/grafana-alert-rules.json', () => {
  it('is a Grafana alerting provisioning file whose rules query metrics agentgate exports and end in a condition', () => {
    expect(rulesFile.apiVersion).toBe(1);
    expect(alertRules.length).toBeGreaterThanOrEqual(2);
    for (const rule of alertRules) {
      const refs = new Set(rule.data.map((d: any) => d.refId));
      expect([rule.uid, refs.has(rule.condition)]).toEqual([rule.uid, true]);
      const queries = rule.data.filter((d: any) => d.datasourceUid !== '__expr__');
      expect(queries.length).toBeGreaterThan(0);
      for (const q of queries) for (const series of metricsIn(q.model.expr)) expect([rule.uid, series, exported.has(baseOf(series))]).toEqual([rule.uid, series, true]);
      expect(rule.annotations.summary).toMatch(/\S/);
    }
  });
});
