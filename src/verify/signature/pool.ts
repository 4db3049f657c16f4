/**
 * Signature recovery on a Piscina worker pool, with micro-batching: one Piscina round trip costs about 30 µs, about a
 * third of one verification, so jobs are grouped and a worker recovers a whole batch per task.
 *
 * `verify()` encodes its job at once into the pending batch as a binary record (job-record.ts: all the parsing, about
 * 2 µs), so a batch travels to its worker as one byte array and comes back as one string of addresses: no per-object
 * structured cloning, and next to no allocation in the workers. A malformed job is answered without a worker.
 *
 * Batching policy:
 * - a batch is sent as soon as it holds `maxBatch` jobs, or when `maxDelayMicros` has passed since its first job;
 * - when workers are idle, the waiting jobs are split evenly across them (so 8 waiting jobs on 2 idle workers go as
 *   two tasks of 4, not one of 8);
 * - at most `maxInFlightPerThread × threads` batches are in flight (each worker busy plus one queued behind it); beyond
 *   that, jobs keep accumulating, so batches grow by themselves under load, and the next batch leaves as soon as a
 *   worker answers. At low load a job waits at most about `maxDelayMicros` before it is sent.
 *
 * Node timers have millisecond resolution: a `maxDelayMicros` below 1000 means "at the end of the current event-loop
 * turn" (`setImmediate`), which collects every `verify()` call made synchronously or by the same batch of I/O callbacks.
 *
 * `threads: 0` runs the same code in-process (no workers), still batched, for tests and tiny loads.
 */
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import type { Address } from 'viem';
import { ADDRESS_ASCII_BYTES, answerAt, encodeJob, JOB_RECORD_BYTES, recoverRecords } from './job-record.ts';
import type { VerifyJob } from './jobs.ts';
import type { RecordBatch } from './worker.ts';

export interface SignatureVerifierOptions {
  /** Worker threads; default: the number of cores. 0 verifies in-process. */
  threads?: number;
  /** Most jobs per worker task; default 64. */
  maxBatch?: number;
  /** Longest time the first job of a partial batch waits for company, in microseconds; default 200 (see above). */
  maxDelayMicros?: number;
  /** Batches in flight per thread before jobs are held back to grow the next batch; default 2. */
  maxInFlightPerThread?: number;
}

export interface SignatureVerifierStats {
  threads: number;
  /** Jobs accepted by `verify()`. */
  jobs: number;
  /** Batches sent (worker tasks, or in-process runs). */
  batches: number;
  /** Jobs waiting to be batched. */
  pending: number;
  /** Batches sent and not yet answered. */
  inFlight: number;
  /** Worker threads currently alive (0 after `close()`). */
  liveThreads: number;
  /** Batches whose worker task failed and which were therefore verified in-process (see `lastWorkerError`). */
  workerFailures: number;
  lastWorkerError: unknown;
}

type Resolve = (address: Address | undefined) => void;
type Reject = (error: unknown) => void;

const WORKER_ENTRY = fileURLToPath(new URL('./worker-entry.mjs', import.meta.url));

export class SignatureVerifier {
  readonly threads: number;
  readonly maxBatch: number;
  readonly maxDelayMicros: number;
  readonly #maxInFlight: number;
  readonly #pool: Piscina<RecordBatch, string> | undefined;

  /** Pending jobs, encoded: `#pending` records from record `#head` of `#records`. */
  #records: Uint8Array;
  #view: DataView;
  #head = 0;
  #pending = 0;
  #resolves: Resolve[] = [];
  #rejects: Reject[] = [];
  #timer: NodeJS.Immediate | NodeJS.Timeout | undefined;
  #inFlight = 0;
  readonly #running = new Set<Promise<void>>();
  #closed = false;
  #closing: Promise<void> | undefined;
  #jobCount = 0;
  #batchCount = 0;
  #workerFailures = 0;
  #lastWorkerError: unknown;

