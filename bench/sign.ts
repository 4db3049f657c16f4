/**
 * Pre-signed payments for the paid benches: each request carries an authorization of its own, signed before the
 * clock starts by the official client, on worker threads over every core (about 1-3 ms a signature per core).
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import type { PaymentRequirements } from '../src/protocol/x402/types.ts';
import type { Buyer } from './devnet.ts';

export class SigningPool {
  readonly #workers: Worker[];

  constructor(threads = availableParallelism()) {
    const entry = new URL('./sign-worker.ts', import.meta.url).href;
    // A worker does not inherit the tsx loader of `node --import tsx`: the entry registers it, then loads the worker.
    const source = `import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}); })`;
    this.#workers = Array.from({ length: threads }, () => new Worker(source, { eval: true }));
  }

  /** `count` PAYMENT-SIGNATURE header values for `requirements`, payment i signed by buyer i mod `buyers.length`. */
  async sign(buyers: Buyer[], requirements: PaymentRequirements, count: number): Promise<string[]> {
    const keys = buyers.map((b) => b.key);
    const threads = this.#workers.length;
    const slices = await Promise.all(
      this.#workers.map(
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
