/** `GET /.well-known/x402`: the list of paid resources that x402 registries crawl. */
import { routePath, type Merchant } from '../catalog/merchant.ts';
import { normalizeBaseUrl } from './openapi.ts';

export interface WellKnownX402 {
  version: 1;
  /** Absolute URLs of every paid route, in merchant and route order, without duplicates. */
  resources: string[];
}

export function wellKnownX402(merchants: Merchant[], baseUrl: string): WellKnownX402 {
  const base = normalizeBaseUrl(baseUrl);
  const resources = new Set<string>();
  for (const m of merchants) for (const r of m.routes) resources.add(`${base}${routePath(m.slug, r.route)}`);
  return { version: 1, resources: [...resources] };
}
