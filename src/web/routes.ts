/**
 * The web front end on the gateway: `/` (buy stocks), `/marketplace`, `/merchant` and their `/assets/...`.
 *
 * The pages are bundled in memory the first time one is asked for (`bundle.ts`), so a gateway that never serves
 * one pays nothing. Pages are revalidated on every visit (`no-cache` with a strong ETag, 304 when unchanged);
 * assets are named by their content hash and cached for a year (`immutable`). Both are sent gzipped to clients
 * that accept it. Every answer carries a strict Content-Security-Policy: scripts, styles and requests from this
 * origin only, no inline code, no framing.
 */
import { CAIP2, PERMIT2_ADDRESS } from '../chain/canonical.ts';
import type { NetworkRegistry } from '../chain/networks.ts';
import { json, type HttpHandler, type HttpRequest, type HttpResponse } from '../http/server.ts';
import type { Logger } from '../log/logger.ts';
import { bundleClient, PAGES, staticFile, type PageName, type StaticFile } from './bundle.ts';
import type { WebPageConfig } from './client/config.ts';
import type { WebConfig } from './config.ts';
import { PAGE_DEFINITIONS, pageHtml } from './pages.ts';

export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'permissions-policy': 'camera=(), microphone=(), geolocation=(), payment=()',
};

const PAGE_CACHE = 'no-cache';
const ASSET_CACHE = 'public, max-age=31536000, immutable';

/** Names of the networks, in the neutral words of the spec. */
const NETWORK_NAMES: Readonly<Record<string, string>> = {
  [CAIP2.base]: 'primary network',
  [CAIP2.baseSepolia]: 'primary network testnet',
  [CAIP2.stockChain]: 'stock chain',
};

export interface WebRouteOptions {
  networks: NetworkRegistry;
  config: WebConfig;
  log: Logger;
}

interface Served {
  file: StaticFile;
  plain: HttpResponse;
  gzip?: HttpResponse;
  notModified: HttpResponse;
}

interface Site {
  pages: ReadonlyMap<PageName, Served>;
  assets: ReadonlyMap<string, Served>;
}

/** What the pages are told: the networks the gateway settles on and, when it sells stocks, the stock chain. */
export function webPageConfig(networks: NetworkRegistry, config: WebConfig): WebPageConfig {
  const stock = networks.find(CAIP2.stockChain);
  return {
    networks: networks.all().map((n) => ({ caip2: n.caip2, chainId: n.chainId, name: NETWORK_NAMES[n.caip2] ?? n.caip2, stablecoin: { symbol: n.stablecoin.symbol, address: n.stablecoin.address } })),
    ...(stock
      ? {
          stockChain: {
            caip2: stock.caip2,
            chainId: stock.chainId,
            name: NETWORK_NAMES[stock.caip2] ?? stock.caip2,
            permit2: stock.permit2 ?? PERMIT2_ADDRESS,
            ...(config.walletRpcUrl ? { rpcUrl: config.walletRpcUrl } : {}),
          },
        }
      : {}),
  };
}

function serve(file: StaticFile, cacheControl: string): Served {
  const headers = { ...SECURITY_HEADERS, 'content-type': file.contentType, 'cache-control': cacheControl, etag: file.etag, vary: 'accept-encoding' };
  const frozen = (r: HttpResponse) => Object.freeze({ ...r, headers: Object.freeze(r.headers) });
  return {
    file,
    plain: frozen({ status: 200, headers, body: file.body }),
    ...(file.gzip ? { gzip: frozen({ status: 200, headers: { ...headers, 'content-encoding': 'gzip' }, body: file.gzip }) } : {}),
    notModified: frozen({ status: 304, headers: { ...SECURITY_HEADERS, 'cache-control': cacheControl, etag: file.etag, vary: 'accept-encoding' } }),
  };
}

/** Whether `Accept-Encoding` allows gzip (a `q=0` refuses it). */
export function acceptsGzip(header: string | undefined): boolean {
  if (!header) return false;
  return header.split(',').some((part) => {
    const [coding = '', ...params] = part.trim().toLowerCase().split(';');
    if (coding.trim() !== 'gzip' && coding.trim() !== '*') return false;
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    return q === undefined || Number(q.slice(2)) > 0;
  });
}

/** Whether `If-None-Match` names `etag` (weak comparison, as RFC 9110 asks for this header). */
export function etagMatches(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  if (header.trim() === '*') return true;
  const bare = etag.replace(/^W\//, '');
  return header.split(',').some((t) => t.trim().replace(/^W\//, '') === bare);
}

function answer(req: HttpRequest, s: Served): HttpResponse {
  if (etagMatches(req.headers['if-none-match'], s.file.etag)) return s.notModified;
  return s.gzip && acceptsGzip(req.headers['accept-encoding']) ? s.gzip : s.plain;
}

async function buildSite(o: WebRouteOptions): Promise<Site> {
  const bundle = await bundleClient();
  const config = webPageConfig(o.networks, o.config);
  const pages = new Map<PageName, Served>();
  for (const page of PAGES) pages.set(page, serve(staticFile('text/html; charset=utf-8', new TextEncoder().encode(pageHtml(page, bundle.pages[page], config))), PAGE_CACHE));
  const assets = new Map<string, Served>();
  for (const [name, file] of bundle.assets) assets.set(name, serve(file, ASSET_CACHE));
  o.log.info('web front end bundled', { ms: bundle.ms, bytes: bundle.bytes, files: bundle.assets.size });
  return { pages, assets };
}

/** The routes to mount on the gateway. */
export function webRoutes(o: WebRouteOptions): Array<{ method: string; path: string; handler: HttpHandler }> {
  let site: Promise<Site> | undefined;
  const ready = (): Promise<Site> =>
    (site ??= buildSite(o).catch((err: unknown) => {
      site = undefined; // tried again on the next request
      o.log.error('the web front end could not be bundled', { error: err });
      throw err;
    }));
  const unavailable = () => json(503, { error: 'the web pages could not be built on this gateway; the API works, try the pages again later' }, { 'cache-control': 'no-store' });

  const page =
    (name: PageName): HttpHandler =>
    async (req) => {
      const s = await ready().catch(() => undefined);
      const served = s?.pages.get(name);
      return served ? answer(req, served) : unavailable();
    };
  const asset: HttpHandler = async (req) => {
    const s = await ready().catch(() => undefined);
    if (!s) return unavailable();
    const served = s.assets.get(req.params.name ?? '');
    return served ? answer(req, served) : json(404, { error: 'no such asset (the pages were updated: reload the page)' }, { 'cache-control': 'no-store' });
  };
  return [...PAGES.map((name) => ({ method: 'GET', path: PAGE_DEFINITIONS[name].path, handler: page(name) })), { method: 'GET', path: '/assets/:name', handler: asset }];
}
