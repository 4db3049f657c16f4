/**
 * What a signature worker thread runs for each batch: the job records (job-record.ts), answered with one string of
 * the recovered addresses. It is exactly `recoverRecords`, so the in-process fallback and the workers compute the
 * same thing.
 *
 * The thread does not load this file directly: it loads `worker-entry.mjs`, which makes TypeScript importable in the
 * worker thread first (see there).
 */
import { ADDRESS_ASCII_BYTES, JOB_RECORD_BYTES, recoverRecords } from './job-record.ts';

let answers = Buffer.alloc(64 * ADDRESS_ASCII_BYTES);

export default function verifyBatch(records: Uint8Array): string {
  const count = records.length / JOB_RECORD_BYTES;
  if (!Number.isInteger(count)) throw new RangeError(`a batch of ${records.length} bytes is not whole records`);
  if (answers.length < count * ADDRESS_ASCII_BYTES) answers = Buffer.alloc(count * ADDRESS_ASCII_BYTES);
  return recoverRecords(records, count, answers);
}
