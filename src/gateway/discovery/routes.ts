/**
 * The gateway's discovery routes (`/openapi.json`, `/m/{slug}/openapi.json`, `/.well-known/x402`, `/llms.txt`),
 * each a document built once per change of the merchants ({@link MerchantSnapshot}) and served with its ETag and
 * in the compression the client accepts ({@link buildDocument}). A request for a document already built is answered
 * before the route callback returns; only the first after a change builds it.
 */
import type { NetworkRegistry } from '../../chain/networks.ts';
import { JSON_CONTENT_TYPE, json, type HttpHandler, type HttpRequest, type HttpResponse } from '../../http/server.ts';
import type { Merchant } from '../catalog/merchant.ts';
import { buildDocument, type BuiltDocument } from './built-document.ts';
import { llmsTxt } from './llms-txt.ts';
import type { MerchantSnapshot, MerchantView } from './merchant-snapshot.ts';
import { merchantOpenApi, rootOpenApi, type DiscoveryContext } from './openapi.ts';
import { wellKnownX402 } from './well-known.ts';

export interface DiscoveryRoutesOptions {
  snapshot: MerchantSnapshot;
  networks: NetworkRegistry;
  baseUrl: string;
  contactEmail: string;
  realm: string;
  /** `Cache-Control: max-age` of `/llms.txt`, seconds (the JSON documents are `no-cache`: revalidated by ETag). */
  llmsMaxAgeSeconds: number;
}

/** A document's answer: at once when it is built for the current list, else once it is. */
export function serveBuilt(snapshot: MerchantSnapshot, key: string, build: (view: MerchantView) => BuiltDocument, keyed = false): (req: HttpRequest) => HttpResponse | Promise<HttpResponse> {
  return (req) => {
    const hit = snapshot.peek<BuiltDocument>(key, keyed);
    return hit !== undefined ? hit.respond(req) : snapshot.built(key, build, keyed).then((doc) => doc.respond(req));
  };
}

export const JSON_DOCUMENT_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'content-type': JSON_CONTENT_TYPE,
  'cache-control': 'public, no-cache',
  'x-content-type-options': 'nosniff',
});

export function discoveryRoutes(o: DiscoveryRoutesOptions): Array<{ method: 'GET'; path: string; handler: HttpHandler }> {
  const ctx: DiscoveryContext = { baseUrl: o.baseUrl, networks: o.networks, contactEmail: o.contactEmail, challengeInfo: { realm: o.realm } };
  const merchants = (v: MerchantView) => v.merchants as Merchant[];
  const llmsHeaders = { 'content-type': 'text/plain; charset=utf-8', 'cache-control': `public, max-age=${o.llmsMaxAgeSeconds}`, 'x-content-type-options': 'nosniff' };
  const merchantDoc = (req: HttpRequest): HttpResponse | Promise<HttpResponse> => {
    const slug = req.params.slug ?? '';
    const found = (view: MerchantView): HttpResponse | Promise<HttpResponse> => {
      const m = view.bySlug.get(slug);
      if (m === undefined) return json(404, { error: `no merchant '${slug.slice(0, 64)}'` });
      return serveBuilt(o.snapshot, `merchant-openapi:${slug}`, () => buildDocument(JSON.stringify(merchantOpenApi(m, ctx)), JSON_DOCUMENT_HEADERS), true)(req);
    };
    const view = o.snapshot.view;
    return view !== undefined ? found(view) : Promise.resolve(o.snapshot.current()).then(found);
  };
  return [
    { method: 'GET', path: '/openapi.json', handler: serveBuilt(o.snapshot, 'openapi', (v) => buildDocument(JSON.stringify(rootOpenApi(merchants(v), ctx)), JSON_DOCUMENT_HEADERS)) },
    {
      method: 'GET',
      path: '/.well-known/x402',
      handler: serveBuilt(o.snapshot, 'well-known-x402', (v) => buildDocument(JSON.stringify(wellKnownX402(merchants(v), o.baseUrl)), JSON_DOCUMENT_HEADERS)),
    },
    {
      method: 'GET',
      path: '/llms.txt',
      handler: serveBuilt(o.snapshot, 'llms-txt', (v) => buildDocument(llmsTxt(merchants(v), { baseUrl: o.baseUrl, networks: o.networks, realm: o.realm }), llmsHeaders)),
    },
    { method: 'GET', path: '/m/:slug/openapi.json', handler: merchantDoc },
  ];
}
