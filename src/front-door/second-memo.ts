/**
 * What is made once per key within one `expires` second (a 402's frozen parts, a route's MPP challenge template):
 * everything kept is forgotten when the second turns, and the map is emptied before it holds more than `max` keys.
 */
export class SecondMemo<V> {
  readonly #max: number;
  readonly #kept = new Map<string, V>();
  #second = Number.NaN;

  constructor(max = 4096) {
    this.#max = max;
  }

  /** This second's value for `key`, made once. */
  get(second: number, key: string, make: () => V): V {
    if (second !== this.#second) {
      this.#second = second;
      this.#kept.clear();
    }
    const hit = this.#kept.get(key);
    if (hit !== undefined || this.#kept.has(key)) return hit as V;
    const made = make();
    if (this.#kept.size >= this.#max) this.#kept.clear();
    this.#kept.set(key, made);
    return made;
  }
}
