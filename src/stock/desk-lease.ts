import { RoleLease, type RoleLeaseOptions, type RoleLeases } from '../cluster/role-lease.ts';

/**
 * The stock desk in a cluster: one key, so one node signs with it at a time, the one holding the desk lease (a
 * {@link RoleLease}). Every node has a desk and serves the stock API (quotes and 402s from the shared market, buys
 * placed through the store, see `order-desk.ts`); the others stand by. When its holder dies (or stops), the first
 * standby to take the lease starts its desk, which resumes every unfinished order and gas sponsorship from their
 * durable records exactly as a restart of the dead node would: a signed swap, refund or transfer is re-sent as it
 * was and awaited, never signed anew. A holder that loses the lease stops the desk at once (the command line exits,
 * as for the node's other leases, see `cluster/membership.ts`).
 */

/** What the desk lease is taken and kept through: this node's leases (`store/postgres/leases.ts`). */
export type DeskLeases = RoleLeases;

/** `name` is the desk lease's (`desk:<address>`); `renewed` sweeps the inbox after each renewal while the desk runs here. */
export type DeskLeaseOptions = RoleLeaseOptions;

export class DeskLease extends RoleLease {
  constructor(opts: DeskLeaseOptions) {
    super('stock desk', opts);
  }
}
