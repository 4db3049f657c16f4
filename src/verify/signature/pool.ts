/**
 * Signature recovery on worker threads, with micro-batching: a round trip to a worker costs tens of microseconds,
 * a good part of one verification, so jobs are grouped and a worker recovers a whole batch per message.
 *
 * `verify()` encodes its job at once into the pending batch as a binary record (job-record.ts: all the parsing), so
 * a batch travels to its worker as one byte array and comes back as one string of addresses: no per-object
 * structured cloning, and next to no allocation in the workers. A malformed job is answered without a worker.
 *
 * Batching policy:
 * - a batch is sent as soon as it holds `maxBatch` jobs, or when `maxDelayMicros` has passed since its first job;
 * - when workers are idle, the waiting jobs are split evenly across them (so 8 waiting jobs on 2 idle workers go as
 *   two batches of 4, not one of 8);
 * - at most `maxInFlightPerThread × threads` batches are in flight (each worker busy plus one queued behind it); beyond
 *   that, jobs keep accumulating, so batches grow by themselves under load, and the next batch leaves as soon as a
 *   worker answers. At low load a job waits at most about `maxDelayMicros` before it is sent.
 *
 * Node timers have millisecond resolution: a `maxDelayMicros` below 1000 means "at the end of the current event-loop
 * turn" (`setImmediate`), which collects every `verify()` call made synchronously or by the same batch of I/O callbacks.
 *
 * The workers are plain `worker_threads` (worker-entry.mjs), each answering its batches in order. A batch its worker
 * cannot answer (the worker could not load, or died) is verified in-process instead; a worker that dies after having
 * worked is replaced. Idle workers do not keep the process alive.
 *
 * `threads: 0` runs the same code in-process (no workers), still batched, for tests and tiny loads.
 */
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { Address } from 'viem';
import { ADDRESS_ASCII_BYTES, answerAt, encodeJob, JOB_RECORD_BYTES, recoverRecords } from './job-record.ts';
import type { VerifyJob } from './jobs.ts';

export interface SignatureVerifierOptions {
  /** Worker threads; default: the number of cores. 0 verifies in-process. */
  threads?: number;
  /** Most jobs per batch; default 64. */
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
  /** Batches sent (to workers, or run in-process). */
  batches: number;
  /** Jobs waiting to be batched. */
  pending: number;
  /** Batches sent and not yet answered. */
  inFlight: number;
  /** Worker threads currently alive (0 after `close()`). */
  liveThreads: number;
  /** Batches their worker could not answer, which were therefore verified in-process (see `lastWorkerError`). */
  workerFailures: number;
  lastWorkerError: unknown;
}

type Resolve = (address: Address | undefined) => void;
type Reject = (error: unknown) => void;

/** Jobs sent together: their records and their callers. */
interface Batch {
  records: Uint8Array;
  resolves: Resolve[];
  rejects: Reject[];
}

/** What a worker answers to a batch: the addresses (job-record.ts `recoverRecords`), or why it could not. */
export type WorkerAnswer = string | { error: string };

/** One worker thread and the batches it has been sent, oldest first (it answers in order). */
interface Lane {
  worker: Worker | undefined;
  batches: Batch[];
}

const WORKER_ENTRY = fileURLToPath(new URL('./worker-entry.mjs', import.meta.url));

export class SignatureVerifier {
  readonly threads: number;
  readonly maxBatch: number;
  readonly maxDelayMicros: number;
  readonly #maxInFlight: number;
  readonly #lanes: Lane[] = [];

