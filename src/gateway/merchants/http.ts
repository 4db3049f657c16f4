/**
 * HTTP handlers of merchant self-registration, to mount on the gateway's server:
 *
 * - `POST /api/merchants`        register / update / delete (by `registration.action`), signed by payTo;
 *                                201 `{merchant}` on register, 200 `{merchant}` on update, 200 `{deleted: slug}`;
 * - `GET  /api/merchants`        the public list `{merchants: PublicMerchant[], pagination: {limit, offset, total},
 *                                next}`, a page at a time (`?limit` 1 to 100, default 100; `?offset`; `?owner=0x…`
 *                                only that wallet's); each page built once per change of the merchants, with its
 *                                ETag and compression (see `../discovery/built-document.ts`);
 * - `GET  /api/merchants/:slug`  `{merchant: PublicMerchant}` or 404.
 *
 * An upload over a disk budget is a 413 `{error, budget: 'wallet' | 'total'}`.
 *
 * Every merchant that leaves here goes through `publicMerchant` (no upstream origin, no secret header names or
 * values, no uploaded file name). Errors are `{error}` with the registry's status; client mistakes are never 500s.
 * `mountMerchantRoutes` gives `POST /api/merchants` its own body limit (`maxBodyBytes`, e.g. `registrationBodyLimit`);
 * the other routes keep the server's.
 */
import { publicMerchant } from '../catalog/merchant.ts';
import { buildDocument } from '../discovery/built-document.ts';
import { MerchantSnapshot, type MerchantView } from '../discovery/merchant-snapshot.ts';
import { JSON_DOCUMENT_HEADERS, serveBuilt } from '../discovery/routes.ts';
import { json, type HttpHandler, type HttpResponse, type HttpServer } from '../../http/server.ts';
import { err, ok, type Result } from '../../protocol/result.ts';
import type { MerchantRegistry } from './registry.ts';

export interface MerchantHttpOptions {
  registry: MerchantRegistry;
  /** Unix milliseconds; injectable for tests. */
  now?: () => number;
  /** The body limit of `POST /api/merchants` (uploads); the server's when absent. */
  maxBodyBytes?: number;
  /** The merchants as discovery sees them (shared with the gateway's documents); else one over `registry`. */
  snapshot?: MerchantSnapshot;
}

export const MERCHANT_LIST_DEFAULT_LIMIT = 100;
export const MERCHANT_LIST_MAX_LIMIT = 100;
const MAX_OFFSET = 1_000_000_000;

export interface MerchantListQuery {
  limit: number;
  offset: number;
  /** Lower-cased payTo/owner address. */
  owner?: string;
}

/** `?limit&offset&owner` of `GET /api/merchants`, or what is wrong with it. Pure. */
export function parseMerchantListQuery(raw: string): Result<MerchantListQuery, 'invalid_query'> {
  if (raw.length > 512) return err('invalid_query', 'query string over 512 characters');
  const q: MerchantListQuery = { limit: MERCHANT_LIST_DEFAULT_LIMIT, offset: 0 };
  const params = new URLSearchParams(raw);
  for (const key of new Set(params.keys())) {
    const all = params.getAll(key);
    if (all.length > 1) return err('invalid_query', `${key} is given ${all.length} times`);
    const value = all[0] as string;
    if (key === 'limit' || key === 'offset') {
      const [min, max] = key === 'limit' ? [1, MERCHANT_LIST_MAX_LIMIT] : [0, MAX_OFFSET];
      if (!/^[0-9]{1,10}$/.test(value) || Number(value) < min || Number(value) > max) return err('invalid_query', `${key} must be a whole number from ${min} to ${max}`);
      q[key] = Number(value);
    } else if (key === 'owner') {
      if (!/^0x[0-9a-fA-F]{40}$/.test(value)) return err('invalid_query', 'owner must be a 0x-prefixed 20-byte address');
      q.owner = value.toLowerCase();
    }
  }
  return ok(q);
}

/** Each merchant's public JSON, made once per loaded list (pages are joined from it). */
const publicJson = new WeakMap<MerchantView, string[]>();

function merchantListPage(view: MerchantView, q: MerchantListQuery): string {
  let texts = publicJson.get(view);
  if (texts === undefined) {
    texts = view.merchants.map((m) => JSON.stringify(publicMerchant(m)));
    publicJson.set(view, texts);
  }
  const picked: number[] = [];
  view.merchants.forEach((m, i) => {
    if (q.owner === undefined || m.owner.toLowerCase() === q.owner) picked.push(i);
  });
  const page = picked.slice(q.offset, q.offset + q.limit);
  const more = q.offset + page.length < picked.length;
  const next = more ? `/api/merchants?limit=${q.limit}&offset=${q.offset + page.length}${q.owner ? `&owner=${q.owner}` : ''}` : null;
  const items = page.map((i) => texts[i]).join(',');
  return `{"merchants":[${items}],"pagination":${JSON.stringify({ limit: q.limit, offset: q.offset, total: picked.length })},"next":${JSON.stringify(next)}}`;
}

export interface MerchantHandlers {
  /** `POST /api/merchants` */
  register: HttpHandler;
  /** `GET /api/merchants` */
  list: HttpHandler;
  /** `GET /api/merchants/:slug` */
  get: HttpHandler;
}

const NO_STORE = { 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' };
const REVALIDATE = { 'cache-control': 'no-cache', 'x-content-type-options': 'nosniff' };

export function merchantHandlers(options: MerchantHttpOptions): MerchantHandlers {
  const { registry } = options;
  const now = options.now ?? Date.now;
  const snapshot = options.snapshot ?? new MerchantSnapshot(registry);
  return {
    async register(req): Promise<HttpResponse> {
      const bytes = await req.body(); // over maxBodyBytes: a 413 is already on its way (the rejection is an HttpError)
      const result = await registry.register(bytes, now());
      if (!result.ok) return json(result.error.status, { error: result.error.message, ...(result.error.budget ? { budget: result.error.budget } : {}) }, NO_STORE);
      const { action, merchant } = result.value;
      if (action === 'delete') return json(200, { deleted: merchant.slug }, NO_STORE);
      return json(action === 'register' ? 201 : 200, { merchant: publicMerchant(merchant) }, NO_STORE);
    },
    list(req): HttpResponse | Promise<HttpResponse> {
      const q = parseMerchantListQuery(req.query);
      if (!q.ok) return json(400, { error: q.error.message }, NO_STORE);
      const key = `merchant-list:${q.value.limit}:${q.value.offset}:${q.value.owner ?? ''}`;
      return serveBuilt(snapshot, key, (view) => buildDocument(merchantListPage(view, q.value), JSON_DOCUMENT_HEADERS), true)(req);
    },
    async get(req): Promise<HttpResponse> {
      const slug = req.params.slug ?? '';
      const merchant = await registry.get(slug);
      if (!merchant) return json(404, { error: `no merchant ${slug.slice(0, 64)}` }, REVALIDATE);
      return json(200, { merchant: publicMerchant(merchant) }, REVALIDATE);
    },
  };
}

/** Mounts the three routes on `server`; returns it. */
export function mountMerchantRoutes(server: HttpServer, options: MerchantHttpOptions): HttpServer {
  const h = merchantHandlers(options);
  return server
    .route('POST', '/api/merchants', h.register, options.maxBodyBytes === undefined ? {} : { maxBodyBytes: options.maxBodyBytes })
    .route('GET', '/api/merchants', h.list)
    .route('GET', '/api/merchants/:slug', h.get);
}
