/**
 * A paid route's terms as the doors read them (`front-door/door.ts`): its x402 offers, its MPP charge, its words
 * and extension declarations. They change only with the merchant, so they are made once per merchant version.
 */
import type { NetworkRegistry } from '../../chain/networks.ts';
import type { RouteTerms } from '../../front-door/door.ts';
import { routeTag } from '../../protocol/mpp/binding.ts';
import { declaredExtensions } from '../../protocol/x402/extensions/index.ts';
import type { Merchant, MerchantRoute } from '../catalog/merchant.ts';
import { paidResourceDescription } from '../discovery/paid-resource.ts';
import type { ChannelOfferTerms } from './channel-offers.ts';
import { mppNetworkFor, mppRequestFor, mppRequirements, offersFor } from './offers.ts';

/** Terms kept per merchant and route; emptied before it holds more than this many. */
const MAX_KEPT = 4096;

export class RouteTermsMemo {
  readonly #networks: NetworkRegistry;
  readonly #channels: ChannelOfferTerms | undefined;
  readonly #kept = new Map<string, { terms: RouteTerms; at: number }>();

  constructor(networks: NetworkRegistry, channels?: ChannelOfferTerms) {
    this.#networks = networks;
    this.#channels = channels;
  }

  /** The route's terms, made once per merchant version (frozen: every request of the version shares them). */
  of(merchant: Merchant, route: MerchantRoute): RouteTerms {
    const key = `${merchant.slug}|${route.route}`;
    const hit = this.#kept.get(key);
    if (hit && hit.at === merchant.updatedAt) return hit.terms;
    const terms = Object.freeze(routeTerms(this.#networks, merchant, route, this.#channels));
    if (this.#kept.size >= MAX_KEPT) this.#kept.clear();
    this.#kept.set(key, { terms, at: merchant.updatedAt });
    return terms;
  }
}

function routeTerms(networks: NetworkRegistry, merchant: Merchant, route: MerchantRoute, channels: ChannelOfferTerms | undefined): RouteTerms {
  const n = mppNetworkFor(merchant, networks);
  const mpp = n ? { network: n, request: mppRequestFor(merchant, route, n) } : undefined;
  const routeTags = Object.fromEntries(route.methods.map((m) => [m, routeTag(merchant.slug, route.route, m)]));
  return {
    key: `${merchant.slug}|${merchant.updatedAt}|${route.route}`,
    offers: offersFor(merchant, route, networks, channels),
    ...(mpp ? { mpp: { ...mpp, requirements: mppRequirements(mpp.request, mpp.network), routeTags } } : {}),
    summary: route.summary,
    title: `${merchant.name}: ${route.summary}`,
    priceUsd: route.priceUsd,
    extensions: Object.fromEntries(route.methods.map((m) => [m, declaredExtensions(paidResourceDescription(merchant, route, m))])),
  };
}
