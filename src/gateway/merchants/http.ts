/**
 * HTTP handlers of merchant self-registration, to mount on the gateway's server:
 *
 * - `POST /api/merchants`        register / update / delete (by `registration.action`), signed by payTo;
 *                                201 `{merchant}` on register, 200 `{merchant}` on update, 200 `{deleted: slug}`;
 * - `GET  /api/merchants`        the public list `{merchants: PublicMerchant[]}`;
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
import { json, type HttpHandler, type HttpResponse, type HttpServer } from '../../http/server.ts';
import type { MerchantRegistry } from './registry.ts';

export interface MerchantHttpOptions {
  registry: MerchantRegistry;
  /** Unix milliseconds; injectable for tests. */
  now?: () => number;
  /** The body limit of `POST /api/merchants` (uploads); the server's when absent. */
  maxBodyBytes?: number;
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
  return {
    async register(req): Promise<HttpResponse> {
      const bytes = await req.body(); // over maxBodyBytes: a 413 is already on its way (the rejection is an HttpError)
      const result = await registry.register(bytes, now());
      if (!result.ok) return json(result.error.status, { error: result.error.message, ...(result.error.budget ? { budget: result.error.budget } : {}) }, NO_STORE);
      const { action, merchant } = result.value;
      if (action === 'delete') return json(200, { deleted: merchant.slug }, NO_STORE);
      return json(action === 'register' ? 201 : 200, { merchant: publicMerchant(merchant) }, NO_STORE);
    },
    async list(): Promise<HttpResponse> {
      return json(200, { merchants: (await registry.list()).map(publicMerchant) }, REVALIDATE);
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
