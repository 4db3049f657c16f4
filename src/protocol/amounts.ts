/** Decimal money strings <-> atomic integer units. Exact: no floating point ever touches an amount. */

const DECIMAL = /^(0|[1-9]\d{0,29})(?:\.(\d+))?$/;

/**
 * Parses a non-negative decimal string into atomic units with `decimals` fraction digits.
 * Returns undefined for anything else: signs, exponents, spaces, more fraction digits than the token has.
 */
export function parseDecimalAmount(text: string, decimals: number): bigint | undefined {
  const m = DECIMAL.exec(text);
  if (!m) return undefined;
  const whole = m[1] as string;
  const frac = m[2] ?? '';
  if (frac.length > decimals) return undefined;
  return BigInt(whole) * 10n ** BigInt(decimals) + BigInt(frac.padEnd(decimals, '0') || '0');
}

/** Atomic units to a decimal string with exactly `decimals` fraction digits (`5000` at 6 -> `0.005000`). */
export function formatDecimalAmount(atomic: bigint, decimals: number): string {
  if (atomic < 0n) throw new Error('negative amount');
  const s = atomic.toString().padStart(decimals + 1, '0');
  return decimals === 0 ? s : `${s.slice(0, -decimals)}.${s.slice(-decimals)}`;
}

/** USD stablecoins in this service all have 6 decimals. */
export const USD_DECIMALS = 6;
