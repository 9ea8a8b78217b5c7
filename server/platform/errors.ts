import type { ZodError } from 'zod';

/** Every error a client sees has this shape: a machine code, a sentence, and the HTTP status. */
export interface ErrorBody {
  error: string;
  message: string;
  status: number;
  [extra: string]: unknown;
}

export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }

  toBody(): ErrorBody {
    return { error: this.code, message: this.message, status: this.status, ...this.details };
  }
}

export const badRequest = (message: string, details?: Record<string, unknown>) => new AppError(400, 'validation_error', message, details);
export const unauthorized = (message = 'A valid API key is required (Authorization: Bearer <key>)') => new AppError(401, 'unauthorized', message);
export const forbidden = (message: string, details?: Record<string, unknown>) => new AppError(403, 'forbidden', message, details);
export const notFound = (message = 'Not found') => new AppError(404, 'not_found', message);
export const conflict = (message: string) => new AppError(409, 'conflict', message);

/** MongoDB's (and FerretDB's) duplicate-key error: the unique-index insert that did not win. */
export const isDuplicateKey = (err: unknown) => (err as { code?: number })?.code === 11000;

/** Turns a zod failure into a 400 whose message names the offending field. */
export function fromZodError(err: ZodError, where: string): AppError {
  const issues = err.issues.map((issue) => {
    const path = [where, ...issue.path.map(String)].filter(Boolean).join('.');
    return { path, message: issue.message };
  });
  const first = issues[0];
  return new AppError(400, 'validation_error', first ? `${first.path}: ${first.message}` : `invalid ${where}`, { issues });
}
