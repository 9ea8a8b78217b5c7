import { z } from 'zod';

/** A calendar month in UTC, `YYYY-MM`: what usage is counted and quotas are reset by. */
export type Month = string;

export const monthInput = z.string().regex(/^\d{4}-(0[1-9]|1[0-2])$/, 'must be a month, YYYY-MM');

export const monthOf = (at: Date = new Date()): Month => at.toISOString().slice(0, 7);

/** The month's first instant and the next month's (UTC). */
export function monthRange(month: Month): { from: Date; until: Date } {
  const [year, m] = month.split('-').map(Number) as [number, number];
  return { from: new Date(Date.UTC(year, m - 1, 1)), until: new Date(Date.UTC(year, m, 1)) };
}

/** Every month from `first` to `last`, both included (oldest first). */
export function monthsFrom(first: Month, last: Month): Month[] {
  const months: Month[] = [];
  for (let at = monthRange(first).from; monthOf(at) <= last; at = monthRange(monthOf(at)).until) months.push(monthOf(at));
  return months;
}

/** Seconds until the next month begins: when a refused quota opens again (Retry-After). */
export const secondsToNextMonth = (now: Date = new Date()): number => Math.max(1, Math.ceil((monthRange(monthOf(now)).until.getTime() - now.getTime()) / 1000));

/** This month and the `count - 1` before it, newest first. */
export function lastMonths(count: number, now: Date = new Date()): Month[] {
  const months = [monthOf(now)];
  while (months.length < count) months.push(monthOf(new Date(monthRange(months[months.length - 1]!).from.getTime() - 1)));
  return months;
}
