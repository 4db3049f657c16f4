/**
 * The merchant model of the marketplace: a merchant (addressed by its slug) exposes paid routes under
 * `/m/{slug}/{route}`, forwards paid calls to its upstream (a URL or an uploaded file) and is paid to `payTo`.
 *
 * Everything here is plain JSON-compatible data, so that merchants can be stored and served as they are.
 * The upstream (its origin and its secret headers) is private: {@link publicMerchant} is the only shape of a
 * merchant that may leave the gateway.
 */
import { parseDecimalAmount, USD_DECIMALS } from '../../protocol/amounts.ts';

export type HttpMethod = 'GET' | 'POST';

/** A JSON Schema (draft 2020-12, the dialect OpenAPI 3.1 embeds), as plain data. */
export type JsonSchema = { [keyword: string]: unknown };

/** One named input of a route: a query parameter, or a path parameter of an appended-segment template. */
export interface RouteParameter {
  name: string;
  description: string;
  /** Path parameters are always required. */
  required?: boolean;
  schema: JsonSchema;
  example?: string;
}

/**
 * One way of appending path segments to a route: `template` is relative to the route path, e.g. `{title}` for
 * `/m/wiki/summary/{title}` or `{iso}/indicator/{code}`. Every `{name}` in it has an entry in `parameters`.
 */
export interface RouteSegments {
  /** Short, unique within the route; discovery uses it in the operation id (`{slug}-{route}-{key}`). */
  key: string;
  template: string;
  description: string;
  parameters: RouteParameter[];
}

/**
 * Machine-readable input and output of a route, for discovery documents. Optional: a route without a shape
 * (e.g. one registered by a merchant) is described as taking a free-form query and a JSON object body.
 */
export interface RouteShape {
  /** Named query parameters. */
  query?: RouteParameter[];
  /** Also (or, without `query`, only) a form-style free-form `params` object: any keys, forwarded verbatim. */
  freeFormQuery?: boolean;
  /** The JSON request body of POST. */
  body?: { required: boolean; description: string; schema: JsonSchema };
  /** Ways of appending path segments to the route. */
  segments?: RouteSegments[];
  /** What a 200 carries: a JSON object (the default) or a bare JSON number. */
  response?: 'object' | 'number';
}

export interface MerchantRoute {
  /** One path segment, e.g. `forecast`. */
  route: string;
  methods: HttpMethod[];
  /** USD with exactly 6 fraction digits, e.g. `0.005000`. */
  priceUsd: string;
  summary: string;
  description: string;
  /** The route's input, in words. */
  input: string;
  /** `${slug}-${route}` */
  operationId: string;
  shape?: RouteShape;
  /**
   * x402 payments must carry a `payment-identifier` id (an idempotency key): one without is refused 400 before
   * anything is charged. Absent or false: the id is optional (a payment with one is still deduplicated).
   */
  requirePaymentId?: boolean;
  /**
   * Also accept x402 `batch-settlement` (payment channels: one deposit, then a signed voucher per request), offered
   * after the route's `exact` offers. Absent or false: `exact` only.
   */
  batchSettlement?: boolean;
}

/**
 * The upstreams gate402 serves in-process: `stock-data` is its own stock chain data (`src/stock/stock-data.ts`);
 * `fixtures/{slug}` is, on the devnet only, the local fixture upstream of a built-in merchant, which each node
 * resolves to the fixture server it runs itself (so the shared record names no node's address).
 */
export type InternalUpstreamName = 'stock-data' | `fixtures/${string}`;

/**
 * Where paid calls go: a URL, an uploaded file, or (built-in merchants only: registration never accepts it) an
 * upstream served inside the gateway.
 */
export type Upstream =
  | { kind: 'url'; baseUrl: string; secretHeaders: Record<string, string> }
  | { kind: 'file'; sha256: string; contentType: string; size: number; fileName: string }
  | { kind: 'internal'; name: InternalUpstreamName };

export interface Merchant {
  slug: string;
  name: string;
  description: string;
  payTo: `0x${string}`;
  /** CAIP-2 ids of the networks it accepts payment on. */
  networks: string[];
  upstream: Upstream;
  routes: MerchantRoute[];
  owner: `0x${string}`;
  /** Unix milliseconds. */
  createdAt: number;
  updatedAt: number;
}

export type PublicUpstream = { kind: 'url' } | { kind: 'file'; sha256: string; contentType: string; size: number };
export type PublicMerchant = Omit<Merchant, 'upstream'> & { upstream: PublicUpstream };

/** The price in atomic units of a 6-decimal USD stablecoin. Throws on a malformed `priceUsd`. */
export function amountAtomic(route: MerchantRoute): bigint {
  const atomic = parseDecimalAmount(route.priceUsd, USD_DECIMALS);
  if (atomic === undefined) throw new Error(`route ${route.operationId}: malformed priceUsd ${JSON.stringify(route.priceUsd)}`);
  return atomic;
}

export function routePath(slug: string, route: string): string {
  return `/m/${slug}/${route}`;
}

export function findRoute(merchant: Merchant, routeName: string): MerchantRoute | undefined {
  return merchant.routes.find((r) => r.route === routeName);
}

function copyRoute(r: MerchantRoute): MerchantRoute {
  return {
    route: r.route,
    methods: [...r.methods],
    priceUsd: r.priceUsd,
    summary: r.summary,
    description: r.description,
    input: r.input,
    operationId: r.operationId,
    ...(r.shape !== undefined ? { shape: structuredClone(r.shape) } : {}),
    ...(r.batchSettlement === true ? { batchSettlement: true } : {}),
  };
}

/**
 * The merchant as buyers and the merchant's listing may see it: a fresh object built field by field (so that
 * nothing else a stored record might carry leaks), without the upstream origin, its secret headers or the
 * uploaded file's name. An in-process upstream shows as a URL one: how a merchant is served is not the buyer's business.
 */
export function publicMerchant(m: Merchant): PublicMerchant {
  const upstream: PublicUpstream = m.upstream.kind === 'file' ? { kind: 'file', sha256: m.upstream.sha256, contentType: m.upstream.contentType, size: m.upstream.size } : { kind: 'url' };
  return {
    slug: m.slug,
    name: m.name,
    description: m.description,
    payTo: m.payTo,
    networks: [...m.networks],
    upstream,
    routes: m.routes.map(copyRoute),
    owner: m.owner,
    createdAt: m.createdAt,
    updatedAt: m.updatedAt,
  };
}
