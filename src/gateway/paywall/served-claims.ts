import { randomUUID } from 'node:crypto';
import { BOOT } from '../../cluster/boot.ts';
import type { NonceClaims } from '../../store/nonce-claims.ts';
import { isStoreUnavailable } from '../../store/store-unavailable.ts';

/**
 * Which payments have bought their upstream call, durably. A payment is first claimed as `serving` (by this process,
 * named by its boot id) before the upstream is called, and made `served` only once the upstream has answered and the
 * answer is on its way to the buyer. A failure in between releases the claim; a crash leaves a `serving` claim of a
 * boot that is no longer live, which the next request with the same credential takes over: the buyer paid, so the
 * credential stays redeemable until it has been served once. Alone, only this boot is live; in a cluster, every node
 * whose lease is live (see `src/cluster/membership.ts`), so a credential another node is serving is not served twice.
 *
 * A `serving` claim is also bounded in time: it names the moment (unix ms) by which its upstream call and the writes
 * after it must have ended (`serving <boot> <id> <until>`). Past it the claim is free whoever holds it, this very run
 * included: a `serving` insert that committed while its client gave up (a timeout) would otherwise block the
 * credential until the node restarts. The bound is the upstream timeout plus {@link SERVING_SLACK_MS}, so a live
 * serve has always ended by then (its `markServed` would find the claim taken over, and answer nothing twice).
 * Claims written without a bound (before it existed) keep the liveness rule alone.
 */
const SERVING = 'serving ';

export type ServedState = 'free' | 'serving' | 'served';

/** Beyond the upstream's own timeout, how long a `serving` claim stays bound to its holder: its writes, clock skew. */
export const SERVING_SLACK_MS = 60_000;

/** The bound of a claim made without one given: the longest upstream timeout the gateway accepts, plus the slack. */
export const DEFAULT_SERVING_BOUND_MS = 300_000 + SERVING_SLACK_MS;

/** Whether a boot (a run of a gateway process) is live: one that is not can hold no claim any more. */
export type BootLiveness = (boot: string) => boolean | Promise<boolean>;

/** Alone: only this very run is live. */
export const thisBootOnly: BootLiveness = (boot) => boot === BOOT;

/** The state of a payment's claim as this process sees it: a `serving` claim of a boot no longer live is free again. */
export async function servedState(holder: string | undefined, live: BootLiveness = thisBootOnly, now: number = Date.now()): Promise<ServedState> {
  if (holder === undefined) return 'free';
  if (!holder.startsWith(SERVING)) return 'served';
  const until = untilOf(holder);
  if (until !== undefined && now > until) return 'free';
  return (await live(bootOf(holder))) ? 'serving' : 'free';
}

/** The boot of a `serving <boot> <id> [<until>]` claim. */
function bootOf(holder: string): string {
  return holder.slice(SERVING.length).split(' ')[0] ?? '';
}

/** The bound of a `serving <boot> <id> <until>` claim (unix ms), or undefined for one written without it. */
function untilOf(holder: string): number | undefined {
  const until = holder.slice(SERVING.length).split(' ')[2];
  return until !== undefined && /^\d{1,16}$/.test(until) ? Number(until) : undefined;
}

export interface ServingBound {
  /** How long from now the claim binds (default {@link DEFAULT_SERVING_BOUND_MS}). */
  boundMs?: number;
  /** Unix ms (injectable for tests). */
  now?: number;
}

export interface ServingClaim {
  readonly key: string;
  readonly holder: string;
  /** The id the paid request's record is filed under. */
  readonly id: string;
}

/** Claims `key` for serving now, taking over a `serving` claim a crashed process left; `undefined` when held. */
export async function claimForServing(claims: NonceClaims, key: string, live: BootLiveness = thisBootOnly, bound: ServingBound = {}): Promise<ServingClaim | undefined> {
  const id = randomUUID();
  const now = bound.now ?? Date.now();
  const holder = `${SERVING}${BOOT} ${id} ${now + (bound.boundMs ?? DEFAULT_SERVING_BOUND_MS)}`;
  const first = await claims.claim(key, holder);
  if (first.claimed) return { key, holder, id };
  if ((await servedState(first.holder, live, now)) !== 'free') return undefined;
  return (await claims.takeover(key, first.holder, holder)) ? { key, holder, id } : undefined;
}

/**
 * The upstream answered and the answer goes out: the payment is spent for good. `withServed` may `putWithin` records
 * that are written in the same commit, only if the claim is still this serve's (the paid request's record).
 */
export async function markServed(claims: NonceClaims, claim: ServingClaim, withServed?: () => void): Promise<boolean> {
  return claims.takeover(claim.key, claim.holder, claim.id, withServed);
}

/** How long a served mark is tried again while the store does not answer: well inside the claim's {@link SERVING_SLACK_MS}. */
export const MARK_PATIENCE_MS = 30_000;

/**
 * {@link markServed}, tried again (250 ms doubling to 2 s, for at most {@link MARK_PATIENCE_MS}) while the store does
 * not answer (the database restarting): the upstream has answered, and its answer goes out once the mark is durable,
 * so a restart of the database does not turn a paid, answered call into a lost one. A try that failed may have
 * committed all the same: a later try that finds the claim already this serve's counts as marked.
 */
export async function markServedPatiently(claims: NonceClaims, claim: ServingClaim, withServed?: () => void): Promise<boolean> {
  const deadline = performance.now() + MARK_PATIENCE_MS;
  let failedOnce = false;
  for (let waitMs = 250; ; waitMs = Math.min(2000, waitMs * 2)) {
    try {
      if (await markServed(claims, claim, withServed)) return true;
      return failedOnce && (await claims.holder(claim.key)) === claim.id;
    } catch (err) {
      if (!isStoreUnavailable(err) || performance.now() + waitMs > deadline) throw err;
      failedOnce = true;
      await new Promise((r) => setTimeout(r, waitMs));
    }
  }
}

/** The call failed: the buyer may send the same credential again. */
export async function releaseServing(claims: NonceClaims, claim: ServingClaim): Promise<boolean> {
  return claims.release(claim.key, claim.holder);
}
