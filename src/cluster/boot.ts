import { randomUUID } from 'node:crypto';

/**
 * This run of the process, new at every start: its `serving` claims carry it, and in a cluster its leases do, so
 * that what a dead run held is known to be free (see `src/gateway/paywall/served-claims.ts`, `membership.ts`).
 */
export const BOOT = randomUUID();
