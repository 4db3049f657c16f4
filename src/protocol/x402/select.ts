/**
 * Matching a client's `accepted` (echoed in its PaymentPayload) against the server's own offers.
 *
 * Rule: an offer matches when every field the offer declares is present in `accepted` with an equal
 * value. Keys the offer does not declare are ignored, so a client may add keys (at the top level or in
 * `extra`) but may not drop or change declared ones. Strings that are both EVM addresses compare
 * case-insensitively (checksummed vs lower case), everywhere including inside `extra`; every other value
 * compares exactly (numbers by value, arrays element-wise, objects by the offer's keys).
 * The returned value is the server's offer, never the client's copy.
 */
import type { PaymentRequirements } from './types.ts';

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const MAX_DEPTH = 32;

function valuesMatch(declared: unknown, given: unknown, depth: number): boolean {
  if (depth > MAX_DEPTH) return false;
  if (typeof declared === 'string') {
    if (typeof given !== 'string') return false;
    if (declared === given) return true;
    return ADDRESS.test(declared) && ADDRESS.test(given) && declared.toLowerCase() === given.toLowerCase();
  }
  if (declared === null || typeof declared !== 'object') return declared === given;
  if (given === null || typeof given !== 'object') return false;
  if (Array.isArray(declared)) {
    if (!Array.isArray(given) || given.length !== declared.length) return false;
    return declared.every((d, i) => valuesMatch(d, given[i], depth + 1));
  }
  if (Array.isArray(given)) return false;
  const g = given as Record<string, unknown>;
  return Object.entries(declared as Record<string, unknown>).every(([k, d]) => d === undefined || (Object.hasOwn(g, k) && valuesMatch(d, g[k], depth + 1)));
}

/** True when `accepted` carries every declared field of `offer` unchanged. */
export function requirementMatches(offer: PaymentRequirements, accepted: PaymentRequirements): boolean {
  return valuesMatch(offer, accepted, 0);
}

/** The first offer matched by `accepted`, or undefined. */
export function selectRequirement(offers: readonly PaymentRequirements[], accepted: PaymentRequirements): PaymentRequirements | undefined {
  return offers.find((offer) => requirementMatches(offer, accepted));
}
