import { randomUUID } from 'node:crypto';
import { BOOT } from '../../cluster/boot.ts';
import type { NonceClaims } from '../../store/nonce-claims.ts';

/**
 * Which payments have bought their upstream call, durably. A payment is first claimed as `serving` (by this process,
 * named by its boot id) before the upstream is called, and made `served` only once the upstream has answered and the
 * answer is on its way to the buyer. A failure in between releases the claim; a crash leaves a `serving` claim of a
 * boot that is no longer live, which the next request with the same credential takes over: the buyer paid, so the
 * credential stays redeemable until it has been served once. Alone, only this boot is live; in a cluster, every node
 * whose lease is live (see `src/cluster/membership.ts`), so a credential another node is serving is not served twice.
 */
const SERVING = 'serving ';

export type ServedState = 'free' | 'serving' | 'served';

/** Whether a boot (a run of a gateway process) is live: one that is not can hold no claim any more. */
export type BootLiveness = (boot: string) => boolean | Promise<boolean>;

/** Alone: only this very run is live. */
export const thisBootOnly: BootLiveness = (boot) => boot === BOOT;

/** The state of a payment's claim as this process sees it: a `serving` claim of a boot no longer live is free again. */
export async function servedState(holder: string | undefined, live: BootLiveness = thisBootOnly): Promise<ServedState> {
  if (holder === undefined) return 'free';
  if (!holder.startsWith(SERVING)) return 'served';
  return (await live(bootOf(holder))) ? 'serving' : 'free';
}

/** The boot of a `serving <boot> <id>` claim. */
function bootOf(holder: string): string {
  return holder.slice(SERVING.length).split(' ')[0] ?? '';
}

export interface ServingClaim {
  readonly key: string;
  readonly holder: string;
  /** The id the paid request's record is filed under. */
  readonly id: string;
}

/** Claims `key` for serving now, taking over a `serving` claim a crashed process left; `undefined` when held. */
export async function claimForServing(claims: NonceClaims, key: string, live: BootLiveness = thisBootOnly): Promise<ServingClaim | undefined> {
  const id = randomUUID();
  const holder = `${SERVING}${BOOT} ${id}`;
  const first = await claims.claim(key, holder);
  if (first.claimed) return { key, holder, id };
  if ((await servedState(first.holder, live)) !== 'free') return undefined;
  return (await claims.takeover(key, first.holder, holder)) ? { key, holder, id } : undefined;
}

/** The upstream answered and the answer goes out: the payment is spent for good. */
export async function markServed(claims: NonceClaims, claim: ServingClaim): Promise<boolean> {
  return claims.takeover(claim.key, claim.holder, claim.id);
}

/** The call failed: the buyer may send the same credential again. */
export async function releaseServing(claims: NonceClaims, claim: ServingClaim): Promise<boolean> {
  return claims.release(claim.key, claim.holder);
}
