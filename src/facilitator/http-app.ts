/**
 * The facilitator's HTTP API (x402 v2): `GET /supported`, `POST /verify`, `POST /settle`, `GET /health`.
 *
 * Transport concerns only: the body limit (413), the JSON content type of verify/settle (415), the per-client-IP
 * token bucket on verify/settle (429 with `Retry-After`), and turning {@link FacilitatorService} answers into
 * JSON responses. Decoding and judging payments is the service's job.
 */
import type { TrustProxy } from '../http/trust-proxy.ts';
import { isJsonContentType } from '../http/content-type.ts';
import { ipRateLimitKey } from '../http/ip.ts';
import { TokenBucketLimiter } from '../http/rate-limit.ts';
import { createHttpServer, json, type HttpHandler, type HttpRequest, type HttpResponse, type ResponseObserver } from '../http/server.ts';
import type { FacilitatorService, ServiceAnswer } from './service.ts';

export interface FacilitatorHttpOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
  /** Default 64 KiB. */
  maxBodyBytes?: number;
  /** Per client IP (IPv6: per /64), on `/verify` and `/settle` together. Default 50 burst, 20 per second. */
  rateLimit?: { capacity: number; refillPerSecond: number; maxKeys?: number };
  /** Take the client IP from `X-Forwarded-For` behind these proxies (see `http/trust-proxy.ts`; `true`: one). */
  trustProxy?: boolean | TrustProxy;
  /** Clock for the rate limiter (ms). */
  now?: () => number;
  /** Where unexpected errors are logged; defaults to stderr. */
  log?: (line: string) => void;
  /** Told of every response (metrics). */
  observe?: ResponseObserver;
  /** More routes (`/metrics`). */
  extraRoutes?: Array<{ method: string; path: string; handler: HttpHandler }>;
}

export interface FacilitatorHttp {
  port: number;
  close(): Promise<void>;
}

export const DEFAULT_MAX_BODY_BYTES = 64 * 1024;
export const DEFAULT_RATE_LIMIT = { capacity: 50, refillPerSecond: 20 } as const;

const NO_STORE = { 'cache-control': 'no-store' };

function answer(a: ServiceAnswer): HttpResponse {
  if (a === null || typeof a !== 'object' || !Number.isInteger(a.status)) throw new TypeError('service returned no {status, body}');
  return json(a.status, a.body, a.headers ? { ...NO_STORE, ...a.headers } : NO_STORE);
}

export async function startFacilitatorHttp(service: FacilitatorService, opts: FacilitatorHttpOptions): Promise<FacilitatorHttp> {
  const maxBodyBytes = opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const rate: { capacity: number; refillPerSecond: number; maxKeys?: number } = opts.rateLimit ?? DEFAULT_RATE_LIMIT;
  const limiter = new TokenBucketLimiter({
    capacity: rate.capacity,
    refillPerSecond: rate.refillPerSecond,
    ...(rate.maxKeys !== undefined ? { maxKeys: rate.maxKeys } : {}),
    ...(opts.now !== undefined ? { now: opts.now } : {}),
  });
  const log = opts.log ?? ((line: string) => void process.stderr.write(`${line}\n`));
  const server = createHttpServer({
    host: opts.host,
    port: opts.port,
    maxBodyBytes,
    trustProxy: opts.trustProxy ?? false,
    log,
    observe: opts.observe,
  });

  const paid =
    (call: (body: Uint8Array, client: string) => Promise<ServiceAnswer>) =>
    async (req: HttpRequest): Promise<HttpResponse> => {
      const client = ipRateLimitKey(req.remoteIp);
      // Refused before the body is used: a limited client costs one map lookup.
      const taken = limiter.take(client);
      if (!taken.allowed) {
        return json(429, { error: 'rate limited' }, { ...NO_STORE, 'retry-after': String(taken.retryAfterSeconds) });
      }
      if (!isJsonContentType(req.headers['content-type'])) {
        return json(415, { error: 'content-type must be application/json' }, NO_STORE);
      }
      return answer(await call(await req.body(), client));
    };

  server
    .route('GET', '/supported', () => json(200, service.supported()))
    .route(
      'POST',
      '/verify',
      paid((body) => service.verify(body)),
    )
    .route(
      'POST',
      '/settle',
      paid((body, client) => service.settle(body, client)),
    )
    .route('GET', '/health', async () => {
      let h: { ok: boolean; details: Record<string, unknown> };
      try {
        h = await service.health();
      } catch (err) {
        log(`facilitator: health check failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
        h = { ok: false, details: { error: 'health check failed' } };
      }
      return json(h.ok === true ? 200 : 503, { ok: h.ok === true, details: h.details }, NO_STORE);
    });
  for (const r of opts.extraRoutes ?? []) server.route(r.method, r.path, r.handler);

  let port: number;
  try {
    port = await server.listen();
  } catch (err) {
    await server.close(0);
    throw err;
  }
  return { port, close: () => server.close() };
}
