/**
 * What the merchant registry is made with, and what its writes answer (see `registry.ts`).
 */
import type { Merchant } from '../catalog/merchant.ts';
import type { Err, HttpFailure, Ok } from '../../protocol/result.ts';
import type { Logger } from '../../log/logger.ts';
import type { DurableCollection } from '../../store/durable-collection.ts';
import type { NonceClaims } from '../../store/nonce-claims.ts';
import type { Resolver, UpstreamAllowlist } from '../upstream-guard/guard.ts';
import type { PriceFloorSource } from '../../policy/price-floor.ts';
import type { RegistrationLimits } from './registration-limits.ts';
import type { RegistryFailureStatus, RegistryRefusalCode } from './registry-refusals.ts';
import type { RegistrationAction } from './types.ts';
import type { UploadBudget, UploadBudgets } from './uploads.ts';
import type { MerchantSizeLimits } from './validate.ts';

/** A refusal of the registry: its code, message and status (and the disk budget an upload exceeded). */
export type RegistryRefusal = Err<HttpFailure<RegistryRefusalCode> & { status: RegistryFailureStatus; budget?: UploadBudget }>;

export type RegistryResult = Ok<{ action: RegistrationAction; merchant: Merchant }> | RegistryRefusal;

export interface BuiltinSeedReport {
  /** Slugs inserted or changed. */
  written: string[];
  unchanged: string[];
  /** Slugs held by a self-registered merchant: that merchant is kept and the built-in one skipped. */
  conflicts: string[];
}

export interface MerchantRegistryOptions {
  /** `openStore(...)` (its collections, and its claims: every write of a slug claims its next version). */
  store: { collection<T>(name: string): DurableCollection<T>; claims(name: string): NonceClaims };
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
  /**
   * Serve a cached merchant at most this long (ms) before reading it from the store again: the bound on how long a
   * change another node made can go unseen when its notification is lost (`GATE402_MERCHANT_REVALIDATE_MS`).
   * Undefined: never (the store has no other writer).
   */
  revalidateMs?: number;
  /** Monotonic milliseconds for the cache's revalidation (tests drive it). */
  now?: () => number;
  /** Bounds on a merchant's size (its text in total), refused 400 at registration and update. */
  size?: Partial<MerchantSizeLimits>;
  /** The live price floor of each network: a register or update with a route below it is refused (400). */
  priceFloor?: PriceFloorSource;
}
