/**
 * The worker's task handler: one task is a batch of job records (job-record.ts), answered with one string of the
 * recovered addresses. It is exactly `recoverRecords`, so the in-process fallback and the pool compute the same thing.
 *
 * Piscina does not load this file directly: it loads `worker-entry.mjs`, which makes TypeScript importable in the
 * worker thread first (see there).
 */
import { ADDRESS_ASCII_BYTES, recoverRecords } from './job-record.ts';

export interface RecordBatch {
  records: Uint8Array;
  count: number;
}

let answers = Buffer.alloc(64 * ADDRESS_ASCII_BYTES);

export default function verifyBatch({ records, count }: RecordBatch): string {
  if (answers.length < count * ADDRESS_ASCII_BYTES) answers = Buffer.alloc(count * ADDRESS_ASCII_BYTES);
  return recoverRecords(records, count, answers);
}
