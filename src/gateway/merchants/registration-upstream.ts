/**
 * The upstream of a registration or update, admitted: a URL checked against the upstream guard (its host resolved
 * and refused if private, unless allowlisted), or an uploaded file stored (within the owner's disk budget). The
 * registry asks this after every other check, so a refusal stores nothing.
 */
import type { Upstream } from '../catalog/merchant.ts';
import { ok, type Ok } from '../../protocol/result.ts';
import type { Logger } from '../../log/logger.ts';
import { checkUpstreamUrl, type Resolver, type UpstreamAllowlist } from '../upstream-guard/guard.ts';
import type { RegistryRefusal } from './registry-options.ts';
import { refuse } from './registry-refusals.ts';
import type { ValidatedUpsert } from './types.ts';
import type { MerchantUploads } from './uploads.ts';

export interface UpstreamAdmission {
  allowlist: UpstreamAllowlist;
  uploads: MerchantUploads;
  resolve?: Resolver;
  resolveTimeoutMs?: number;
  log?: Logger;
}

export async function admitUpstream(r: ValidatedUpsert, now: number, deps: UpstreamAdmission): Promise<Ok<Upstream> | RegistryRefusal> {
  const u = r.upstream;
  if (u.kind === 'url') {
    const check = await checkUpstreamUrl(u.baseUrl, {
      allowlist: deps.allowlist,
      ...(deps.resolve ? { resolve: deps.resolve } : {}),
      ...(deps.resolveTimeoutMs !== undefined ? { resolveTimeoutMs: deps.resolveTimeoutMs } : {}),
    });
    if (!check.ok) {
      deps.log?.warn('merchant upstream refused', { slug: r.slug, code: check.error.code, detail: check.error.detail });
      return refuse(400, check.error.message);
    }
    return ok({ kind: 'url', baseUrl: u.baseUrl, secretHeaders: { ...u.secretHeaders } });
  }
  const stored = await deps.uploads.store(r.slug, r.payTo, u.content, now);
  if (!stored.ok) return stored;
  const { sha256, size } = stored.value;
  return ok({ kind: 'file', sha256, contentType: u.contentType, size, fileName: u.fileName });
}
