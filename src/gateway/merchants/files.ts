/**
 * Uploaded merchant files, stored content-addressed: `<dir>/<sha256 hex>`. A file is written once (to a temporary
 * name in the same directory, fsynced, then renamed into place, and the directory fsynced), so a reader never
 * sees a partial file and a crash leaves at most a stray `.tmp-*` file. Equal content is stored once.
 *
 * Files are never deleted here: several merchants may share one (deduplication), and a merchant deleted or
 * updated away from a file leaves it behind (a garbage collector would scan the registry for live hashes).
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, open, readFile, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';

const SHA256_HEX = /^[0-9a-f]{64}$/;

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
    const tmp = join(this.dir, `.tmp-${sha256.slice(0, 16)}-${randomBytes(8).toString('hex')}`);
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
}
