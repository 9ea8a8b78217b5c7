import * as OTPAuth from 'otpauth';

export const TOTP_ALGORITHMS = ['SHA1', 'SHA256', 'SHA512'] as const;
export type TotpAlgorithm = (typeof TOTP_ALGORITHMS)[number];

/** Everything needed to compute a code; what the vault seals for a TOTP credential (with backup codes). */
export interface TotpParams {
  secret: string; // base32, normalised (upper case, no padding or spaces)
  algorithm: TotpAlgorithm;
  digits: 6 | 8;
  period: number; // seconds
  issuer?: string;
  accountName?: string;
}

export class TotpInputError extends Error {}

const normaliseBase32 = (value: string) => value.replace(/[\s-]/g, '').replace(/=+$/, '').toUpperCase();

function checkedParams(params: { secret: string; algorithm?: string; digits?: number; period?: number; issuer?: string; accountName?: string }): TotpParams {
  const secret = normaliseBase32(params.secret);
  if (!/^[A-Z2-7]+$/.test(secret)) throw new TotpInputError('secret must be base32 (A-Z, 2-7)');
  // Fewer than 80 bits is too weak to be a real seed, and usually means a typo.
  if (secret.length < 16) throw new TotpInputError('secret must encode at least 80 bits (16 base32 characters)');
  const algorithm = (params.algorithm ?? 'SHA1').toUpperCase().replace('-', '');
  if (!(TOTP_ALGORITHMS as readonly string[]).includes(algorithm)) throw new TotpInputError('algorithm must be SHA1, SHA256 or SHA512');
  const digits = params.digits ?? 6;
  if (digits !== 6 && digits !== 8) throw new TotpInputError('digits must be 6 or 8');
  const period = params.period ?? 30;
  if (!Number.isInteger(period) || period < 1 || period > 3600) throw new TotpInputError('period must be a whole number of seconds between 1 and 3600');
  return {
    secret, algorithm: algorithm as TotpAlgorithm, digits, period,
    ...(params.issuer ? { issuer: params.issuer } : {}),
    ...(params.accountName ? { accountName: params.accountName } : {}),
  };
}

/** Reads an `otpauth://totp/...` URI (issuer, account, algorithm, digits, period from its parameters). */
export function paramsFromUri(uri: string): TotpParams {
  let parsed: OTPAuth.HOTP | OTPAuth.TOTP;
  try {
    parsed = OTPAuth.URI.parse(uri);
  } catch (err) {
    throw new TotpInputError(`not a valid otpauth URI: ${(err as Error).message}`);
  }
  if (!(parsed instanceof OTPAuth.TOTP)) throw new TotpInputError('only otpauth://totp/ URIs are supported (not hotp)');
  return checkedParams({
    secret: parsed.secret.base32, algorithm: parsed.algorithm, digits: parsed.digits, period: parsed.period,
    issuer: parsed.issuer || undefined, accountName: parsed.label || undefined,
  });
}

export function paramsFromFields(fields: { secret: string; algorithm?: string; digits?: number; period?: number; issuer?: string; accountName?: string }): TotpParams {
  return checkedParams(fields);
}

/** RFC 6238 code at `atMs`, and how many whole seconds it stays valid. */
export function totpCode(params: TotpParams, atMs: number = Date.now()): { code: string; remaining: number } {
  const totp = new OTPAuth.TOTP({
    secret: OTPAuth.Secret.fromBase32(params.secret), algorithm: params.algorithm, digits: params.digits, period: params.period,
  });
  const code = totp.generate({ timestamp: atMs });
  const remaining = params.period - (Math.floor(atMs / 1000) % params.period);
  return { code, remaining };
}
