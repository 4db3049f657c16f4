/**
 * `GET /discovery/resources`: the x402 bazaar's listing (`@x402/extensions` `withBazaar(...).extensions.bazaar
 * .listResources`), filtered by `type`, `payTo`, `scheme`, `network` and `extensions` (an extension key the item
 * declares), paged by `limit` (1 to 100, default 20) and `offset` (0 or more). A bad value is a 400 with what was
 * wrong. The listing itself comes from `source` (the gateway's paid resources in `gate402 start`), which the caller
 * keeps until the merchants change (the same array until then). Each page asked of one listing is built once, with
 * its ETag and compression, and kept among the last {@link DISCOVERY_PAGES_KEPT}: a request for it costs a lookup.
 */
import { LRUCache } from 'lru-cache';
import { err, type Result } from '../protocol/result.ts';
import { buildDocument, type BuiltDocument } from '../gateway/discovery/built-document.ts';
import { JSON_CONTENT_TYPE, json, type HttpHandler } from '../http/server.ts';

/** What the listing needs of an item; the rest is passed through as it is. */
export interface ListedResource {
  type: string;
  accepts: ReadonlyArray<{ scheme: string; network: string; payTo: string }>;
  extensions?: Record<string, unknown>;
}

export const DISCOVERY_DEFAULT_LIMIT = 20;
export const DISCOVERY_MAX_LIMIT = 100;
const MAX_OFFSET = 1_000_000_000;

export interface DiscoveryQuery {
  type?: string;
  payTo?: string;
  scheme?: string;
  network?: string;
  extensions?: string;
  limit: number;
  offset: number;
}

const TEXT = /^[\x21-\x7e]{1,128}$/;
const ADDRESS = /^0x[0-9a-fA-F]{40}$/;

/** The query of a listing request, or what is wrong with it. Pure. */
export function parseDiscoveryQuery(raw: string): Result<DiscoveryQuery, 'invalid_query'> {
  if (raw.length > 2048) return err('invalid_query', 'query string over 2048 characters');
  let params: URLSearchParams;
  try {
    params = new URLSearchParams(raw);
  } catch {
    return err('invalid_query', 'the query string does not parse');
  }
  const q: DiscoveryQuery = { limit: DISCOVERY_DEFAULT_LIMIT, offset: 0 };
  for (const key of new Set(params.keys())) {
    const all = params.getAll(key);
    if (all.length > 1) return err('invalid_query', `${key} is given ${all.length} times`);
    const value = all[0] as string;
    switch (key) {
      case 'limit':
      case 'offset': {
        const max = key === 'limit' ? DISCOVERY_MAX_LIMIT : MAX_OFFSET;
        const min = key === 'limit' ? 1 : 0;
        if (!/^[0-9]{1,10}$/.test(value) || Number(value) < min || Number(value) > max) return err('invalid_query', `${key} must be a whole number from ${min} to ${max}`);
        q[key] = Number(value);
        break;
      }
      case 'payTo':
        if (!ADDRESS.test(value)) return err('invalid_query', 'payTo must be a 0x-prefixed 20-byte address');
        q.payTo = value.toLowerCase();
        break;
      case 'type':
      case 'scheme':
      case 'network':
      case 'extensions':
        if (!TEXT.test(value)) return err('invalid_query', `${key} must be 1 to 128 printable characters`);
        q[key] = value;
        break;
      default:
        break; // other parameters are for other listings; they filter nothing here
    }
  }
  return { ok: true, value: q };
}

function matches(item: ListedResource, q: DiscoveryQuery): boolean {
  if (q.type !== undefined && item.type !== q.type) return false;
  if (q.extensions !== undefined && item.extensions?.[q.extensions] === undefined) return false;
  if (q.payTo === undefined && q.scheme === undefined && q.network === undefined) return true;
  // One offer must satisfy every payment filter at once.
  return item.accepts.some(
    (a) => (q.payTo === undefined || a.payTo.toLowerCase() === q.payTo) && (q.scheme === undefined || a.scheme === q.scheme) && (q.network === undefined || a.network === q.network),
  );
}

/** The page of `all` that `q` asks for, in the bazaar's response shape. Pure. */
export function listDiscoveryResources<T extends ListedResource>(all: readonly T[], q: DiscoveryQuery): { x402Version: 2; items: T[]; pagination: { limit: number; offset: number; total: number } } {
  const found = all.filter((item) => matches(item, q));
  return { x402Version: 2, items: found.slice(q.offset, q.offset + q.limit), pagination: { limit: q.limit, offset: q.offset, total: found.length } };
}

/** Pages kept per listing (by their normalised query). */
export const DISCOVERY_PAGES_KEPT = 256;

const PAGE_HEADERS = Object.freeze({ 'content-type': JSON_CONTENT_TYPE, 'cache-control': 'public, no-cache' });

function pageKey(q: DiscoveryQuery): string {
  return JSON.stringify([q.type, q.payTo, q.scheme, q.network, q.extensions, q.limit, q.offset]);
}

/**
 * The route's handler over `source` (called once per request; the caller keeps the listing, and returns the same
 * array until it changes): pages are built once per listing and answered with their ETag (`If-None-Match` → 304)
 * in the compression the client accepts.
 */
export function discoveryResourcesHandler(source: () => readonly ListedResource[] | Promise<readonly ListedResource[]>): HttpHandler {
  const pages = new WeakMap<readonly ListedResource[], LRUCache<string, BuiltDocument>>();
  return async (req) => {
    const q = parseDiscoveryQuery(req.query);
    if (!q.ok) return json(400, { error: q.error.message }, { 'cache-control': 'no-store' });
    const all = await source();
    let kept = pages.get(all);
    if (kept === undefined) {
      kept = new LRUCache({ max: DISCOVERY_PAGES_KEPT });
      pages.set(all, kept);
    }
    const key = pageKey(q.value);
    let page = kept.get(key);
    if (page === undefined) {
      page = buildDocument(JSON.stringify(listDiscoveryResources(all, q.value)), PAGE_HEADERS);
      kept.set(key, page);
    }
    return page.respond(req);
  };
}
