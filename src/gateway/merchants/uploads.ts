/**
 * Merchants' uploaded files within their disk budgets: stored content-addressed with a durable reference per
 * merchant (see `file-references.ts`), removed from disk once no merchant references them, and what a crash left
 * behind swept as a gateway starts.
 */
import type { Merchant } from '../catalog/merchant.ts';
import { ok, type Err, type HttpFailure, type Ok } from '../../protocol/result.ts';
import type { Logger } from '../../log/logger.ts';
import type { FileReferences } from './file-references.ts';
import { type MerchantFiles, sha256Hex } from './files.ts';
import type { KeyedLock } from './keyed-lock.ts';
import type { MerchantRecords } from './merchant-records.ts';
import { overBudget, type RegistryRefusalCode } from './registry-refusals.ts';

/** Which disk budget an upload was refused by. */
export type UploadBudget = 'wallet' | 'total';

export interface UploadBudgets {
  /** Bytes of uploaded files one wallet's merchants may reference (each merchant's file counted at its size). */
  walletBytes: number;
  /** Bytes the files directory may hold. */
  totalBytes: number;
}

/** Unless configured: 64 MiB per wallet (six files at the largest upload), 2 GiB in all. */
export const DEFAULT_UPLOAD_BUDGETS: Readonly<UploadBudgets> = { walletBytes: 64 * 1024 * 1024, totalBytes: 2 * 1024 * 1024 * 1024 };

/** How old a reference without its merchant, or a temporary file, must be before the sweep at start removes it. */
export const FILE_SWEEP_GRACE_MS = 10 * 60_000;

export interface FileSweepReport {
  removedFiles: number;
  removedBytes: number;
  droppedReferences: number;
  addedReferences: number;
}

export class MerchantUploads {
  private readonly records: MerchantRecords;
  private readonly files: MerchantFiles;
  private readonly references: FileReferences;
  readonly budgets: Readonly<UploadBudgets>;
  private readonly sweepGraceMs: number;
  private readonly lock: KeyedLock;
  private readonly log: Logger | undefined;
  constructor(records: MerchantRecords, files: MerchantFiles, references: FileReferences, budgets: Readonly<UploadBudgets>, sweepGraceMs: number, lock: KeyedLock, log: Logger | undefined) {
    this.records = records;
    this.files = files;
    this.references = references;
    this.budgets = budgets;
    this.sweepGraceMs = sweepGraceMs;
    this.lock = lock;
    this.log = log;
  }

  /**
   * Stores an upload of `slug` within the budgets: refused (413, nothing written) when the owner's files, this one
   * instead of the slug's current one, would exceed the per-wallet budget, or a new file the total one. The reference
   * is durable before the file is stored (see `file-references.ts`). One owner's uploads are checked one at a time.
   */
  async store(
    slug: string,
    owner: string,
    content: Uint8Array,
    now: number,
  ): Promise<Ok<{ sha256: string; size: number }> | Err<HttpFailure<RegistryRefusalCode> & { status: 413; budget: UploadBudget }>> {
    const sha256 = sha256Hex(content);
    const size = content.byteLength;
    return this.lock.run(`owner:${owner.toLowerCase()}`, async () => {
      const wallet = (await this.references.bytesOf(owner, slug)) + size;
      if (wallet > this.budgets.walletBytes) {
        return overBudget('wallet', `uploads of ${owner} would take ${wallet} bytes, over the per-wallet budget of ${this.budgets.walletBytes} bytes: delete or shrink another merchant's file first`);
      }
      if ((await this.files.sizeOf(sha256)) === undefined) {
        const total = (await this.files.bytes()) + size;
        if (total > this.budgets.totalBytes) return overBudget('total', `this gateway's uploads would take ${total} bytes, over its budget of ${this.budgets.totalBytes} bytes: try again later`);
      }
      await this.references.hold(sha256, { slug, owner, size, at: now });
      await this.files.put(content);
      return ok({ sha256, size });
    });
  }

  /**
   * After `slug`'s record changed from `before` to `after` (durably): the file `before` used, if `after` does not use
   * it, loses this reference, and is removed from disk once no merchant references it.
   */
  async letGo(slug: string, before: Merchant | null | undefined, after: Merchant | null): Promise<void> {
    const was = before?.upstream.kind === 'file' ? before.upstream.sha256 : undefined;
    const is = after?.upstream.kind === 'file' ? after.upstream.sha256 : undefined;
    if (was === undefined || was === is) return;
    try {
      await this.references.drop(was, slug);
      await this.#collect(was);
    } catch (error) {
      // The merchant's change stands; the file is left for the sweep at the next start.
      this.log?.warn('could not remove a merchant file no longer used', { slug, sha256: was, error });
    }
  }

  /** Removes the file of `sha256` if nothing references it (written back if a reference was taken meanwhile). */
  async #collect(sha256: string): Promise<boolean> {
    if ((await this.references.count(sha256)) > 0) return false;
    const bytes = await this.files.read(sha256);
    if (bytes === undefined) return false;
    await this.files.remove(sha256);
    if ((await this.references.count(sha256)) > 0) {
      await this.files.put(bytes);
      return false;
    }
    return true;
  }

  /**
   * What a crash (or a registry older than file references) left behind, collected, as a gateway starts: a reference is
   * added for each live merchant's file that has none; a reference whose merchant no longer uses its file is dropped
   * once older than `graceMs` (in a cluster, another gateway's registration may not have written its merchant yet);
   * then every stored file no reference names is removed, and every temporary file older than `graceMs`.
   */
  async sweep(now: number = Date.now(), graceMs: number = this.sweepGraceMs): Promise<FileSweepReport> {
    const report: FileSweepReport = { removedFiles: 0, removedBytes: 0, droppedReferences: 0, addedReferences: 0 };
    const used = new Map<string, Merchant>();
    for await (const [, record] of this.records.entries()) {
      const m = record.merchant;
      if (m?.upstream.kind === 'file') used.set(`${m.upstream.sha256}/${m.slug}`, m);
    }
    const referenced = new Set<string>();
    for await (const { sha256, ref } of this.references.all()) {
      const key = `${sha256}/${ref.slug}`;
      if (!used.has(key) && now - ref.at >= graceMs) {
        await this.references.drop(sha256, ref.slug);
        report.droppedReferences++;
        continue;
      }
      referenced.add(key);
    }
    for (const [key, m] of used) {
      if (referenced.has(key) || m.upstream.kind !== 'file') continue;
      await this.references.hold(m.upstream.sha256, { slug: m.slug, owner: m.owner, size: m.upstream.size, at: now });
      report.addedReferences++;
    }
    for (const f of await this.files.list()) {
      if (f.sha256 === undefined) {
        if (now - f.mtimeMs >= graceMs) {
          await this.files.removeTemporary(f.name);
          report.removedFiles++;
          report.removedBytes += f.size;
        }
      } else if (await this.#collect(f.sha256)) {
        report.removedFiles++;
        report.removedBytes += f.size;
      }
    }
    if (report.removedFiles || report.droppedReferences || report.addedReferences) this.log?.info('merchant files swept', { ...report });
    return report;
  }

  /** Bytes of uploads charged to `owner` (each of its merchants' files, at its size). */
  bytesOf(owner: string): Promise<number> {
    return this.references.bytesOf(owner);
  }
}
