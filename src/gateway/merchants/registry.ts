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
 * A refusal changes nothing (no record written, no file stored). Changes to one slug are serialised in-process;
 * the registry assumes it is the only writer of its collection (one gateway process per data directory; gateways
 * sharing a PostgreSQL store each cache what they read, so another node's change reaches a cache only once told).
 *
 * Results (the shared vocabulary of `protocol/result.ts`): `ok({action, merchant})`, or a refusal with its code,
 * message and status: 400 (malformed, invalid,
 * stale, replayed, slug taken, upstream address forbidden), 403 (signature not by payTo, not the owner, built-in),
 * 404 (update/delete of an unknown slug). 409 is part of the type for callers' exhaustiveness but not produced:
 * a taken slug is a 400 (`slug … is taken`), as the acceptance criteria ask.
 */
import { LRUCache } from 'lru-cache';
import type { Hex } from 'viem';
import type { Merchant, Upstream } from '../catalog/merchant.ts';
import { canonicalJson } from '../../protocol/mpp/canonical-json.ts';
import { ok, type Err, type HttpFailure, type Ok } from '../../protocol/result.ts';
import { parseJsonBytes } from '../../protocol/x402/codec.ts';
import type { Logger } from '../../log/logger.ts';
import type { DurableCollection } from '../../store/durable-collection.ts';
import { checkUpstreamUrl, UpstreamAllowlist, type Resolver } from '../upstream-guard/guard.ts';
import { FileReferences } from './file-references.ts';
import { MerchantFiles, sha256Hex } from './files.ts';
import { recoverRegistrationSigner } from './signature.ts';
import type { RegistrationAction, ValidatedUpsert } from './types.ts';
import type { Floor, PriceFloorSource } from '../../verify/price-floor.ts';
import {
  checkMerchantSize,
  checkRoutesAboveFloors,
  DEFAULT_MERCHANT_SIZE_LIMITS,
  resolveLimits,
  validateRegistrationRequest,
  type Checked,
  type MerchantSizeLimits,
  type RegistrationLimits,
} from './validate.ts';

export const MERCHANTS_COLLECTION = 'merchants';
/** Merchant records kept decoded in memory; beyond it the least recently used one is read from LMDB again. */
export const MERCHANT_CACHE_MAX = 10_000;

export interface MerchantRecord {
  /** `null` after a delete (a tombstone that remembers the nonces). */
  merchant: Merchant | null;
  /** Seeded from the operator's catalog by {@link MerchantRegistry.upsertBuiltin}; not changeable by signature. */
  builtin: boolean;
  /**
   * The signed messages accepted for this slug while they are still inside the clock window (a list, not an
   * object keyed by nonce: a nonce is merchant-chosen text and could be `__proto__`).
   */
  nonces: { nonce: string; issuedAt: number }[];
}

export type RegistryFailureStatus = 400 | 403 | 404 | 409 | 413;

/**
 * A refusal's code follows its status: 400 `invalid_registration`, 403 `forbidden`, 404 `not_found`, 409 `conflict`,
 * 413 `over_budget` (an upload over the wallet's or the gateway's disk budget; `budget` says which).
 */
export type RegistryRefusalCode = 'invalid_registration' | 'forbidden' | 'not_found' | 'conflict' | 'over_budget';

export type RegistryResult = Ok<{ action: RegistrationAction; merchant: Merchant }> | Err<HttpFailure<RegistryRefusalCode> & { status: RegistryFailureStatus; budget?: UploadBudget }>;

const REFUSAL_CODES: Readonly<Record<RegistryFailureStatus, RegistryRefusalCode>> = {
  400: 'invalid_registration',
  403: 'forbidden',
  404: 'not_found',
  409: 'conflict',
  413: 'over_budget',
};

export interface BuiltinSeedReport {
  /** Slugs inserted or changed. */
  written: string[];
  unchanged: string[];
  /** Slugs held by a self-registered merchant: that merchant is kept and the built-in one skipped. */
  conflicts: string[];
}

export interface MerchantRegistryOptions {
  /** `openStore(...)` (only `collection` is used). */
  store: { collection<T>(name: string): DurableCollection<T> };
  /** Networks the gateway settles on (a `NetworkRegistry`). */
  networks: { has(caip2: string): boolean };
  /** Where uploaded files are stored, content-addressed. */
  filesDir: string;
  /** Disk budgets of uploads (default {@link DEFAULT_UPLOAD_BUDGETS}). */
  uploadBudgets?: Partial<UploadBudgets>;
  /**
   * How old a reference without its merchant, or a temporary file, must be before {@link MerchantRegistry.sweepFiles}
   * removes it: 0 for a gateway alone with its store (nothing else writes meanwhile), {@link FILE_SWEEP_GRACE_MS} when
   * it shares one (`written` given): another gateway's registration may be under way.
   */
  sweepGraceMs?: number;
  /** Hosts / IPs / CIDRs an upstream may use although they are private (e.g. `127.0.0.1` for the devnet). */
  upstreamAllowlist?: UpstreamAllowlist | readonly string[];
  /** DNS for the registration-time upstream check (injectable for tests). */
  resolve?: Resolver;
  resolveTimeoutMs?: number;
  limits?: Partial<RegistrationLimits>;
  log?: Logger;
  /**
   * Told each slug written, once the write is durable: in a cluster it tells the other nodes, whose registries
   * {@link MerchantRegistry.forget} it (their cached record is stale).
   */
  written?: (slug: string) => Promise<void>;
  /**
   * Most live merchants one wallet (payTo, which signs) may hold; a registration past it is refused 403. Built-in
   * merchants are not counted. Default {@link DEFAULT_MAX_MERCHANTS_PER_WALLET}.
   */
  maxMerchantsPerWallet?: number;
  /** Bounds on a merchant's size (its text in total), refused 400 at registration and update. */
  size?: Partial<MerchantSizeLimits>;
  /** The live price floor of each network: a register or update with a route below it is refused (400). */
  priceFloor?: PriceFloorSource;
}

/** Most merchants one wallet may register, unless configured (`GATE402_MERCHANT_MAX_PER_WALLET`). */
export const DEFAULT_MAX_MERCHANTS_PER_WALLET = 20;

function refuse(status: RegistryFailureStatus, message: string): Err<HttpFailure<RegistryRefusalCode> & { status: RegistryFailureStatus }> {
  return { ok: false, error: { code: REFUSAL_CODES[status], message, status } };
}

function sameAddress(a: string, b: string): boolean {
  return a.toLowerCase() === b.toLowerCase();
}

/** `value`, frozen all the way down: cached records are shared by every caller. */
function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

export class MerchantRegistry {
  readonly #merchants: DurableCollection<MerchantRecord>;
  readonly #files: MerchantFiles;
  readonly #references: FileReferences;
  readonly #budgets: UploadBudgets;
  readonly #sweepGraceMs: number;
  readonly #networks: { has(caip2: string): boolean };
  readonly #allowlist: UpstreamAllowlist;
  readonly #resolve: Resolver | undefined;
  readonly #resolveTimeoutMs: number | undefined;
  readonly #limits: RegistrationLimits;
  readonly #log: Logger | undefined;
  readonly #written: ((slug: string) => Promise<void>) | undefined;
  readonly #priceFloor: PriceFloorSource | undefined;
  readonly #locks = new Map<string, Promise<unknown>>();
  /**
   * Records read or written, frozen, by slug: the paid route looks its merchant up on every request, and
   * decoding it from the store each time cost more than the rest of the 402. Sound because this registry is the only
   * writer of its collection (see the top of this file) and updates the cache once a write is durable.
   * Only slugs that have a record are kept (a miss costs the store no decoding, and anyone can ask for any slug), and
   * at most {@link MERCHANT_CACHE_MAX} of them, least recently used first out.
   */
  readonly #cache = new LRUCache<string, Readonly<MerchantRecord>>({ max: MERCHANT_CACHE_MAX });
  /** Store reads in flight, by slug (as many as requests for distinct uncached slugs are in flight). */
  readonly #reading = new Map<string, Promise<Readonly<MerchantRecord> | undefined>>();
  /** Told after every change (a durable write here, or another node's change being forgotten). */
  readonly #changeListeners = new Set<() => void>();
  readonly #maxPerWallet: number;
  readonly #size: MerchantSizeLimits;
  /** Live self-registered slugs by lower-cased owner (and each slug's owner), read once; dropped when another node writes. */
  #owned: { bySlug: Map<string, string>; byOwner: Map<string, Set<string>> } | undefined;

  constructor(options: MerchantRegistryOptions) {
    this.#merchants = options.store.collection<MerchantRecord>(MERCHANTS_COLLECTION);
    this.#files = new MerchantFiles(options.filesDir);
    this.#references = new FileReferences(options.store);
    this.#budgets = { ...DEFAULT_UPLOAD_BUDGETS, ...options.uploadBudgets };
    this.#sweepGraceMs = options.sweepGraceMs ?? (options.written ? FILE_SWEEP_GRACE_MS : 0);
    this.#networks = options.networks;
    this.#allowlist = options.upstreamAllowlist instanceof UpstreamAllowlist ? options.upstreamAllowlist : new UpstreamAllowlist(options.upstreamAllowlist ?? []);
    this.#resolve = options.resolve;
    this.#resolveTimeoutMs = options.resolveTimeoutMs;
    this.#limits = resolveLimits(options.limits);
    this.#log = options.log;
    this.#written = options.written;
    this.#maxPerWallet = options.maxMerchantsPerWallet ?? DEFAULT_MAX_MERCHANTS_PER_WALLET;
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
    if (slug === undefined) this.#cache.clear();
    else this.#cache.delete(slug);
    this.#owned = undefined;
    this.#changed();
  }

  /**
   * At once from the cache; else once the store has answered (in PostgreSQL, a round trip), one read per slug
   * however many requests ask for it meanwhile (a cold node's first burst costs the store one query).
   */
  #read(slug: string): Readonly<MerchantRecord> | undefined | Promise<Readonly<MerchantRecord> | undefined> {
    const hit = this.#cache.get(slug);
    if (hit !== undefined) return hit;
    let reading = this.#reading.get(slug);
    if (!reading) {
      reading = this.#merchants
        .get(slug)
        .then((record) => {
          // A write that landed while this read was out has cached the newer record: it stays.
          const cached = this.#cache.get(slug);
          if (cached !== undefined) return cached;
          const frozen = deepFreeze(record);
          if (frozen !== undefined) this.#cache.set(slug, frozen);
          return frozen;
        })
        .finally(() => this.#reading.delete(slug));
      this.#reading.set(slug, reading);
    }
    return reading;
  }

  /** Slugs whose record is held in memory (for tests: bounded whatever buyers ask for). */
  get cachedRecords(): number {
    return this.#cache.size;
  }

  async #write(slug: string, record: MerchantRecord): Promise<void> {
    this.#cache.delete(slug); // a failed write leaves the next read to the store
    await this.#merchants.put(slug, record);
    this.#cache.set(slug, deepFreeze(structuredClone(record)));
    this.#noteOwner(slug, record);
    this.#changed();
    // The write stands whether or not the others hear of it now (a listener that reconnects reloads everything).
    await this.#written?.(slug).catch((error: unknown) => this.#log?.warn('could not tell the other nodes of a merchant change', { slug, error }));
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
    const r = this.#read(slug);
    return r instanceof Promise ? r.then((record) => record?.merchant ?? undefined) : (r?.merchant ?? undefined);
  }

  /** Whether `slug` is a built-in (operator) merchant. */
  async isBuiltin(slug: string): Promise<boolean> {
    if (!validKey(slug)) return false;
    const r = await this.#read(slug);
    return r?.merchant != null && r.builtin;
  }

  /** Every live merchant, by slug. */
  async list(): Promise<Merchant[]> {
    const out: Merchant[] = [];
    for await (const [, record] of this.#merchants.entries()) if (record.merchant) out.push(record.merchant);
    return out;
  }

  /** The stored record of `slug` (tombstones included), for inspection and tests. */
  async record(slug: string): Promise<MerchantRecord | undefined> {
    if (!validKey(slug)) return undefined;
    return this.#read(slug);
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
    const walletTurn = registration.action === 'register' ? await this.#walletTurn(signer) : undefined;
    const result = await this.#withLock(registration.slug, async (): Promise<RegistryResult> => {
      const slug = registration.slug;
      const record = await this.#read(slug);
      if (record?.nonces.some((n) => n.nonce === registration.nonce)) return refuse(400, `nonce already used for ${slug}: sign a new registration with a fresh nonce`);
      const current = record?.merchant ?? null;
      if (registration.action === 'register') {
        if (current) return refuse(400, `slug ${slug} is taken`);
        const quota = await this.#walletQuota(signer, slug);
        if (!quota.ok) return quota;
      } else {
        if (!current) return refuse(404, `no merchant ${slug}`);
        if (record?.builtin) return refuse(403, `${slug} is a built-in merchant managed by the operator`);
        if (!sameAddress(current.owner, signer)) return refuse(403, `only the owner of ${slug} may ${registration.action} it`);
      }
      const nonces = this.#liveNonces(record, now);
      nonces.push({ nonce: registration.nonce, issuedAt: registration.issuedAt });

      if (registration.action === 'delete') {
        await this.#write(slug, { merchant: null, builtin: false, nonces });
        await this.#letGo(slug, current, null);
        return ok({ action: 'delete' as const, merchant: current! });
      }
      const upstream = await this.#storeUpstream(registration, now);
      if (!upstream.ok) return upstream;
      const merchant: Merchant = {
        slug,
        name: registration.name,
        description: registration.description,
        payTo: registration.payTo,
        networks: registration.networks,
        upstream: upstream.value,
        routes: registration.routes,
        owner: registration.payTo,
        createdAt: current?.createdAt ?? now,
        updatedAt: now,
      };
      await this.#write(slug, { merchant, builtin: false, nonces });
      await this.#letGo(slug, current, merchant);
      return ok({ action: registration.action, merchant });
    }).finally(() => walletTurn?.());
    if (result.ok)
      this.#log?.info(`merchant ${result.value.action === 'delete' ? 'deleted' : result.value.action === 'update' ? 'updated' : 'registered'}`, {
        slug: registration.slug,
        owner: signer,
        upstreamKind: result.value.merchant.upstream.kind,
      });
    else this.#log?.info('merchant registration refused', { slug: registration.slug, action: registration.action, status: result.error.status });
    return result;
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

  /** Checks (DNS) or stores (file) the upstream. Runs after every other check, so a refusal stores nothing. */
  async #storeUpstream(r: ValidatedUpsert, now: number): Promise<Ok<Upstream> | Err<HttpFailure<RegistryRefusalCode> & { status: RegistryFailureStatus; budget?: UploadBudget }>> {
    const u = r.upstream;
    if (u.kind === 'url') {
      const check = await checkUpstreamUrl(u.baseUrl, {
        allowlist: this.#allowlist,
        ...(this.#resolve ? { resolve: this.#resolve } : {}),
        ...(this.#resolveTimeoutMs !== undefined ? { resolveTimeoutMs: this.#resolveTimeoutMs } : {}),
      });
      if (!check.ok) {
        this.#log?.warn('merchant upstream refused', { slug: r.slug, code: check.error.code, detail: check.error.detail });
        return refuse(400, check.error.message);
      }
      return ok({ kind: 'url', baseUrl: u.baseUrl, secretHeaders: { ...u.secretHeaders } });
    }
    const stored = await this.#storeFile(r.slug, r.payTo, u.content, now);
    if (!stored.ok) return stored;
    const { sha256, size } = stored.value;
    return ok({ kind: 'file', sha256, contentType: u.contentType, size, fileName: u.fileName });
  }

  /**
   * Stores an upload of `slug` within the budgets: refused (413, nothing written) when the owner's files, this one
   * instead of the slug's current one, would exceed the per-wallet budget, or a new file the total one. The reference
   * is durable before the file is stored (see `file-references.ts`). One owner's uploads are checked one at a time.
   */
  async #storeFile(
    slug: string,
    owner: string,
    content: Uint8Array,
    now: number,
  ): Promise<Ok<{ sha256: string; size: number }> | Err<HttpFailure<RegistryRefusalCode> & { status: 413; budget: UploadBudget }>> {
    const sha256 = sha256Hex(content);
    const size = content.byteLength;
    return this.#withLock(`owner:${owner.toLowerCase()}`, async () => {
      const wallet = (await this.#references.bytesOf(owner, slug)) + size;
      if (wallet > this.#budgets.walletBytes) {
        return overBudget('wallet', `uploads of ${owner} would take ${wallet} bytes, over the per-wallet budget of ${this.#budgets.walletBytes} bytes: delete or shrink another merchant's file first`);
      }
      if ((await this.#files.sizeOf(sha256)) === undefined) {
        const total = (await this.#files.bytes()) + size;
        if (total > this.#budgets.totalBytes) return overBudget('total', `this gateway's uploads would take ${total} bytes, over its budget of ${this.#budgets.totalBytes} bytes: try again later`);
      }
      await this.#references.hold(sha256, { slug, owner, size, at: now });
      await this.#files.put(content);
      return ok({ sha256, size });
    });
  }

  /**
   * After `slug`'s record changed from `before` to `after` (durably): the file `before` used, if `after` does not use
   * it, loses this reference, and is removed from disk once no merchant references it.
   */
  async #letGo(slug: string, before: Merchant | null | undefined, after: Merchant | null): Promise<void> {
    const was = before?.upstream.kind === 'file' ? before.upstream.sha256 : undefined;
    const is = after?.upstream.kind === 'file' ? after.upstream.sha256 : undefined;
    if (was === undefined || was === is) return;
    try {
      await this.#references.drop(was, slug);
      await this.#collect(was);
    } catch (error) {
      // The merchant's change stands; the file is left for the sweep at the next start.
      this.#log?.warn('could not remove a merchant file no longer used', { slug, sha256: was, error });
    }
  }

  /** Removes the file of `sha256` if nothing references it (written back if a reference was taken meanwhile). */
  async #collect(sha256: string): Promise<boolean> {
    if ((await this.#references.count(sha256)) > 0) return false;
    const bytes = await this.#files.read(sha256);
    if (bytes === undefined) return false;
    await this.#files.remove(sha256);
    if ((await this.#references.count(sha256)) > 0) {
      await this.#files.put(bytes);
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
  async sweepFiles(now: number = Date.now(), graceMs: number = this.#sweepGraceMs): Promise<FileSweepReport> {
    const report: FileSweepReport = { removedFiles: 0, removedBytes: 0, droppedReferences: 0, addedReferences: 0 };
    const used = new Map<string, Merchant>();
    for await (const [, record] of this.#merchants.entries()) {
      const m = record.merchant;
      if (m?.upstream.kind === 'file') used.set(`${m.upstream.sha256}/${m.slug}`, m);
    }
    const referenced = new Set<string>();
    for await (const { sha256, ref } of this.#references.all()) {
      const key = `${sha256}/${ref.slug}`;
      if (!used.has(key) && now - ref.at >= graceMs) {
        await this.#references.drop(sha256, ref.slug);
        report.droppedReferences++;
        continue;
      }
      referenced.add(key);
    }
    for (const [key, m] of used) {
      if (referenced.has(key) || m.upstream.kind !== 'file') continue;
      await this.#references.hold(m.upstream.sha256, { slug: m.slug, owner: m.owner, size: m.upstream.size, at: now });
      report.addedReferences++;
    }
    for (const f of await this.#files.list()) {
      if (f.sha256 === undefined) {
        if (now - f.mtimeMs >= graceMs) {
          await this.#files.removeTemporary(f.name);
          report.removedFiles++;
          report.removedBytes += f.size;
        }
      } else if (await this.#collect(f.sha256)) {
        report.removedFiles++;
        report.removedBytes += f.size;
      }
    }
    if (report.removedFiles || report.droppedReferences || report.addedReferences) this.#log?.info('merchant files swept', { ...report });
    return report;
  }

  /** Bytes of uploads charged to `owner` (each of its merchants' files, at its size). */
  uploadBytesOf(owner: string): Promise<number> {
    return this.#references.bytesOf(owner);
  }

  get uploadBudgets(): Readonly<UploadBudgets> {
    return this.#budgets;
  }

  /** Waits for the wallet's turn to register (one registration per wallet at a time); resolves to its release. */
  async #walletTurn(owner: string): Promise<() => void> {
    const key = `wallet:${owner.toLowerCase()}`; // a slug never holds ':'
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

  /** Whether `owner` may register one more merchant (403 past the per-wallet bound). */
  async #walletQuota(owner: string, slug: string): Promise<Ok<undefined> | Err<HttpFailure<RegistryRefusalCode> & { status: RegistryFailureStatus }>> {
    const held = (await this.#ownedIndex()).byOwner.get(owner.toLowerCase())?.size ?? 0;
    if (held < this.#maxPerWallet) return ok(undefined);
    this.#log?.info('merchant registration refused: wallet quota', { slug, owner, held });
    return refuse(403, `wallet ${owner} already holds ${held} merchants, the most one wallet may register (${this.#maxPerWallet}); delete one before registering ${slug}`);
  }

  /** Live self-registered merchants by owner: one pass over the collection, then kept up to date by each write. */
  async #ownedIndex(): Promise<{ bySlug: Map<string, string>; byOwner: Map<string, Set<string>> }> {
    if (this.#owned !== undefined) return this.#owned;
    const index = { bySlug: new Map<string, string>(), byOwner: new Map<string, Set<string>>() };
    for await (const [slug, record] of this.#merchants.entries()) if (record.merchant && !record.builtin) addOwned(index, slug, record.merchant.owner);
    this.#owned ??= index;
    return this.#owned;
  }

  #noteOwner(slug: string, record: MerchantRecord): void {
    const index = this.#owned;
    if (index === undefined) return;
    const before = index.bySlug.get(slug);
    if (before !== undefined) {
      index.bySlug.delete(slug);
      const set = index.byOwner.get(before);
      set?.delete(slug);
      if (set?.size === 0) index.byOwner.delete(before);
    }
    if (record.merchant && !record.builtin) addOwned(index, slug, record.merchant.owner);
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
      const record = await this.#read(slug);
      if (!record?.merchant) return false;
      await this.#write(slug, { merchant: null, builtin: false, nonces: this.#liveNonces(record, Date.now()) });
      await this.#letGo(slug, record.merchant, null);
      this.#log?.info('merchant removed by the operator', { slug });
      return true;
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
        const record = await this.#read(m.slug);
        if (record?.merchant && !record.builtin) {
          report.conflicts.push(m.slug);
          this.#log?.warn('built-in merchant slug is held by a registered merchant; skipping it', { slug: m.slug });
          return;
        }
        const next: MerchantRecord = { merchant: structuredClone(m), builtin: true, nonces: record?.nonces ?? [] };
        if (record && sameJson(record, next)) {
          report.unchanged.push(m.slug);
          return;
        }
        await this.#write(m.slug, next);
        report.written.push(m.slug);
      });
    }
    return report;
  }

  async #withLock<T>(slug: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.#locks.get(slug) ?? Promise.resolve();
    const run = previous.then(fn, fn);
    const tail = run.catch(() => {});
    this.#locks.set(slug, tail);
    try {
      return await run;
    } finally {
      if (this.#locks.get(slug) === tail) this.#locks.delete(slug);
    }
  }
}

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

function overBudget(budget: UploadBudget, message: string): Err<HttpFailure<RegistryRefusalCode> & { status: 413; budget: UploadBudget }> {
  return { ok: false, error: { code: 'over_budget', message, status: 413, budget } };
}

function addOwned(index: { bySlug: Map<string, string>; byOwner: Map<string, Set<string>> }, slug: string, owner: string): void {
  const key = owner.toLowerCase();
  index.bySlug.set(slug, key);
  let set = index.byOwner.get(key);
  if (set === undefined) {
    set = new Set();
    index.byOwner.set(key, set);
  }
  set.add(slug);
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
