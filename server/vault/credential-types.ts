import { z } from 'zod';
import { paramsFromFields, paramsFromUri, TotpInputError, type TotpParams } from './totp.js';

export const CREDENTIAL_TYPES = [
  'LOGIN', 'API_KEY', 'OAUTH', 'TOTP', 'SSH_KEY', 'DATABASE', 'SMTP', 'AWS', 'CERTIFICATE', 'CARD', 'SHIPPING_ADDRESS', 'CUSTOM',
] as const;
export type CredentialType = (typeof CREDENTIAL_TYPES)[number];

const text = (max = 4096) => z.string().min(1).max(max);
const optionalText = (max = 4096) => z.string().max(max).optional();
const port = z.number().int().min(1).max(65535);
const pem = z.string().min(1).max(65536);

function luhnValid(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = Number(digits[digits.length - 1 - i]);
    if (i % 2 === 1) { d *= 2; if (d > 9) d -= 9; }
    sum += d;
  }
  return sum % 10 === 0;
}

const cardNumber = z.string().transform((v) => v.replace(/[\s-]/g, '')).pipe(
  z.string().regex(/^\d{12,19}$/, 'must be 12 to 19 digits').refine(luhnValid, 'is not a valid card number (Luhn check failed)'),
);
const cardExpiry = z.string().regex(/^(0[1-9]|1[0-2])\/(\d{2}|\d{4})$/, 'must be MM/YY or MM/YYYY');

/** Backup codes are one-time strings printed by the provider; kept sealed with the seed. */
const backupCodes = z.array(z.string().trim().min(4).max(64)).max(50);

const totpInput = z.object({
  secret: z.string().min(1).max(1024).optional(),
  uri: z.string().startsWith('otpauth://', 'must be an otpauth:// URI').max(4096).optional(),
  issuer: optionalText(256),
  accountName: optionalText(256),
  algorithm: z.enum(['SHA1', 'SHA256', 'SHA512']).optional(),
  digits: z.union([z.literal(6), z.literal(8)]).optional(),
  period: z.number().int().min(1).max(3600).optional(),
  backupCodes: backupCodes.optional(),
}).strict().refine((d) => Boolean(d.secret) !== Boolean(d.uri), { message: 'give exactly one of secret (base32) or uri (otpauth://)', path: ['secret'] });

/** Per-type shape of `data` (DESIGN.md types). Unknown fields are refused so a typo does not go unnoticed. */
export const DATA_SCHEMAS: Record<CredentialType, z.ZodType> = {
  LOGIN: z.object({ username: text(512), password: text(), url: z.url().max(2048).optional(), notes: optionalText() }).strict(),
  API_KEY: z.object({ apiKey: text(), baseUrl: z.url().max(2048).optional(), headerName: optionalText(128), notes: optionalText() }).strict(),
  OAUTH: z.object({
    accessToken: text(16384), refreshToken: optionalText(16384), tokenType: optionalText(64), scope: optionalText(2048),
    expiresAt: z.iso.datetime({ offset: true }).optional(), clientId: optionalText(512), clientSecret: optionalText(), tokenUrl: z.url().max(2048).optional(),
  }).strict(),
  TOTP: totpInput,
  SSH_KEY: z.object({ privateKey: pem, publicKey: z.string().max(16384).optional(), passphrase: optionalText(), host: optionalText(512), username: optionalText(512) }).strict(),
  DATABASE: z.object({
    connectionString: optionalText(), host: optionalText(512), port: port.optional(), database: optionalText(256),
    username: optionalText(512), password: optionalText(), engine: optionalText(64),
  }).strict().refine((d) => d.connectionString || d.host, { message: 'give connectionString or host', path: ['host'] }),
  SMTP: z.object({ host: text(512), port, username: optionalText(512), password: optionalText(), secure: z.boolean().optional(), fromAddress: optionalText(512) }).strict(),
  AWS: z.object({
    accessKeyId: z.string().regex(/^[A-Z0-9]{16,128}$/, 'must be an AWS access key id (upper-case letters and digits)'),
    secretAccessKey: text(512), sessionToken: optionalText(8192), region: optionalText(64),
  }).strict(),
  CERTIFICATE: z.object({ certificate: pem, privateKey: pem.optional(), passphrase: optionalText(), chain: z.string().max(131072).optional() }).strict(),
  CARD: z.object({ number: cardNumber, expiry: cardExpiry, cvc: z.string().regex(/^\d{3,4}$/, 'must be 3 or 4 digits'), holderName: optionalText(256), billingZip: optionalText(32) }).strict(),
  SHIPPING_ADDRESS: z.object({
    name: text(256), line1: text(512), line2: optionalText(512), city: text(256), region: optionalText(256),
    postalCode: text(32), country: z.string().regex(/^[A-Za-z]{2}$/, 'must be an ISO 3166-1 alpha-2 country code'), phone: optionalText(64),
  }).strict(),
  CUSTOM: z.record(z.string().max(256), z.unknown()).refine((d) => Object.keys(d).length > 0, 'must have at least one field'),
};

/** What is sealed for a TOTP credential: the normalised parameters, never the URI as given. */
export interface SealedTotp extends TotpParams {
  backupCodes: string[];
}

/**
 * Validates `data` for its type and returns what gets sealed. A TOTP URI is read into its parameters here,
 * so a bad seed is a 400 at write time rather than a failure when the code is first asked for.
 */
export function normaliseData(type: CredentialType, data: unknown): { ok: true; value: Record<string, unknown> } | { ok: false; error: z.ZodError } {
  const parsed = DATA_SCHEMAS[type].safeParse(data);
  if (!parsed.success) return { ok: false, error: parsed.error };
  if (type !== 'TOTP') return { ok: true, value: parsed.data as Record<string, unknown> };
  const input = parsed.data as z.output<typeof totpInput>;
  try {
    const base = input.uri ? paramsFromUri(input.uri) : paramsFromFields({ ...input, secret: input.secret! });
    const params: SealedTotp = {
      ...base,
      ...(input.issuer ? { issuer: input.issuer } : {}),
      ...(input.accountName ? { accountName: input.accountName } : {}),
      backupCodes: input.backupCodes ?? [],
    };
    return { ok: true, value: params as unknown as Record<string, unknown> };
  } catch (err) {
    if (!(err instanceof TotpInputError)) throw err;
    const issue = { code: 'custom' as const, message: err.message, path: [input.uri ? 'uri' : 'secret'], input: data };
    return { ok: false, error: new z.ZodError([issue]) };
  }
}

/** The part of sealed data a reader may see. A TOTP seed and its backup codes never leave the vault. */
export function readableData(type: CredentialType, data: Record<string, unknown>, backupCodesUsed: number): Record<string, unknown> {
  if (type !== 'TOTP') return data;
  const totp = data as unknown as SealedTotp;
  return {
    issuer: totp.issuer ?? null, accountName: totp.accountName ?? null,
    algorithm: totp.algorithm, digits: totp.digits, period: totp.period,
    backupCodesRemaining: Math.max(0, totp.backupCodes.length - backupCodesUsed),
  };
}