  /** Pending jobs, encoded: `#pending` records from record `#head` of `#records`. */
  #records: Uint8Array;
  #view: DataView;
  #head = 0;
  #pending = 0;
  #resolves: Resolve[] = [];
  #rejects: Reject[] = [];
  #timer: NodeJS.Immediate | NodeJS.Timeout | undefined;
  #inFlight = 0;
  #closed = false;
  #closing: Promise<void> | undefined;
  /** Resolved when nothing is in flight (for `close()`). */
  #drained: (() => void) | undefined;
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
    for (let i = 0; i < this.threads; i++) {
      const lane: Lane = { worker: undefined, batches: [] };
      this.#lanes.push(lane);
      this.#spawn(lane);
    }
  }

  /**
   * The address that signed the job's message (checksummed), or undefined when the job or its signature is
   * malformed or unacceptable. Rejects only when the verifier is closed.
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

  get stats(): SignatureVerifierStats {
    return {
      threads: this.threads,
      jobs: this.#jobCount,
      batches: this.#batchCount,
      pending: this.#pending,
      inFlight: this.#inFlight,
      liveThreads: this.#lanes.filter((lane) => lane.worker !== undefined).length,
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
    if (this.#inFlight > 0) await new Promise<void>((resolve) => (this.#drained = resolve));
    await Promise.all(
      this.#lanes.map((lane) => {
        const worker = lane.worker;
        lane.worker = undefined;
        return worker?.terminate();
      }),
    );
  }

  // ---- workers ------------------------------------------------------------------------------------------------------

  #spawn(lane: Lane): void {
    const worker = new Worker(WORKER_ENTRY);
    let answered = 0;
    lane.worker = worker;
    worker.on('message', (answer: WorkerAnswer) => {
      answered++;
      const batch = lane.batches.shift();
      if (lane.batches.length === 0) worker.unref();
      if (batch !== undefined) this.#answered(batch, answer);
    });
    // A worker that dies (an uncaught error, its memory limit) takes no batch with it: they are verified here, and
    // the lane gets a new worker, unless this one died before answering anything (then a new one would likely die
    // the same way: the lane stays empty, and its share goes to the other workers, or is verified in-process).
    // 'error' is followed by 'exit'; whichever comes first does it.
    const died = (error: unknown): void => {
      if (lane.worker !== worker) return;
      lane.worker = undefined;
      const orphans = lane.batches;
      lane.batches = [];
      if (!this.#closed && answered > 0) this.#spawn(lane);
      for (const batch of orphans) this.#answered(batch, { error: String(error) });
    };
    worker.on('error', died);
    worker.on('exit', (code) => died(new Error(`signature worker exited with code ${code}`)));
    // Referenced only while it has batches (see #send); after the listeners, as adding a 'message' one refs it again.
    worker.unref();
  }

  /** Sends a batch to the lane with the fewest batches in flight, or runs it in-process without workers. */
  #send(batch: Batch): void {
    this.#inFlight++;
    this.#batchCount++;
    let lane: Lane | undefined;
    for (const candidate of this.#lanes) if (candidate.worker !== undefined && (lane === undefined || candidate.batches.length < lane.batches.length)) lane = candidate;
    if (lane?.worker === undefined) {
      setImmediate(() => this.#answered(batch, this.threads === 0 ? undefined : { error: 'no live signature worker' }));
      return;
    }
    lane.batches.push(batch);
    if (lane.batches.length === 1) lane.worker.ref();
    lane.worker.postMessage(batch.records);
  }

  /** A batch is answered: by its worker, or (`undefined`, or a worker's error) by computing it here. */
  #answered(batch: Batch, answer: WorkerAnswer | undefined): void {
    this.#inFlight--;
    // The next batch is sent before this one's callers resume, so a worker is not left idle meanwhile.
    this.#refill();
    let answers: string | undefined;
    if (typeof answer === 'string') {
      answers = answer;
    } else {
      if (answer !== undefined) {
        this.#workerFailures++;
        this.#lastWorkerError = answer.error;
      }
      try {
        answers = recoverInProcess(batch); // the answer does not depend on where it is computed
      } catch (error) {
        for (const reject of batch.rejects) reject(error);
      }
    }
    if (answers !== undefined) {
      const { resolves } = batch;
      for (let i = 0; i < resolves.length; i++) (resolves[i] as Resolve)(answerAt(answers, i));
    }
    if (this.#inFlight === 0 && this.#drained !== undefined) this.#drained();
  }

  // ---- batching -------------------------------------------------------------------------------------------------------

  /** Room for one more record: the pending ones move to the front, into an array twice as large if they fill half. */
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
      this.#send({ records, resolves, rejects });
    }
    // Whatever is left waits for a batch to come back (which dispatches again).
    if (this.#pending > 0 && this.#timer !== undefined) this.#clearTimer();
  }

  /** After an answer: a full batch, or one whose timer was dropped while the pool was saturated, leaves now. */
  #refill(): void {
    if (this.#pending === 0) return;
    if (this.#closed) this.#dispatch(true);
    else if (this.#pending >= this.maxBatch || this.#timer === undefined) this.#dispatch();
  }
}

/** The answer to a malformed job, shared (a settled promise can be handed out any number of times). */
const MALFORMED: Promise<Address | undefined> = Promise.resolve(undefined);

function recoverInProcess(batch: Batch): string {
  const count = batch.records.length / JOB_RECORD_BYTES;
  return recoverRecords(batch.records, count, Buffer.allocUnsafe(count * ADDRESS_ASCII_BYTES));
}

function wholeNumber(value: number | undefined, fallback: number, name: string, min: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < min) throw new RangeError(`SignatureVerifier: ${name} must be an integer >= ${min}`);
  return value;
}
