/**
 * The bounds of a merchant registration: configurable price range, route count, upload size and clock window, and
 * the fixed caps on each text field the registration schemas enforce.
 */
import { parseDecimalAmount, USD_DECIMALS } from '../../protocol/amounts.ts';

/** A USD price with exactly 6 fraction digits, as a registration states it. */
export const PRICE = /^(0|[1-9][0-9]{0,5})\.[0-9]{6}$/;

export interface RegistrationLimits {
  /** Lowest route price, USD with 6 fraction digits (default `0.000001`). */
  minPriceUsd: string;
  /** Highest route price (default `1000.000000`). */
  maxPriceUsd: string;
  /** Most routes per merchant (default 100, at most {@link HARD_MAX_ROUTES}). */
  maxRoutes: number;
  /** Largest uploaded file, decoded bytes (default 10 MiB). */
  maxFileBytes: number;
  /** How far `issuedAt` may be from the gateway's clock, seconds (default 600). */
  clockSkewSeconds: number;
}

export const DEFAULT_REGISTRATION_LIMITS: Readonly<RegistrationLimits> = {
  minPriceUsd: '0.000001',
  maxPriceUsd: '1000.000000',
  maxRoutes: 100,
  maxFileBytes: 10 * 1024 * 1024,
  clockSkewSeconds: 600,
};

export const HARD_MAX_ROUTES = 1000;
export const MAX_NAME = 80;
export const MAX_MERCHANT_DESCRIPTION = 2000;
export const MAX_SUMMARY = 200;
export const MAX_ROUTE_DESCRIPTION = 2000;
export const MAX_INPUT = 2000;
export const MAX_NETWORKS = 32;
export const MAX_URL = 2048;
export const MAX_SECRET_HEADERS = 16;
export const MAX_HEADER_NAME = 64;
export const MAX_HEADER_VALUE = 4096;
export const MAX_FILE_NAME = 200;

/** The limits with defaults filled in; throws a RangeError on inconsistent limits (a configuration mistake). */
export function resolveLimits(partial: Partial<RegistrationLimits> = {}): RegistrationLimits {
  const l = { ...DEFAULT_REGISTRATION_LIMITS, ...partial };
  const min = PRICE.test(l.minPriceUsd) ? parseDecimalAmount(l.minPriceUsd, USD_DECIMALS) : undefined;
  const max = PRICE.test(l.maxPriceUsd) ? parseDecimalAmount(l.maxPriceUsd, USD_DECIMALS) : undefined;
  if (min === undefined || max === undefined || min <= 0n || min > max) throw new RangeError(`price bounds must be 6-decimal USD amounts with 0 < min <= max, got ${l.minPriceUsd}..${l.maxPriceUsd}`);
  if (!Number.isInteger(l.maxRoutes) || l.maxRoutes < 1 || l.maxRoutes > HARD_MAX_ROUTES) throw new RangeError(`maxRoutes must be 1..${HARD_MAX_ROUTES}`);
  if (!Number.isSafeInteger(l.maxFileBytes) || l.maxFileBytes < 1) throw new RangeError('maxFileBytes must be a positive integer');
  if (!Number.isSafeInteger(l.clockSkewSeconds) || l.clockSkewSeconds < 1) throw new RangeError('clockSkewSeconds must be a positive integer');
  return l;
}
