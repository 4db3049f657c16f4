/**
 * The merchant registry: the built-in catalog plus merchants that registered themselves with a signed message
 * (`POST /api/merchants`, see `validate.ts` and `signature.ts`).
 *
 * Storage: one record per slug in the store's collection `merchants`, holding the merchant and the nonces of the
 * signed messages accepted for that slug while they could still be replayed. Merchant and nonces live in the
 * same record so that one `put` changes both (the collection has no multi-key transactions). A delete leaves a
 * tombstone (`merchant: null`) that keeps the nonces: the slug is free again, but the deleted merchant's signed
 * messages cannot be replayed to resurrect it. Nonces are pruned once their `issuedAt` is outside the clock window
 * (such a message is refused as stale anyway).
 *
 * Rules: only a signature by `payTo` counts; `register` needs a free slug; `update`/`delete` need a signature by
 * the merchant's owner (the wallet that registered it, which is its payTo: payTo cannot change, delete and
 * register again to move); built-in merchants are operator-managed and cannot be changed by signature.
 * A refusal changes nothing (no record written, no file stored). Changes to one slug are serialised in-process, and
 * written conditionally cluster-wide (`merchant-records.ts`): each decision is taken on the record read from the store,
 * and written only if no node wrote the slug since, else read and taken again. So of two nodes registering one slug
 * at once exactly one wins (the other is told the slug is taken), and a signed message is accepted once. Gateways
 * sharing a PostgreSQL store each cache what they read: another node's change is told in its writing transaction,
 * and a cached record is revalidated within `revalidateMs` in case that notification was lost.
 *
 * Results (the shared vocabulary of `protocol/result.ts`): `ok({action, merchant})`, or a refusal with its code,
 * message and status: 400 (malformed, invalid,
 * stale, replayed, slug taken, upstream address forbidden), 403 (signature not by payTo, not the owner, built-in),
 * 404 (update/delete of an unknown slug). 409 is part of the type for callers' exhaustiveness but not produced:
 * a taken slug is a 400 (`slug … is taken`), as the acceptance criteria ask.
 */
import type { Hex } from 'viem';
import type { Merchant, Upstream } from '../catalog/merchant.ts';
import { canonicalJson } from '../../protocol/mpp/canonical-json.ts';
import { ok } from '../../protocol/result.ts';
import { parseJsonBytes } from '../../protocol/x402/codec.ts';
import type { Logger } from '../../log/logger.ts';
import { BOOT } from '../../cluster/boot.ts';
import { UpstreamAllowlist, type Resolver } from '../upstream-guard/guard.ts';
import { FileReferences } from './file-references.ts';
import { MerchantFiles } from './files.ts';
import { KeyedLock } from './keyed-lock.ts';
import { admitUpstream } from './registration-upstream.ts';
import type { BuiltinSeedReport, MerchantRegistryOptions, RegistryResult } from './registry-options.ts';
import { MERCHANT_VERSION_CLAIMS, MerchantRecords, type MerchantRecord } from './merchant-records.ts';
import { refuse } from './registry-refusals.ts';
import { recoverRegistrationSigner } from './signature.ts';
import type { ValidatedRegistration, ValidatedUpsert } from './types.ts';
import { DEFAULT_UPLOAD_BUDGETS, FILE_SWEEP_GRACE_MS, MerchantUploads, type FileSweepReport, type UploadBudgets } from './uploads.ts';
import type { Floor, PriceFloorSource } from '../../policy/price-floor.ts';
import { resolveLimits, type RegistrationLimits } from './registration-limits.ts';
import { checkMerchantSize, checkRoutesAboveFloors, DEFAULT_MERCHANT_SIZE_LIMITS, validateRegistrationRequest, type Checked, type MerchantSizeLimits } from './validate.ts';
import { DEFAULT_MAX_MERCHANTS_PER_WALLET, WALLET_SLOT_CLAIMS, WalletQuota, type WalletSlot } from './wallet-quota.ts';

export const MERCHANTS_COLLECTION = 'merchants';

/** Conditional writes of one slug lost in a row before the registry gives up (each loss means another writer wrote). */
const WRITE_ATTEMPTS = 8;

