/**
 * The built-in catalog: the marketplace's own merchants, one per slug of `routes.json`, with their routes,
 * prices, texts and input shapes. A merchant gate402 serves itself ({@link INTERNAL_UPSTREAMS}) is served
 * in-process when the gateway runs that upstream; otherwise where the merchants' upstreams live is the caller's
 * choice (`upstreamFor`): {@link PRODUCTION_UPSTREAMS} in production, the local fixture upstreams offline and in tests.
 */
import routesData from './routes.json' with { type: 'json' };
import { MERCHANT_TEXTS, ROUTE_TEXTS } from './builtin-texts.ts';
import { amountAtomic, routePath, type HttpMethod, type InternalUpstreamName, type Merchant, type MerchantRoute, type Upstream } from '../../gateway/catalog/merchant.ts';

export { LLM_ALIAS_NAMES, LLM_MODEL_ALIASES, ModelAliasError, resolveModelAlias, resolveModelAliasInBody, resolveModelId } from './llm-aliases.ts';
export type { LlmAlias, LlmModelAliases, ModelAliasErrorCode } from './llm-aliases.ts';

/** One row of `routes.json`. */
export interface CatalogRouteRecord {
  slug: string;
  route: string;
  path: string;
  methods: HttpMethod[];
  priceUsd: string;
  amountAtomic: string;
  input: string;
  operationId: string;
}

const SEGMENT = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;

function checkRecords(data: unknown): CatalogRouteRecord[] {
  if (!Array.isArray(data)) throw new Error('catalog routes.json: expected an array');
  const seen = new Set<string>();
  return data.map((row: unknown, i): CatalogRouteRecord => {
    const r = row as Partial<CatalogRouteRecord>;
    const where = `catalog routes.json[${i}]`;
    if (typeof r.slug !== 'string' || !SEGMENT.test(r.slug)) throw new Error(`${where}: bad slug`);
    if (typeof r.route !== 'string' || !SEGMENT.test(r.route)) throw new Error(`${where}: bad route`);
    if (r.path !== routePath(r.slug, r.route)) throw new Error(`${where}: path does not match slug and route`);
    if (r.operationId !== `${r.slug}-${r.route}`) throw new Error(`${where}: operationId does not match slug and route`);
    if (!Array.isArray(r.methods) || r.methods.length === 0 || !r.methods.every((m) => m === 'GET' || m === 'POST')) {
      throw new Error(`${where}: bad methods`);
    }
    if (typeof r.priceUsd !== 'string' || !/^\d+\.\d{6}$/.test(r.priceUsd)) throw new Error(`${where}: bad priceUsd`);
    if (typeof r.input !== 'string') throw new Error(`${where}: bad input`);
    const record: CatalogRouteRecord = {
      slug: r.slug,
      route: r.route,
      path: r.path,
      methods: [...r.methods],
      priceUsd: r.priceUsd,
      amountAtomic: String(r.amountAtomic),
      input: r.input,
      operationId: r.operationId,
    };
    if (amountAtomic({ ...record, summary: '', description: '' }).toString() !== record.amountAtomic) {
      throw new Error(`${where}: amountAtomic does not match priceUsd`);
    }
    if (seen.has(record.path)) throw new Error(`${where}: duplicate path`);
    seen.add(record.path);
    if (!ROUTE_TEXTS[record.operationId]) throw new Error(`${where}: no texts for ${record.operationId}`);
    if (!MERCHANT_TEXTS[record.slug]) throw new Error(`${where}: no texts for merchant ${record.slug}`);
    return record;
  });
}

/** The catalog's route table, checked once at load. */
export const CATALOG_ROUTES: readonly CatalogRouteRecord[] = Object.freeze(checkRecords(routesData));

/** Catalog slugs in table order. */
export const CATALOG_SLUGS: readonly string[] = Object.freeze([...new Set(CATALOG_ROUTES.map((r) => r.slug))]);

/** Built-in merchants gate402 serves from its own data, by slug: `chain-stocks` from the stock chain it sells on. */
export const INTERNAL_UPSTREAMS: Readonly<Record<string, InternalUpstreamName>> = Object.freeze({ 'chain-stocks': 'stock-data' });

