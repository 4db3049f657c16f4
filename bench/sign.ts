/**
 * Pre-signed payments for the paid benches: each request carries an authorization of its own, signed before the
 * clock starts by the official client, on worker threads over every core (about 1-3 ms a signature per core).
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import type { PaymentRequirements } from '../src/protocol/x402/types.ts';
import type { Buyer } from './devnet.ts';

export class SigningPool {
  readonly #workers: Worker[] = [];
  readonly #threads: number;

  constructor(threads = availableParallelism()) {
    this.#threads = threads;
  }

  /** Started on demand: a worker for each 100 payments of the largest batch so far, up to `threads`. */
  #worker(): Worker {
    const entry = new URL('./sign-worker.ts', import.meta.url).href;
    // A worker does not inherit the tsx loader of `node --import tsx`: the entry registers it, then loads the worker.
    const worker = new Worker(`import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}); })`, { eval: true });
    this.#workers.push(worker);
    return worker;
  }

  /** `count` PAYMENT-SIGNATURE header values for `requirements`, payment i signed by buyer i mod `buyers.length`. */
  async sign(buyers: Buyer[], requirements: PaymentRequirements, count: number): Promise<string[]> {
    const keys = buyers.map((b) => b.key);
    const threads = Math.min(this.#threads, Math.ceil(count / 100));
    while (this.#workers.length < threads) this.#worker();
    const slices = await Promise.all(
      this.#workers.slice(0, threads).map(
        (worker, t) =>
          new Promise<string[]>((res, rej) => {
            const fail = (err: unknown) => rej(err instanceof Error ? err : new Error(`signing worker exited ${String(err)}`));
            worker.once('error', fail);
            worker.once('message', (headers: string[]) => {
              worker.off('error', fail);
              res(headers);
            });
            worker.postMessage({ keys, requirements, from: Math.floor((count * t) / threads), to: Math.floor((count * (t + 1)) / threads) });
          }),
      ),
    );
    return slices.flat();
  }

  async close(): Promise<void> {
    await Promise.all(this.#workers.map((w) => w.terminate()));
  }
}
