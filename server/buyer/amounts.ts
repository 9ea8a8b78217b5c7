import { z } from 'zod';
import { parsePrice } from 'agentgate-x402-wire';

/**
 * USDC amounts at the API edge: decimal strings with at most 6 decimals ("0.01", "25"), never numbers,
 * so no float ever holds money. Parsed into bigint atomic units.
 */
export const usdcAmount = z.string().trim().max(32)
  .regex(/^\d{1,15}(\.\d{1,6})?$/, 'must be a decimal string with at most 6 decimals, e.g. "0.01"')
  .transform((text, ctx) => {
    try {
      return parsePrice(text);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: (err as Error).message });
      return z.NEVER;
    }
  });

/**
 * Mandate caps and ledger totals are Numbers of atomic units. A double is exact for integers up to 2^53
 * (~9 billion USDC); caps are limited to 1 million USDC, so a day's total is always exact and a lifetime
 * total stays exact for decades at the maximum cap. (FerretDB 1.x has no Decimal128, and Numbers let the
 * database sort and compare them.)
 */
export const MAX_MANDATE_CAP_ATOMIC = 1_000_000n * 1_000_000n;