  constructor(opts: SignatureVerifierOptions = {}) {
    this.threads = wholeNumber(opts.threads, availableParallelism(), 'threads', 0);
    this.maxBatch = wholeNumber(opts.maxBatch, 64, 'maxBatch', 1);
    this.maxDelayMicros = wholeNumber(opts.maxDelayMicros, 200, 'maxDelayMicros', 0);
    this.#maxInFlight = this.threads === 0 ? 1 : this.threads * wholeNumber(opts.maxInFlightPerThread, 2, 'maxInFlightPerThread', 1);
    this.#records = new Uint8Array(this.maxBatch * JOB_RECORD_BYTES);
    this.#view = new DataView(this.#records.buffer);
    if (this.threads > 0) {
      this.#pool = new Piscina({
        filename: WORKER_ENTRY,
        minThreads: this.threads,
        maxThreads: this.threads,
        idleTimeout: Number.POSITIVE_INFINITY,
        concurrentTasksPerWorker: 1,
      });
      // A pool-level error (a worker that fails outside a task) must not crash the process; tasks report their own.
      this.#pool.on('error', () => {});
    }
  }

  /**
   * The address that signed the job's message (checksummed), or undefined when the job or its signature is
   * malformed or unacceptable. Rejects only when the verifier is closed. A batch whose worker task fails (a crashed
   * worker, a worker that could not load its code) is verified in-process instead and counted in `stats`.
   */
  verify(job: VerifyJob): Promise<Address | undefined> {
    if (this.#closed) return Promise.reject(new Error('SignatureVerifier is closed'));
    this.#jobCount++;
    if ((this.#head + this.#pending + 1) * JOB_RECORD_BYTES > this.#records.length) this.#makeRoom();
    if (!encodeJob(job, this.#records, this.#view, (this.#head + this.#pending) * JOB_RECORD_BYTES)) return MALFORMED;
    this.#pending++;
    const promise = new Promise<Address | undefined>((resolve, reject) => {
      this.#resolves.push(resolve);
      this.#rejects.push(reject);
    });
    if (this.#pending >= this.maxBatch && this.#inFlight < this.#maxInFlight) this.#dispatch();
    else if (this.#timer === undefined) this.#armTimer();
    return promise;
  }

  /**
   * Room for one more record (jobs pile up while every worker is busy): the pending ones move to the front, into an
   * array twice as large if they fill more than half of it. Batches are taken from the head, so under a deep queue
   * no batch moves the records behind it.
   */
  #makeRoom(): void {
    const from = this.#head * JOB_RECORD_BYTES;
    const to = (this.#head + this.#pending) * JOB_RECORD_BYTES;
    if (2 * (to - from) > this.#records.length) {
      const records = new Uint8Array(this.#records.length * 2);
      records.set(this.#records.subarray(from, to));
      this.#records = records;
      this.#view = new DataView(records.buffer);
    } else {
      this.#records.copyWithin(0, from, to);
    }
    this.#head = 0;
  }

  get stats(): SignatureVerifierStats {
    return {
      threads: this.threads,
      jobs: this.#jobCount,
      batches: this.#batchCount,
      pending: this.#pending,
      inFlight: this.#inFlight,
      liveThreads: this.#pool?.threads.length ?? 0,
      workerFailures: this.#workerFailures,
      lastWorkerError: this.#lastWorkerError,
    };
  }

  /** Stops accepting jobs, finishes every job already accepted, then ends the worker threads. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#closed = true;
    this.#clearTimer();
    this.#dispatch(true);
    while (this.#running.size > 0) await Promise.allSettled([...this.#running]);
    if (this.#pool !== undefined) await this.#pool.destroy();
  }

  #armTimer(): void {
    if (this.maxDelayMicros < 1000) this.#timer = setImmediate(this.#onTimer);
    else this.#timer = setTimeout(this.#onTimer, Math.round(this.maxDelayMicros / 1000));
  }

  #clearTimer(): void {
    if (this.#timer === undefined) return;
    clearImmediate(this.#timer as NodeJS.Immediate);
    clearTimeout(this.#timer as NodeJS.Timeout);
    this.#timer = undefined;
  }

  readonly #onTimer = (): void => {
    this.#timer = undefined;
    this.#dispatch();
  };

  /**
   * Sends pending jobs while there is room in flight (or unconditionally when closing). Batches hold at most
   * `maxBatch` jobs; when workers are idle, the pending jobs are split evenly across them, so that a moderate load
   * (fewer than `maxBatch × threads` jobs waiting) still keeps every worker busy.
   */
  #dispatch(ignoreCap = false): void {
    while (this.#pending > 0 && (ignoreCap || this.#inFlight < this.#maxInFlight)) {
      const pending = this.#pending;
      const idleWorkers = this.threads - this.#inFlight;
      const size = Math.min(this.maxBatch, idleWorkers > 1 ? Math.ceil(pending / idleWorkers) : pending);
      const records = this.#records.slice(this.#head * JOB_RECORD_BYTES, (this.#head + size) * JOB_RECORD_BYTES);
      let resolves: Resolve[];
      let rejects: Reject[];
      if (size === pending) {
        resolves = this.#resolves;
        rejects = this.#rejects;
        this.#resolves = [];
        this.#rejects = [];
        this.#head = 0;
      } else {
        resolves = this.#resolves.splice(0, size);
        rejects = this.#rejects.splice(0, size);
        this.#head += size;
      }
      this.#pending -= size;
      this.#run({ records, count: size }, resolves, rejects);
    }
    // Whatever is left waits for a batch to come back (which dispatches again).
    if (this.#pending > 0 && this.#timer !== undefined) this.#clearTimer();
  }

  #run(batch: RecordBatch, resolves: Resolve[], rejects: Reject[]): void {
    this.#inFlight++;
    this.#batchCount++;
    let result: Promise<string>;
    try {
      result = this.#pool === undefined ? new Promise((resolve) => setImmediate(() => resolve(recoverInProcess(batch)))) : this.#pool.run(batch);
    } catch (error) {
      result = Promise.reject(error);
    }
    // The next batch is sent before this one's callers resume, so a worker is not left idle meanwhile.
    const tracked: Promise<void> = result.then(
      (answers) => {
        this.#finished(tracked);
        for (let i = 0; i < resolves.length; i++) (resolves[i] as Resolve)(answerAt(answers, i));
      },
      (error: unknown) => {
        // A task can fail without any job being at fault (a worker that died). The answer does not depend on where
        // it is computed, so compute this batch here.
        this.#workerFailures++;
        this.#lastWorkerError = error;
        this.#finished(tracked);
        let answers: string;
        try {
          answers = recoverInProcess(batch);
        } catch (fallbackError) {
          for (const reject of rejects) reject(fallbackError);
          return;
        }
        for (let i = 0; i < resolves.length; i++) (resolves[i] as Resolve)(answerAt(answers, i));
      },
    );
    this.#running.add(tracked);
  }

  #finished(batch: Promise<void>): void {
    this.#running.delete(batch);
    this.#inFlight--;
    if (this.#pending === 0) return;
    // A full batch, or one whose timer was dropped while the pool was saturated, leaves now; a fresh partial batch
    // keeps waiting for its timer.
    if (this.#closed) this.#dispatch(true);
    else if (this.#pending >= this.maxBatch || this.#timer === undefined) this.#dispatch();
  }
}

/** The answer to a malformed job, shared (a settled promise can be handed out any number of times). */
const MALFORMED: Promise<Address | undefined> = Promise.resolve(undefined);

function recoverInProcess(batch: RecordBatch): string {
  return recoverRecords(batch.records, batch.count, Buffer.allocUnsafe(batch.count * ADDRESS_ASCII_BYTES));
}

function wholeNumber(value: number | undefined, fallback: number, name: string, min: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < min) throw new RangeError(`SignatureVerifier: ${name} must be an integer >= ${min}`);
  return value;
}
