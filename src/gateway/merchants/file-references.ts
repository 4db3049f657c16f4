/**
 * Who references which uploaded file: one record per (file, merchant), `<sha256>/<slug>`, in the store's collection
 * `merchant-file-references` (shared by every gateway of a PostgreSQL store, like the files directory). A file's count
 * is the number of its records; it is removed from disk when the count reaches zero.
 *
 * The order of writes is what keeps a wanted file on disk, also between gateways sharing a store and a directory:
 *  - a merchant that takes a file writes its reference (durably) before it stores the file and before its own record;
 *  - a merchant that lets a file go drops its reference after its own record stopped naming the file; if the count is
 *    then zero, the file is read, unlinked, and the count read again: a reference taken meanwhile (whose writer may
 *    have found the file still there and not stored it) has the bytes written back.
 * So a count read can only be too high (a reference whose merchant write never happened: a crash, a refusal
 * after the reference); such a reference is dropped by the sweep at start once it is older than a grace period, and
 * the sweep removes every file that neither a reference nor a live merchant names.
 */
import type { DurableCollection } from '../../store/durable-collection.ts';

export const FILE_REFERENCES_COLLECTION = 'merchant-file-references';

/** One merchant's use of one file: who is charged for it, and how much. */
export interface FileReference {
  slug: string;
  /** The merchant's owner (its payTo): charged `size` against the per-wallet budget. */
  owner: string;
  size: number;
  /** When it was taken (unix ms): a reference without its merchant is dropped only once it is old. */
  at: number;
}

export class FileReferences {
  readonly #refs: DurableCollection<FileReference>;

  constructor(store: { collection<T>(name: string): DurableCollection<T> }) {
    this.#refs = store.collection<FileReference>(FILE_REFERENCES_COLLECTION);
  }

  /** Records that `ref.slug` references `sha256`; resolves once durable. */
  hold(sha256: string, ref: FileReference): Promise<void> {
    return this.#refs.put(keyOf(sha256, ref.slug), ref);
  }

  drop(sha256: string, slug: string): Promise<void> {
    return this.#refs.remove(keyOf(sha256, slug));
  }

  /** How many merchants reference `sha256`. */
  async count(sha256: string): Promise<number> {
    let n = 0;
    for await (const _ of this.#refs.entries(`${sha256}/`)) n++;
    return n;
  }

  /** Every reference, with the file it names. */
  async *all(): AsyncGenerator<{ sha256: string; ref: FileReference }> {
    for await (const [key, ref] of this.#refs.entries()) yield { sha256: key.slice(0, key.indexOf('/')), ref };
  }

  /** Bytes charged to `owner`: the size of each file each of its merchants references, `except` one merchant's. */
  async bytesOf(owner: string, except?: string): Promise<number> {
    const who = owner.toLowerCase();
    let total = 0;
    for await (const { ref } of this.all()) if (ref.owner.toLowerCase() === who && ref.slug !== except) total += ref.size;
    return total;
  }
}

function keyOf(sha256: string, slug: string): string {
  return `${sha256}/${slug}`;
}
