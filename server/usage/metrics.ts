/**
 * What is metered per org. `settlements` are counted from the payment and channel records themselves
 * (settlement-counts.ts); the others as they happen (monthly-counts.ts). Storage is not per month: it is
 * what the org keeps now (mail with its attachments, vault credentials).
 */
export const USAGE_METRICS = ['settlements', 'facilitatorCalls', 'mailSent', 'mailReceived', 'storageBytes'] as const;
export type UsageMetric = (typeof USAGE_METRICS)[number];

/** The metrics counted as they happen. */
export type CountedMetric = Exclude<UsageMetric, 'settlements'>;

export const METRIC_LABELS: Record<UsageMetric, string> = {
  settlements: 'settlements',
  facilitatorCalls: 'facilitator calls',
  mailSent: 'mail sent',
  mailReceived: 'mail received',
  storageBytes: 'storage (bytes)',
};
