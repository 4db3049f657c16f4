/**
 * Point reads gathered, as `group-commit.ts` gathers writes: every read of one table by key (a record by its
 * collection and key, a claim's holder by its space and key) waits for the next statement of its table and scope,
 * which reads all the keys asked for meanwhile at once (`key = ANY($2)`). At most `maxInFlight` such statements run
 * at a time: under a storm of requests, hundreds of lookups become a few statements, and the pool's other
 * connections stay free for the writes that settle payments (with one statement per read, the writes of the payments
 * already admitted waited behind every newcomer's lookups, and the settlement queue's wait bound turned the rest away).
 *
 * A read sees every write acknowledged before it was asked: its statement starts after the ask. A statement that
 * fails fails every read it carried.
 */

/** Runs one lookup of `keys` in `scope`: the value of each key found (keys not found are absent). */
export type ReadKeys<V> = (scope: string, keys: string[]) => Promise<Map<string, V>>;

interface Waiting<V> {
  resolve(value: V | undefined): void;
  reject(err: unknown): void;
}

/** The most keys one statement carries; more wait for the next. */
const MAX_KEYS = 512;

export class GroupRead<V> {
  readonly #run: ReadKeys<V>;
  readonly #maxInFlight: number;
  /** Keys asked for and not yet in a statement, by scope, in the order first asked. */
  readonly #pending = new Map<string, Map<string, Waiting<V>[]>>();
  #inFlight = 0;
  #scheduled = false;

  constructor(run: ReadKeys<V>, maxInFlight: number) {
    this.#run = run;
    this.#maxInFlight = Math.max(1, maxInFlight);
  }

  /** The value stored under `key` in `scope`, read by the next statement of that scope. */
  get(scope: string, key: string): Promise<V | undefined> {
    return new Promise((resolve, reject) => {
      let keys = this.#pending.get(scope);
      if (keys === undefined) {
        keys = new Map();
        this.#pending.set(scope, keys);
      }
      const waiting = keys.get(key);
      if (waiting) waiting.push({ resolve, reject });
      else keys.set(key, [{ resolve, reject }]);
      this.#schedule();
    });
  }

  /** Statements start at the end of this turn (the reads asked in it go together), while fewer than the most run. */
  #schedule(): void {
    if (this.#scheduled || this.#inFlight >= this.#maxInFlight || this.#pending.size === 0) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      while (this.#inFlight < this.#maxInFlight && this.#pending.size > 0) this.#start();
    });
  }

  /** Takes the oldest scope's keys waiting (up to a statement's worth) into one statement. */
  #start(): void {
    const [scope, keys] = this.#pending.entries().next().value as [string, Map<string, Waiting<V>[]>];
    const taken = new Map<string, Waiting<V>[]>();
    for (const [key, waiting] of keys) {
      if (taken.size >= MAX_KEYS) break;
      taken.set(key, waiting);
      keys.delete(key);
    }
    if (keys.size === 0) this.#pending.delete(scope);
    this.#inFlight++;
    this.#run(scope, [...taken.keys()])
      .then(
        (found) => {
          for (const [key, waiting] of taken) for (const w of waiting) w.resolve(found.get(key));
        },
        (err: unknown) => {
          for (const waiting of taken.values()) for (const w of waiting) w.reject(err);
        },
      )
      .finally(() => {
        this.#inFlight--;
        this.#schedule();
      });
  }
}
