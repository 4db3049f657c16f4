/**
 * Configuration of merchant registration and of the upstream guard, from the environment:
 *
 * | variable | default | meaning |
 * |---|---|---|
 * | `GATE402_MERCHANT_FILES_DIR` | `<GATE402_DATA_DIR>/merchant-files` | uploaded files, content-addressed |
 * | `GATE402_MERCHANT_MAX_FILE_BYTES` | 10485760 | largest upload (decoded) |
 * | `GATE402_MERCHANT_MIN_PRICE_USD` | `0.000001` | lowest route price |
 * | `GATE402_MERCHANT_MAX_PRICE_USD` | `1000.000000` | highest route price |
 * | `GATE402_MERCHANT_MAX_ROUTES` | 100 | routes per merchant |
 * | `GATE402_MERCHANT_CLOCK_SKEW_S` | 600 | accepted distance of `issuedAt` from the clock |
 * | `GATE402_MERCHANT_MAX_TEXT_BYTES` | 65536 | a merchant's text in total (name, description, every route's texts) |
 * | `GATE402_MERCHANT_MAX_PER_WALLET` | 20 | live merchants one payout wallet may register |
 * | `GATE402_UPSTREAM_ALLOWLIST` | (empty) | comma-separated hosts, IPs or CIDRs upstreams may use although private |
 * | `GATE402_MERCHANT_FILES_WALLET_BYTES` | 67108864 | bytes of uploads one wallet's merchants may reference |
 * | `GATE402_MERCHANT_FILES_TOTAL_BYTES` | 2147483648 | bytes the merchant files directory may hold |
 * | `GATE402_MERCHANT_REVALIDATE_MS` | 3000 | on a shared store, longest a node serves a cached merchant before reading it again |
 */
import { join, resolve } from 'node:path';
import { ConfigError, envInt, envString } from '../../config/env.ts';
import { UpstreamAllowlist } from '../upstream-guard/guard.ts';
import { DEFAULT_UPLOAD_BUDGETS, type UploadBudgets } from './uploads.ts';
import { DEFAULT_MAX_MERCHANTS_PER_WALLET } from './wallet-quota.ts';
import { DEFAULT_REGISTRATION_LIMITS, HARD_MAX_ROUTES, resolveLimits, type RegistrationLimits } from './registration-limits.ts';
import { DEFAULT_MERCHANT_SIZE_LIMITS, type MerchantSizeLimits } from './validate.ts';

export interface MerchantConfig {
  filesDir: string;
  upstreamAllowlist: UpstreamAllowlist;
  limits: RegistrationLimits;
  uploadBudgets: UploadBudgets;
  /** Live merchants one payout wallet may hold (`GATE402_MERCHANT_MAX_PER_WALLET`). */
  maxMerchantsPerWallet: number;
  /** A merchant's size as a whole (`GATE402_MERCHANT_MAX_TEXT_BYTES`). */
  size: MerchantSizeLimits;
  /**
   * On a shared store, the longest a node serves a cached merchant before reading it again
   * (`GATE402_MERCHANT_REVALIDATE_MS`): the bound on a change another node made going unseen when its notification
   * is lost.
   */
  revalidateMs: number;
}

/** Default of `GATE402_MERCHANT_REVALIDATE_MS`: a lost notification leaves an old price or wallet served 3 s at most. */
export const DEFAULT_MERCHANT_REVALIDATE_MS = 3000;

export function merchantConfigFromEnv(env: NodeJS.ProcessEnv = process.env): MerchantConfig {
  const dataDir = resolve(envString(env, 'GATE402_DATA_DIR', 'var/data'));
  const filesDir = resolve(envString(env, 'GATE402_MERCHANT_FILES_DIR', join(dataDir, 'merchant-files')));
  let upstreamAllowlist: UpstreamAllowlist;
  try {
    upstreamAllowlist = new UpstreamAllowlist(envString(env, 'GATE402_UPSTREAM_ALLOWLIST', '').split(','));
  } catch (e) {
    throw new ConfigError(`GATE402_UPSTREAM_ALLOWLIST: ${e instanceof Error ? e.message : String(e)}`);
  }
  let limits: RegistrationLimits;
  try {
    limits = resolveLimits({
      maxFileBytes: envInt(env, 'GATE402_MERCHANT_MAX_FILE_BYTES', DEFAULT_REGISTRATION_LIMITS.maxFileBytes, { min: 1, max: 1024 * 1024 * 1024 }),
      minPriceUsd: envString(env, 'GATE402_MERCHANT_MIN_PRICE_USD', DEFAULT_REGISTRATION_LIMITS.minPriceUsd),
      maxPriceUsd: envString(env, 'GATE402_MERCHANT_MAX_PRICE_USD', DEFAULT_REGISTRATION_LIMITS.maxPriceUsd),
      maxRoutes: envInt(env, 'GATE402_MERCHANT_MAX_ROUTES', DEFAULT_REGISTRATION_LIMITS.maxRoutes, { min: 1, max: HARD_MAX_ROUTES }),
      clockSkewSeconds: envInt(env, 'GATE402_MERCHANT_CLOCK_SKEW_S', DEFAULT_REGISTRATION_LIMITS.clockSkewSeconds, { min: 1, max: 86_400 }),
    });
  } catch (e) {
    if (e instanceof ConfigError) throw e;
    throw new ConfigError(`GATE402_MERCHANT_MIN_PRICE_USD / GATE402_MERCHANT_MAX_PRICE_USD: ${e instanceof Error ? e.message : String(e)}`);
  }
  const uploadBudgets = uploadBudgetsFromEnv(env, limits.maxFileBytes);
  return {
    filesDir,
    upstreamAllowlist,
    limits,
    uploadBudgets,
    maxMerchantsPerWallet: envInt(env, 'GATE402_MERCHANT_MAX_PER_WALLET', DEFAULT_MAX_MERCHANTS_PER_WALLET, { min: 1, max: 1_000_000 }),
    size: { maxTextBytes: envInt(env, 'GATE402_MERCHANT_MAX_TEXT_BYTES', DEFAULT_MERCHANT_SIZE_LIMITS.maxTextBytes, { min: 1024, max: 16 * 1024 * 1024 }) },
    revalidateMs: envInt(env, 'GATE402_MERCHANT_REVALIDATE_MS', DEFAULT_MERCHANT_REVALIDATE_MS, { min: 100, max: 60_000 }),
  };
}

/** The disk budgets of uploads; each must hold at least one file of the largest size (else nothing could upload). */
function uploadBudgetsFromEnv(env: NodeJS.ProcessEnv, maxFileBytes: number): UploadBudgets {
  const max = 1024 ** 4;
  const walletBytes = envInt(env, 'GATE402_MERCHANT_FILES_WALLET_BYTES', DEFAULT_UPLOAD_BUDGETS.walletBytes, { min: 1, max });
  const totalBytes = envInt(env, 'GATE402_MERCHANT_FILES_TOTAL_BYTES', DEFAULT_UPLOAD_BUDGETS.totalBytes, { min: 1, max });
  if (walletBytes < maxFileBytes) throw new ConfigError(`GATE402_MERCHANT_FILES_WALLET_BYTES (${walletBytes}) is below GATE402_MERCHANT_MAX_FILE_BYTES (${maxFileBytes})`);
  if (totalBytes < walletBytes) throw new ConfigError(`GATE402_MERCHANT_FILES_TOTAL_BYTES (${totalBytes}) is below GATE402_MERCHANT_FILES_WALLET_BYTES (${walletBytes})`);
  return { walletBytes, totalBytes };
}
