/**
 * Work serialised per key, in-process: one registration per slug at a time, one upload per owner, one registration
 * per wallet. Keys of different kinds share one lock without meeting (a slug never holds `:`; the others are prefixed).
 */
export class KeyedLock {
  readonly #locks = new Map<string, Promise<unknown>>();

  /** Runs `fn` once every earlier holder of `key` has finished (whether it succeeded or not). */
  async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.#locks.get(key) ?? Promise.resolve();
    const run = previous.then(fn, fn);
    const tail = run.catch(() => {});
    this.#locks.set(key, tail);
    try {
      return await run;
    } finally {
      if (this.#locks.get(key) === tail) this.#locks.delete(key);
    }
  }

  /** Waits for `key`'s turn; resolves to its release (to be called once, by the holder). */
  async turn(key: string): Promise<() => void> {
    const previous = this.#locks.get(key) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((resolve) => {
      release = resolve;
    });
    const tail = previous.then(() => mine);
    this.#locks.set(key, tail);
    await previous;
    return () => {
      release();
      if (this.#locks.get(key) === tail) this.#locks.delete(key);
    };
  }
}
