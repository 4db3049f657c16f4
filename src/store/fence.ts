/**
 * Fencing: a write that can move money or change a signed-transaction list carries the writer's lease (its name
 * and the epoch it was granted at) and commits only while that lease is live and still at that epoch, checked in
 * the write's own statement. A node that paused past its lease (a GC pause, SIGSTOP) and wakes up cannot overwrite
 * what the node that took its work over wrote since: its writes fail with {@link FencedWrite}.
 *
 * The store is told where to read the lease once (`Store.fence`): in a cluster, the node's own lease (see
 * `src/cluster/membership.ts`); alone (LMDB, or no cluster) there is none and every write passes.
 */

/** A lease as granted: its name and the epoch of this holder's grant (a new holder gets a higher epoch). */
export interface LeaseToken {
  name: string;
  epoch: number;
}

/** The lease the store's writes carry now; undefined: not fenced (a node alone, or not joined yet). */
export type FenceSource = () => LeaseToken | undefined;

/** A write refused because the writer's lease is gone or was taken over since: nothing of it was written. */
export class FencedWrite extends Error {
  readonly code = 'fenced';
  readonly lease: LeaseToken;
  constructor(lease: LeaseToken) {
    super(`fenced: the lease ${lease.name} (epoch ${lease.epoch}) is no longer this node's; the write was refused`);
    this.lease = lease;
    this.name = 'FencedWrite';
  }
}

/** Whether `err` is a write refused by its fence (see {@link FencedWrite}). */
export function isFenced(err: unknown): err is FencedWrite {
  return err instanceof FencedWrite || (err as { code?: unknown } | undefined)?.code === 'fenced';
}
