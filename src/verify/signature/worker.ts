/**
 * The Piscina task handler: one task is a batch of jobs, answered in order with the recovered addresses
 * (undefined for a malformed or unacceptable signature). It is exactly `recoverBatchSync`, so the in-process
 * fallback and the pool compute the same thing.
 *
 * Piscina does not load this file directly: it loads `worker-entry.mjs`, which makes TypeScript importable in the
 * worker thread first (see there).
 */
import type { Address } from 'viem';
import { recoverBatchSync, type VerifyJob } from './jobs.ts';

export default function verifyBatch(jobs: VerifyJob[]): (Address | undefined)[] {
  return recoverBatchSync(jobs);
}