/**
 * Production upstream base URLs by slug (public APIs of each kind). The gateway forwards
 * `/m/{slug}/{route}/{rest}?{query}` to `{base}/{route}/{rest}?{query}`; where a public API names its routes
 * differently, the operator points the slug at an adapter instead. `chain-stocks` is served in-process while the
 * stock API runs; with it off, by the operator's own stock-data service (its host is the operator's to configure).
 */
export const PRODUCTION_UPSTREAMS: Readonly<Record<string, string>> = Object.freeze({
  'chain-stocks': 'https://stocks-data.gate402.invalid/v1',
  catjoke: 'https://v2.jokeapi.dev',
  'llm-chat': 'https://openrouter.ai/api/v1',
  weather: 'https://api.open-meteo.com/v1',
  fx: 'https://api.frankfurter.app',
  'crypto-prices': 'https://coins.llama.fi',
  defi: 'https://api.llama.fi',
  wiki: 'https://en.wikipedia.org/api/rest_v1/page',
  words: 'https://api.datamuse.com',
  'news-search': 'https://hn.algolia.com/api/v1',
  'world-data': 'https://api.worldbank.org/v2',
  'chain-explorer': 'https://eth.blockscout.com/api/v2',
  books: 'https://openlibrary.org',
  filings: 'https://data.sec.gov',
  treasury: 'https://api.fiscaldata.treasury.gov/services/api/fiscal_service',
  'crypto-markets': 'https://api.coingecko.com/api/v3',
});

export interface BuiltinCatalogOptions {
  /** The payout wallet of each merchant. */
  payTo: (slug: string) => `0x${string}`;
  /** CAIP-2 ids every built-in merchant accepts. */
  networks: string[];
  upstreamFor: (slug: string) => Upstream;
  /** The in-process upstreams this gateway runs: a merchant of {@link INTERNAL_UPSTREAMS} uses its own when listed. */
  internal?: ReadonlySet<InternalUpstreamName>;
  owner: `0x${string}`;
  /** Unix milliseconds, for createdAt and updatedAt. */
  now: number;
}

/**
 * Built-in routes that also take x402 `batch-settlement` payment channels (offered after their `exact` offers): the
 * cheap, often-called ones, where one deposit and a voucher per call save a transfer per call.
 */
export const CHANNEL_ROUTES: ReadonlySet<string> = new Set(['catjoke-joke', 'weather-forecast', 'fx-latest', 'words-define']);

function catalogRoute(r: CatalogRouteRecord): MerchantRoute {
  const text = ROUTE_TEXTS[r.operationId]!;
  return {
    route: r.route,
    methods: [...r.methods],
    priceUsd: r.priceUsd,
    summary: text.summary,
    description: text.description,
    input: r.input,
    operationId: r.operationId,
    shape: structuredClone(text.shape),
    ...(CHANNEL_ROUTES.has(r.operationId) ? { batchSettlement: true } : {}),
  };
}

function builtinUpstream(slug: string, opts: BuiltinCatalogOptions): Upstream {
  const name = Object.hasOwn(INTERNAL_UPSTREAMS, slug) ? INTERNAL_UPSTREAMS[slug] : undefined;
  return name !== undefined && opts.internal?.has(name) ? { kind: 'internal', name } : opts.upstreamFor(slug);
}

/** One fresh Merchant per catalog slug, in table order. */
export function builtinCatalog(opts: BuiltinCatalogOptions): Merchant[] {
  return CATALOG_SLUGS.map((slug): Merchant => {
    const text = MERCHANT_TEXTS[slug]!;
    return {
      slug,
      name: text.name,
      description: text.description,
      payTo: opts.payTo(slug),
      networks: [...opts.networks],
      upstream: builtinUpstream(slug, opts),
      routes: CATALOG_ROUTES.filter((r) => r.slug === slug).map(catalogRoute),
      owner: opts.owner,
      createdAt: opts.now,
      updatedAt: opts.now,
    };
  });
}
