/**
 * Uploaded merchant files, stored content-addressed: `<dir>/<sha256 hex>`. A file is written once (to a temporary
 * name in the same directory, fsynced, then renamed into place, and the directory fsynced), so a reader never
 * sees a partial file and a crash leaves at most a stray `.tmp-*` file. Equal content is stored once.
 *
 * This class only keeps bytes; which files are still wanted is the registry's to say (`file-references.ts`): it
 * removes a file once no merchant references it, and sweeps the ones a crash left unreferenced.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, open, readdir, readFile, rename, rm, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';

const SHA256_HEX = /^[0-9a-f]{64}$/;
const TEMP_PREFIX = '.tmp-';

/** One entry of the directory: a stored file (by its hash) or a temporary one a write left behind. */
export interface StoredFile {
  name: string;
  /** The content address; absent for a temporary file. */
  sha256?: string;
  size: number;
  mtimeMs: number;
}

export function sha256Hex(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

export class MerchantFiles {
  readonly dir: string;
  #ready: Promise<void> | undefined;

  constructor(dir: string) {
    this.dir = dir;
  }

  #ensureDir(): Promise<void> {
    this.#ready ??= mkdir(this.dir, { recursive: true }).then(() => undefined);
    return this.#ready;
  }

  /** Where the file of `sha256` lives (whether or not it exists); throws a TypeError for a malformed hash. */
  pathOf(sha256: string): string {
    if (!SHA256_HEX.test(sha256)) throw new TypeError('sha256 must be 64 lower-case hex digits');
    return join(this.dir, sha256);
  }

  /** Stores `bytes` (unless an equal file is already there) and resolves once it is durable. */
  async put(bytes: Uint8Array): Promise<{ sha256: string; size: number }> {
    const sha256 = sha256Hex(bytes);
    const size = bytes.byteLength;
    const target = this.pathOf(sha256);
    await this.#ensureDir();
    const existing = await stat(target).catch(() => undefined);
    if (existing?.isFile() && existing.size === size) return { sha256, size };
    const tmp = join(this.dir, `${TEMP_PREFIX}${sha256.slice(0, 16)}-${randomBytes(8).toString('hex')}`);
    try {
      const fh = await open(tmp, 'wx', 0o644);
      try {
        await fh.writeFile(bytes);
        await fh.sync();
      } finally {
        await fh.close();
      }
      await rename(tmp, target);
    } catch (e) {
      await rm(tmp, { force: true }).catch(() => {});
      throw e;
    }
    await this.#syncDir();
    return { sha256, size };
  }

  async #syncDir(): Promise<void> {
    let dh: Awaited<ReturnType<typeof open>> | undefined;
    try {
      dh = await open(this.dir, 'r');
      await dh.sync();
    } catch {
      // Some platforms cannot fsync a directory; the rename is still atomic.
    } finally {
      await dh?.close();
    }
  }

  /** The file's bytes, or `undefined` when there is no such file (or the hash is malformed). */
  async read(sha256: string): Promise<Uint8Array | undefined> {
    if (!SHA256_HEX.test(sha256)) return undefined;
    try {
      return new Uint8Array(await readFile(this.pathOf(sha256)));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw e;
    }
  }

  async has(sha256: string): Promise<boolean> {
    if (!SHA256_HEX.test(sha256)) return false;
    const s = await stat(this.pathOf(sha256)).catch(() => undefined);
    return s?.isFile() === true;
  }

  /** The size of the file of `sha256`, or `undefined` when there is none. */
  async sizeOf(sha256: string): Promise<number | undefined> {
    if (!SHA256_HEX.test(sha256)) return undefined;
    const s = await stat(this.pathOf(sha256)).catch(() => undefined);
    return s?.isFile() ? s.size : undefined;
  }

  /** Removes the file of `sha256` (durably: the directory is fsynced). Resolves to whether there was one. */
  async remove(sha256: string): Promise<boolean> {
    try {
      await unlink(this.pathOf(sha256));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw e;
    }
    await this.#syncDir();
    return true;
  }

  /** Removes a temporary file a write left behind (by its name, as {@link list} gave it). */
  async removeTemporary(name: string): Promise<void> {
    if (!name.startsWith(TEMP_PREFIX) || name.includes('/')) throw new TypeError(`not a temporary file: ${name}`);
    await rm(join(this.dir, name), { force: true });
  }

  /** Every file of the directory (stored and temporary; anything else there is not ours and is left out). */
  async list(): Promise<StoredFile[]> {
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw e;
    }
    const out: StoredFile[] = [];
    for (const name of names) {
      const stored = SHA256_HEX.test(name);
      if (!stored && !name.startsWith(TEMP_PREFIX)) continue;
      const s = await stat(join(this.dir, name)).catch(() => undefined);
      if (!s?.isFile()) continue;
      out.push({ name, ...(stored ? { sha256: name } : {}), size: s.size, mtimeMs: s.mtimeMs });
    }
    return out;
  }

  /** Bytes the stored files take (their sizes; temporary files included: they take disk too). */
  async bytes(): Promise<number> {
    let total = 0;
    for (const f of await this.list()) total += f.size;
    return total;
  }
}
