/**
 * The marketplace's paid resources as an x402 bazaar lists them (`DiscoveryResource` of `@x402/extensions`): one
 * item per route and method, with the offers its 402 makes and the extensions its 402 declares, so a bazaar client
 * that finds a resource here can call it unchanged. Pure.
 */
import type { NetworkRegistry } from '../../chain/networks.ts';
import { declaredExtensions } from '../../protocol/x402/extensions/index.ts';
import type { PaymentRequirements } from '../../protocol/x402/types.ts';
import { routePath, type Merchant } from '../catalog/merchant.ts';
import type { ChannelOfferTerms } from '../paywall/channel-offers.ts';
import { offersFor } from '../paywall/offers.ts';
import { normalizeBaseUrl } from './openapi.ts';
import { paidResourceDescription } from './paid-resource.ts';

export interface BazaarResource {
  resource: string;
  type: 'http';
  x402Version: 2;
  accepts: PaymentRequirements[];
  lastUpdated: string;
  description: string;
  mimeType: string;
  serviceName?: string;
  tags: string[];
  extensions: Record<string, unknown>;
}

/** The bazaar's service name rule: 1 to 32 printable ASCII characters. */
function serviceName(name: string): string | undefined {
  const ascii = name.replace(/[^\x20-\x7e]/g, '').trim();
  return ascii.length > 0 ? ascii.slice(0, 32) : undefined;
}

export function bazaarResources(merchants: Merchant[], baseUrl: string, networks: NetworkRegistry, channels?: ChannelOfferTerms): BazaarResource[] {
  const base = normalizeBaseUrl(baseUrl);
  const out: BazaarResource[] = [];
  for (const m of merchants) {
    const name = serviceName(m.name);
    const mimeType = m.upstream.kind === 'file' ? m.upstream.contentType : 'application/json';
    for (const r of m.routes) {
      const accepts = offersFor(m, r, networks, channels);
      if (accepts.length === 0) continue; // on no configured network: not payable here
      for (const method of r.methods) {
        out.push({
          resource: `${base}${routePath(m.slug, r.route)}`,
          type: 'http',
          x402Version: 2,
          accepts,
          lastUpdated: new Date(m.updatedAt).toISOString(),
          description: r.summary,
          mimeType,
          ...(name !== undefined ? { serviceName: name } : {}),
          tags: [m.slug],
          extensions: declaredExtensions(paidResourceDescription(m, r, method)),
        });
      }
    }
  }
  return out;
}
