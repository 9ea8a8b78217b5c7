import type { z } from 'zod';
import { fromZodError } from './errors.js';

/** Validates one part of a request (body, query, params) at the edge; 400 names the field. */
export function parseInput<S extends z.ZodType>(schema: S, value: unknown, where: 'body' | 'query' | 'params'): z.output<S> {
  const result = schema.safeParse(value);
  if (!result.success) throw fromZodError(result.error, where);
  return result.data;
}
