/**
 * The merchants as the discovery documents see them, read from the directory once per change rather than once per
 * request, and what is built from them, kept until the next change.
 *
 * A change is told by the directory (`onChange`: the registry tells each write, and each change another node made,
 * which reaches it through the cluster's LISTEN/NOTIFY); the next reader loads the list again (one load in flight,
 * however many wait for it) and every document built from the old list is dropped. A directory that tells nothing
 * is read again once `maxAgeMs` has passed. Counting the merchants (`/health`) is a field read.
 */
import { LRUCache } from 'lru-cache';
import type { Merchant } from '../catalog/merchant.ts';

export interface MerchantSource {
  list(): Promise<Merchant[]>;
  /** Calls `listener` after each change of any merchant; returns how to stop. Without it, `maxAgeMs` applies. */
  onChange?(listener: () => void): () => void;
}

export interface MerchantSnapshotOptions {
  /** How long a list read from a source that tells no changes is kept (default 5000 ms). */
  maxAgeMs?: number;
  /** Documents kept per version besides the fixed ones (pages, per-merchant documents), least recently used out. */
  maxKeyed?: number;
  /** Load the list again this long after a change, so that `count` follows without a reader (default 100 ms; 0: not). */
  reloadAfterChangeMs?: number;
  now?: () => number;
  /** Told of a load that failed in the background (a reader's own load rejects to it instead). */
  onError?: (error: unknown) => void;
}

/** One loaded list of merchants; `version` grows with every load. */
export interface MerchantView {
  readonly version: number;
  readonly merchants: readonly Merchant[];
  readonly bySlug: ReadonlyMap<string, Merchant>;
}

export class MerchantSnapshot {
  readonly #source: MerchantSource;
  readonly #maxAgeMs: number;
  readonly #reloadAfterChangeMs: number;
  readonly #now: () => number;
  readonly #onError: ((error: unknown) => void) | undefined;
  readonly #tellsChanges: boolean;
  #view: MerchantView | undefined;
  #loadedAt = Number.NEGATIVE_INFINITY;
  /** Changes told so far; a load that began before the last one is stale when it ends. */
  #changes = 0;
  #loadedChanges = -1;
  #loading: Promise<MerchantView> | undefined;
  #loadingChanges = -1;
  #reload: ReturnType<typeof setTimeout> | undefined;
  readonly #built = new Map<string, { version: number; value: unknown }>();
  readonly #keyed: LRUCache<string, { version: number; value: unknown }>;
  readonly #stop: (() => void) | undefined;

  constructor(source: MerchantSource, options: MerchantSnapshotOptions = {}) {
    this.#source = source;
    this.#maxAgeMs = options.maxAgeMs ?? 5000;
    this.#reloadAfterChangeMs = options.reloadAfterChangeMs ?? 100;
    this.#now = options.now ?? Date.now;
    this.#onError = options.onError;
    this.#keyed = new LRUCache({ max: options.maxKeyed ?? 256 });
    this.#tellsChanges = typeof source.onChange === 'function';
    this.#stop = source.onChange?.(() => this.changed());
  }

  /** Something changed: the next reader loads the list again (and soon a background load does). */
  changed(): void {
    this.#changes++;
    if (this.#reloadAfterChangeMs > 0 && this.#reload === undefined) {
      this.#reload = setTimeout(() => {
        this.#reload = undefined;
        Promise.resolve(this.current()).catch((error: unknown) => this.#onError?.(error));
      }, this.#reloadAfterChangeMs);
      this.#reload.unref?.();
    }
  }

  /** Merchants in the last list loaded (0 before the first): O(1), for `/health`. */
  get count(): number {
    return this.#view?.merchants.length ?? 0;
  }

  /** Whether the loaded list is still the directory's. */
  #fresh(): boolean {
    if (this.#view === undefined || this.#loadedChanges !== this.#changes) return false;
    if (this.#tellsChanges) return true;
    const t = this.#now();
    return t - this.#loadedAt < this.#maxAgeMs && t >= this.#loadedAt;
  }

  /** The current list: the one loaded, unless a change (or its age) asks for a new load. */
  current(): MerchantView | Promise<MerchantView> {
    if (this.#view !== undefined && this.#fresh()) return this.#view;
    // A load that began after the last change has it: wait for that one rather than start another.
    if (this.#loading !== undefined && this.#loadingChanges === this.#changes) return this.#loading;
    const changesAtStart = this.#changes;
    const startedAt = this.#now();
    const loading = this.#source
      .list()
      .then((merchants) => {
        // A load that began later has ended first: its list is the newer one.
        if (this.#view !== undefined && this.#loadedChanges > changesAtStart) return this.#view;
        const frozen = Object.freeze([...merchants]);
        const view: MerchantView = { version: (this.#view?.version ?? 0) + 1, merchants: frozen, bySlug: new Map(frozen.map((m) => [m.slug, m])) };
        this.#view = view;
        this.#loadedAt = startedAt;
        this.#loadedChanges = changesAtStart;
        this.#built.clear();
        this.#keyed.clear();
        return view;
      })
      .finally(() => {
        if (this.#loading === loading) this.#loading = undefined;
      });
    this.#loading = loading;
    this.#loadingChanges = changesAtStart;
    return loading;
  }

  /**
   * What `build` makes of the current list, built once per version under `key`. Fixed documents (a handful of
   * names) are kept until the next change; `keyed` ones (per page, per merchant) among the last `maxKeyed`.
   */
  async built<T>(key: string, build: (view: MerchantView) => T, keyed = false): Promise<T> {
    const view = await this.current();
    const cache = keyed ? this.#keyed : this.#built;
    const hit = cache.get(key);
    if (hit !== undefined && hit.version === view.version) return hit.value as T;
    const value = build(view);
    // A load that ended while this was built dropped the documents: what was built from the older list is not kept.
    if (this.#view === view) cache.set(key, { version: view.version, value });
    return value;
  }

  /** What {@link built} holds for `key` when the list is fresh and it was built from it: at once, without a promise. */
  peek<T>(key: string, keyed = false): T | undefined {
    const view = this.#view;
    if (view === undefined || !this.#fresh()) return undefined;
    const hit = (keyed ? this.#keyed : this.#built).get(key);
    return hit !== undefined && hit.version === view.version ? (hit.value as T) : undefined;
  }

  /** The loaded list when it is fresh, at once; else undefined (then `current()` loads it). */
  get view(): MerchantView | undefined {
    return this.#view !== undefined && this.#fresh() ? this.#view : undefined;
  }

  close(): void {
    if (this.#reload !== undefined) clearTimeout(this.#reload);
    this.#stop?.();
  }
}