export type { BuiltinSeedReport, MerchantRegistryOptions, RegistryResult } from './registry-options.ts';

function sameAddress(a: string, b: string): boolean {
  return a.toLowerCase() === b.toLowerCase();
}
export class MerchantRegistry {
  readonly #records: MerchantRecords;
  readonly #files: MerchantFiles;
  readonly #uploads: MerchantUploads;
  readonly #networks: { has(caip2: string): boolean };
  readonly #allowlist: UpstreamAllowlist;
  readonly #resolve: Resolver | undefined;
  readonly #resolveTimeoutMs: number | undefined;
  readonly #limits: RegistrationLimits;
  readonly #log: Logger | undefined;
  readonly #written: ((slug: string) => Promise<void>) | undefined;
  readonly #priceFloor: PriceFloorSource | undefined;
  readonly #locks = new KeyedLock();
  /** Told after every change (a durable write here, or another node's change being forgotten). */
  readonly #changeListeners = new Set<() => void>();
  readonly #quota: WalletQuota;
  readonly #size: MerchantSizeLimits;

  constructor(options: MerchantRegistryOptions) {
    this.#records = new MerchantRecords(options.store.collection<MerchantRecord>(MERCHANTS_COLLECTION), options.store.claims(MERCHANT_VERSION_CLAIMS), {
      ...(options.revalidateMs !== undefined ? { revalidateMs: options.revalidateMs } : {}),
      ...(options.now ? { now: options.now } : {}),
    });
    this.#files = new MerchantFiles(options.filesDir);
    const budgets = { ...DEFAULT_UPLOAD_BUDGETS, ...options.uploadBudgets };
    const sweepGraceMs = options.sweepGraceMs ?? (options.written ? FILE_SWEEP_GRACE_MS : 0);
    this.#uploads = new MerchantUploads(this.#records, this.#files, new FileReferences(options.store), budgets, sweepGraceMs, this.#locks, options.log);
    this.#networks = options.networks;
    this.#allowlist = options.upstreamAllowlist instanceof UpstreamAllowlist ? options.upstreamAllowlist : new UpstreamAllowlist(options.upstreamAllowlist ?? []);
    this.#resolve = options.resolve;
    this.#resolveTimeoutMs = options.resolveTimeoutMs;
    this.#limits = resolveLimits(options.limits);
    this.#log = options.log;
    this.#written = options.written;
    this.#quota = new WalletQuota(this.#records, options.store.claims(WALLET_SLOT_CLAIMS), options.maxMerchantsPerWallet ?? DEFAULT_MAX_MERCHANTS_PER_WALLET, this.#locks, options.log);
    this.#size = { ...DEFAULT_MERCHANT_SIZE_LIMITS, ...options.size };
    this.#priceFloor = options.priceFloor;
  }

  /** Calls `listener` after each change of any merchant (see {@link MerchantSnapshot}); returns how to stop. */
  onChange(listener: () => void): () => void {
    this.#changeListeners.add(listener);
    return () => this.#changeListeners.delete(listener);
  }

  #changed(): void {
    for (const listener of this.#changeListeners) {
      try {
        listener();
      } catch (error) {
        this.#log?.error('a merchant change listener failed', { error });
      }
    }
  }
  /** Drops the cached record of `slug` (or every one): another node wrote it, so the next read asks the store. */
  forget(slug?: string): void {
    this.#records.forget(slug);
    this.#quota.forget();
    this.#changed();
  }

  /** Slugs whose record is held in memory (for tests: bounded whatever buyers ask for). */
  get cachedRecords(): number {
    return this.#records.cached;
  }

  /**
   * Writes `record` after `read` if nobody wrote the slug since (see `merchant-records.ts`); false when someone did.
   * In a cluster, the other nodes hear of it from the write's own transaction (a trigger's NOTIFY), and `written`
   * is told too (a store without one, or a test).
   */
  async #write(slug: string, read: Readonly<MerchantRecord> | undefined, record: MerchantRecord, by: string): Promise<boolean> {
    const written = await this.#records.writeIf(slug, read, record, by);
    if (written === undefined) {
      // Another node wrote first: what this node knew of the slug (and of owners) is stale.
      this.#quota.forget();
      this.#changed();
      return false;
    }
    this.#quota.noteOwner(slug, written);
    this.#changed();
    if (this.#written) {
      // The write stands; a node that missed this hears of it by revalidation (the cache's bound), not never.
      await this.#written(slug).catch((error: unknown) => this.#log?.warn('could not tell the other nodes of a merchant change; they revalidate within their bound', { slug, error }));
    }
    return true;
  }

  get limits(): Readonly<RegistrationLimits> {
    return this.#limits;
  }

  get files(): MerchantFiles {
    return this.#files;
  }

  /**
   * The live merchant of `slug`: synchronously when its record is cached (the paid route answers its 402 without
   * waiting), else a promise of the store's answer.
   */
  get(slug: string): Merchant | undefined | Promise<Merchant | undefined> {
    if (!validKey(slug)) return undefined;
    const r = this.#records.read(slug);
    return r instanceof Promise ? r.then((record) => record?.merchant ?? undefined) : (r?.merchant ?? undefined);
  }

  /** Whether `slug` is a built-in (operator) merchant. */
  async isBuiltin(slug: string): Promise<boolean> {
    if (!validKey(slug)) return false;
    const r = await this.#records.read(slug);
    return r?.merchant != null && r.builtin;
  }

  /** Every live merchant, by slug. */
  async list(): Promise<Merchant[]> {
    const out: Merchant[] = [];
    for await (const [, record] of this.#records.entries()) if (record.merchant) out.push(record.merchant);
    return out;
  }

  /** The stored record of `slug` (tombstones included), for inspection and tests. */
  async record(slug: string): Promise<MerchantRecord | undefined> {
    if (!validKey(slug)) return undefined;
    return this.#records.read(slug);
  }

  readMerchantFile(sha256: string): Promise<Uint8Array | undefined> {
    return this.#files.read(sha256);
  }

  /**
   * Handles a `POST /api/merchants` body (parsed JSON, or the raw bytes). `now` is unix milliseconds.
   * Never throws for anything the client sent; a storage failure does throw.
   */
  async register(body: unknown, now: number = Date.now()): Promise<RegistryResult> {
    let parsed = body;
    if (body instanceof Uint8Array) {
      const p = parseJsonBytes(body);
      if (!p.ok) return refuse(400, `body is not JSON: ${p.error.message}`);
      parsed = p.value;
    }
    const valid = validateRegistrationRequest(parsed, {
      networks: this.#networks,
      nowMs: now,
      limits: this.#limits,
      upstreamAllowlist: this.#allowlist,
    });
    if (!valid.ok) return refuse(400, valid.error.message);
    const { request, registration } = valid.value;
    if (registration.action !== 'delete') {
      const sized = checkMerchantSize(registration, this.#size);
      if (!sized.ok) return refuse(400, sized.error.message);
    }

    const signer = await recoverRegistrationSigner(request.registration, request.signature as Hex);
    if (signer === undefined || !sameAddress(signer, registration.payTo)) {
      return refuse(403, `signature is not a valid EIP-712 signature by payTo ${registration.payTo}`);
    }
    if (registration.action !== 'delete') {
      const floored = await this.#aboveFloors(registration);
      if (!floored.ok) return refuse(400, floored.error.message);
    }

    // Registrations by one wallet are counted one at a time: concurrent ones cannot all pass its quota.
    const walletTurn = registration.action === 'register' ? await this.#quota.turn(signer) : undefined;
    const result = await this.#withLock(registration.slug, () => this.#apply(registration, signer, now)).finally(() => walletTurn?.());
    if (result.ok)
      this.#log?.info(`merchant ${result.value.action === 'delete' ? 'deleted' : result.value.action === 'update' ? 'updated' : 'registered'}`, {
        slug: registration.slug,
        owner: signer,
        upstreamKind: result.value.merchant.upstream.kind,
      });
    else this.#log?.info('merchant registration refused', { slug: registration.slug, action: registration.action, status: result.error.status });
    return result;
  }

  /**
   * Decides on the stored record and writes conditionally (see `merchant-records.ts`): when another node wrote the
   * slug meanwhile, the record is read again and the decision taken again, so a slug is taken once and a signed
   * message accepted once however many nodes receive it at the same time. The upstream is checked (or stored) once.
   */
  async #apply(registration: ValidatedRegistration, signer: string, now: number): Promise<RegistryResult> {
    // A registration's wallet slot (see `wallet-quota.ts`), given back unless its merchant is written.
    const slot: { held?: WalletSlot } = {};
    let result: RegistryResult | undefined;
    try {
      result = await this.#decide(registration, signer, now, slot);
      return result;
    } finally {
      if (slot.held && !result?.ok)
        await slot.held.release().catch((error: unknown) => this.#log?.warn('could not give a wallet slot back; it frees itself later', { slug: registration.slug, error }));
    }
  }

  async #decide(registration: ValidatedRegistration, signer: string, now: number, slot: { held?: WalletSlot }): Promise<RegistryResult> {
    const slug = registration.slug;
    let upstream: Upstream | undefined;
    for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt++) {
      const record = await this.#records.readFresh(slug);
      if (record?.nonces.some((n) => n.nonce === registration.nonce)) return refuse(400, `nonce already used for ${slug}: sign a new registration with a fresh nonce`);
      const current = record?.merchant ?? null;
      if (registration.action === 'register') {
        if (current) return refuse(400, `slug ${slug} is taken`);
        const quota = await this.#quota.check(signer, slug);
        if (!quota.ok) return quota;
      } else {
        if (!current) return refuse(404, `no merchant ${slug}`);
        if (record?.builtin) return refuse(403, `${slug} is a built-in merchant managed by the operator`);
        if (!sameAddress(current.owner, signer)) return refuse(403, `only the owner of ${slug} may ${registration.action} it`);
      }
      const nonces = this.#liveNonces(record, now);
      nonces.push({ nonce: registration.nonce, issuedAt: registration.issuedAt });
      const by = `${registration.action} ${BOOT}`;

      if (registration.action === 'delete') {
        if (!(await this.#write(slug, record, { merchant: null, builtin: false, nonces }, by))) continue;
        await this.#quota
          .freeSlot(current!.owner, slug, now)
          .catch((error: unknown) => this.#log?.warn('could not give a deleted merchant’s wallet slot back; it frees itself later', { slug, error }));
        await this.#uploads.letGo(slug, current, null);
        return ok({ action: 'delete' as const, merchant: current! });
      }
      if (upstream === undefined) {
        const stored = await admitUpstream(registration, now, {
          allowlist: this.#allowlist,
          uploads: this.#uploads,
          ...(this.#resolve ? { resolve: this.#resolve } : {}),
          ...(this.#resolveTimeoutMs !== undefined ? { resolveTimeoutMs: this.#resolveTimeoutMs } : {}),
          ...(this.#log ? { log: this.#log } : {}),
        });
        if (!stored.ok) return stored;
        upstream = stored.value;
      }
      if (registration.action === 'register' && !slot.held) {
        // Taken last, just before the write: a refusal above (the upstream, the slug) holds no slot.
        const taken = await this.#quota.takeSlot(signer, slug, now);
        if (!taken.ok) return taken;
        slot.held = taken.value;
      }
      const merchant: Merchant = {
        slug,
        name: registration.name,
        description: registration.description,
        payTo: registration.payTo,
        networks: registration.networks,
        upstream,
        routes: registration.routes,
        owner: registration.payTo,
        createdAt: current?.createdAt ?? now,
        updatedAt: now,
      };
      if (!(await this.#write(slug, record, { merchant, builtin: false, nonces }, by))) continue;
      await this.#uploads.letGo(slug, current, merchant);
      return ok({ action: registration.action, merchant });
    }
    throw new Error(`merchant ${slug}: another writer won ${WRITE_ATTEMPTS} times in a row`);
  }

  /** Every route at or above the live price floor of each network the merchant accepts (none configured: no check). */
  async #aboveFloors(r: ValidatedUpsert): Promise<Checked<true>> {
    const source = this.#priceFloor;
    if (!source) return ok(true);
    const floors = await Promise.all(r.networks.map((n) => source.floorOn(n).catch(() => undefined)));
    return checkRoutesAboveFloors(
      r.routes,
      floors.filter((f): f is Floor => f !== undefined),
    );
  }

  /** What a crash left behind among the uploaded files, collected, as a gateway starts (see `uploads.ts`). */
  sweepFiles(now: number = Date.now(), graceMs?: number): Promise<FileSweepReport> {
    return this.#uploads.sweep(now, graceMs);
  }

  /** Bytes of uploads charged to `owner` (each of its merchants' files, at its size). */
  uploadBytesOf(owner: string): Promise<number> {
    return this.#uploads.bytesOf(owner);
  }

  get uploadBudgets(): Readonly<UploadBudgets> {
    return this.#uploads.budgets;
  }

  /** The record's nonces that could still be replayed at `now` (older ones are refused as stale anyway). */
  #liveNonces(record: MerchantRecord | undefined, now: number): { nonce: string; issuedAt: number }[] {
    const oldest = now / 1000 - this.#limits.clockSkewSeconds - 60;
    return (record?.nonces ?? []).filter((n) => n.issuedAt >= oldest).map((n) => ({ nonce: n.nonce, issuedAt: n.issuedAt }));
  }

  /** Operator removal of a merchant (no signature). Resolves to whether there was one. */
  async delete(slug: string): Promise<boolean> {
    if (!validKey(slug)) return false;
    return this.#withLock(slug, async () => {
      for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt++) {
        const record = await this.#records.readFresh(slug);
        if (!record?.merchant) return false;
        if (!(await this.#write(slug, record, { merchant: null, builtin: false, nonces: this.#liveNonces(record, Date.now()) }, `operator-delete ${BOOT}`))) continue;
        await this.#uploads.letGo(slug, record.merchant, null);
        this.#log?.info('merchant removed by the operator', { slug });
        return true;
      }
      throw new Error(`merchant ${slug}: another writer won ${WRITE_ATTEMPTS} times in a row`);
    });
  }

  /**
   * Seeds the built-in catalog (operator-owned; no signature). A built-in slug already held by a self-registered
   * merchant is left alone and reported as a conflict; unchanged merchants are not rewritten.
   */
  async upsertBuiltin(merchants: readonly Merchant[]): Promise<BuiltinSeedReport> {
    const report: BuiltinSeedReport = { written: [], unchanged: [], conflicts: [] };
    for (const m of merchants) {
      await this.#withLock(m.slug, async () => {
        for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt++) {
          const record = await this.#records.readFresh(m.slug);
          if (record?.merchant && !record.builtin) {
            report.conflicts.push(m.slug);
            this.#log?.warn('built-in merchant slug is held by a registered merchant; skipping it', { slug: m.slug });
            return;
          }
          const next: MerchantRecord = { merchant: structuredClone(m), builtin: true, nonces: record?.nonces.map((n) => ({ ...n })) ?? [] };
          // Identical (another node, or an earlier start, seeded the same catalog): nothing is written.
          if (record && sameJson({ ...record, version: 0 }, { ...next, version: 0 })) {
            report.unchanged.push(m.slug);
            return;
          }
          if (!(await this.#write(m.slug, record, next, `builtin ${BOOT}`))) continue;
          report.written.push(m.slug);
          return;
        }
        throw new Error(`merchant ${m.slug}: another writer won ${WRITE_ATTEMPTS} times in a row`);
      });
    }
    return report;
  }

  #withLock<T>(slug: string, fn: () => Promise<T>): Promise<T> {
    return this.#locks.run(slug, fn);
  }
}

/** LMDB keys are at most 1978 bytes; slugs are short. */
function validKey(slug: string): boolean {
  return typeof slug === 'string' && slug.length > 0 && slug.length <= 128;
}

function sameJson(a: unknown, b: unknown): boolean {
  const x = canonicalJson(a);
  const y = canonicalJson(b);
  return x.ok && y.ok && x.value === y.value;
}
