/**
 * Prices in USDC (6 decimals), parsed with string/bigint arithmetic only: a float never touches an
 * amount, so "$0.1" is exactly 100000 atomic units and not 99999.99999999999.
 */

export const USDC_DECIMALS = 6;
const ATOMIC_PER_USDC = 10n ** BigInt(USDC_DECIMALS);
/** One billion USDC: far above any per-call price, and it keeps amounts well inside uint256 and JSON. */
export const MAX_PRICE_ATOMIC = 1_000_000_000n * ATOMIC_PER_USDC;

export type Price = string | number | { atomic: string | bigint };

export class InvalidPriceError extends Error {
  override readonly name = 'InvalidPriceError';
  constructor(
    readonly input: unknown,
    readonly reason: string,
  ) {
    super(`invalid price ${describe(input)}: ${reason}`);
  }
}

// "$0.01", "0.01", "1", "0.01 USDC", "$ 2.50 usd"; the decimal part is captured for exact scaling.
const DECIMAL_PRICE = /^\$?\s*(\d+)(?:\.(\d+))?(?:\s+(?:usdc|usd))?$/i;
const ATOMIC_PRICE = /^(\d+)\s+atomic$/i;
const DIGITS = /^\d+$/;

/** Parses a price into atomic USDC units (6 decimals). Throws InvalidPriceError with the reason. */
export function parsePrice(price: Price): bigint {
  if (typeof price === 'object' && price !== null) {
    return checkRange(price, parseAtomic(price, price.atomic));
  }
  if (typeof price === 'number') {
    // String(n) is the shortest decimal that round-trips, i.e. what the seller typed (0.01 -> "0.01").
    if (!Number.isFinite(price)) throw new InvalidPriceError(price, 'not a finite number');
    const text = String(price);
    if (/e/i.test(text)) throw new InvalidPriceError(price, 'write it as a decimal string, e.g. "0.0001"');
    return checkRange(price, parseDecimal(price, text));
  }
  if (typeof price !== 'string') throw new InvalidPriceError(price, 'expected a string like "$0.01"');

  const text = price.trim();
  if (text.startsWith('-')) throw new InvalidPriceError(price, 'must not be negative');
  const atomic = ATOMIC_PRICE.exec(text);
  if (atomic) return checkRange(price, BigInt(atomic[1]!));
  return checkRange(price, parseDecimal(price, text));
}

function parseDecimal(input: unknown, text: string): bigint {
  const match = DECIMAL_PRICE.exec(text);
  if (!match) {
    throw new InvalidPriceError(input, 'expected a decimal USDC amount like "$0.01" or "0.01", or "<n> atomic"');
  }
  const whole = match[1]!;
  const fraction = match[2] ?? '';
  if (fraction.length > USDC_DECIMALS) {
    throw new InvalidPriceError(input, `USDC has ${USDC_DECIMALS} decimals; got ${fraction.length}`);
  }
  return BigInt(whole) * ATOMIC_PER_USDC + BigInt(fraction.padEnd(USDC_DECIMALS, '0'));
}

function parseAtomic(input: unknown, atomic: unknown): bigint {
  if (typeof atomic === 'bigint') {
    if (atomic < 0n) throw new InvalidPriceError(input, 'must not be negative');
    return atomic;
  }
  if (typeof atomic !== 'string' || !DIGITS.test(atomic)) {
    throw new InvalidPriceError(input, 'atomic amount must be a string of digits');
  }
  return BigInt(atomic);
}

const ZERO_PRICE = 'must be greater than zero';

/**
 * A usage charge (an `upto` route's report, or its amount at capture): a price, except that 0 is allowed,
 * since a request that used nothing costs nothing.
 */
export function parseCharge(price: Price): bigint {
  try {
    return parsePrice(price);
  } catch (error) {
    if (error instanceof InvalidPriceError && error.reason === ZERO_PRICE) return 0n;
    throw error;
  }
}

function checkRange(input: unknown, atomic: bigint): bigint {
  // A zero price would hand out the resource for a signature over nothing; protect or don't.
  if (atomic === 0n) throw new InvalidPriceError(input, ZERO_PRICE);
  if (atomic > MAX_PRICE_ATOMIC) throw new InvalidPriceError(input, 'exceeds 1,000,000,000 USDC');
  return atomic;
}

/** Atomic units -> minimal decimal string: 10000n -> "0.01", 1000000n -> "1", 1n -> "0.000001". */
export function formatUsdc(atomic: bigint): string {
  if (atomic < 0n) throw new RangeError('negative amount');
  const whole = atomic / ATOMIC_PER_USDC;
  const fraction = (atomic % ATOMIC_PER_USDC).toString().padStart(USDC_DECIMALS, '0').replace(/0+$/, '');
  return fraction ? `${whole}.${fraction}` : whole.toString();
}

function describe(input: unknown): string {
  if (typeof input === 'string') return JSON.stringify(input);
  if (typeof input === 'bigint') return `${input}n`;
  try {
    return JSON.stringify(input, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v)) ?? String(input);
  } catch {
    return String(input);
  }
}
