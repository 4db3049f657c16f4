/** How amounts, times and hashes read on the pages. Amounts stay decimal strings: no float ever touches money. */
import { err, ok, type Result } from '../../protocol/result.ts';

/** `"5.000000"` → `"5.00"`; more fraction digits are kept only where they are not zero. */
export function money(decimal: string | undefined | null): string {
  if (decimal === undefined || decimal === null || decimal === '') return '–';
  const [whole = '0', frac = ''] = decimal.split('.');
  const trimmed = frac.replace(/0+$/, '');
  const grouped = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return `${grouped}.${trimmed.length <= 2 ? trimmed.padEnd(2, '0') : trimmed}`;
}

/** A USD price to the cent, rounded half up: `"181.319999"` → `"181.32"`. */
export function cents(decimal: string | undefined | null): string {
  if (decimal === undefined || decimal === null || decimal === '') return '–';
  const [whole = '0', frac = ''] = decimal.split('.');
  const atomic = BigInt(whole) * 10_000n + BigInt(frac.slice(0, 4).padEnd(4, '0'));
  return money(fromAtomic((atomic + 50n) / 100n, 2));
}

/** Share counts: at most `digits` fraction digits, cut (never rounded up), trailing zeros dropped. */
export function shares(decimal: string | undefined | null, digits = 6): string {
  if (decimal === undefined || decimal === null || decimal === '') return '–';
  const [whole = '0', frac = ''] = decimal.split('.');
  const cut = frac.slice(0, digits).replace(/0+$/, '');
  const grouped = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return cut ? `${grouped}.${cut}` : grouped;
}

/** Atomic units with `decimals` to a decimal string. */
export function fromAtomic(atomic: bigint, decimals: number): string {
  const s = atomic.toString().padStart(decimals + 1, '0');
  return decimals === 0 ? s : `${s.slice(0, -decimals)}.${s.slice(-decimals)}`;
}

export function shortHash(hash: string): string {
  return hash.length > 18 ? `${hash.slice(0, 10)}…${hash.slice(-6)}` : hash;
}

const relative = new Intl.RelativeTimeFormat('en', { numeric: 'auto' });

/** "3 minutes ago", or the date for anything older than a day. */
export function ago(iso: string, now = Date.now()): string {
  const t = Date.parse(iso);
  if (!Number.isFinite(t)) return iso;
  const s = Math.round((t - now) / 1000);
  if (s > -45) return 'just now';
  if (s > -3600) return relative.format(Math.round(s / 60), 'minute');
  if (s > -86_400) return relative.format(Math.round(s / 3600), 'hour');
  return new Date(t).toLocaleString();
}

/** Why a typed amount was refused: not a number with at most 6 decimals, or outside the page's range. */
export type AmountRefusal = 'invalid_amount' | 'out_of_range';

/** A stable amount typed by a person: `"5"`, `"12.5"` → atomic units at 6 decimals, or why not. */
export function parseAmount(text: string, limits: { min: bigint; max: bigint }): Result<{ atomic: bigint; decimal: string }, AmountRefusal> {
  const t = text.trim().replace(/,/g, '');
  const m = /^(\d{1,9})(?:\.(\d{0,6}))?$/.exec(t);
  if (!m) return err('invalid_amount', /^\d*\.\d{7,}$/.test(t) ? 'Use at most 6 decimals.' : 'Enter an amount as a number, for example 5 or 12.50.');
  const atomic = BigInt(m[1] ?? '0') * 1_000_000n + BigInt((m[2] ?? '').padEnd(6, '0'));
  if (atomic < limits.min || atomic > limits.max)
    return err('out_of_range', `Enter an amount from ${fromAtomic(limits.min, 6).replace(/\.0+$/, '')} to ${fromAtomic(limits.max, 6).replace(/\.0+$/, '')}.`);
  return ok({ atomic, decimal: fromAtomic(atomic, 6) });
}
