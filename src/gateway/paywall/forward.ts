import { request, type Dispatcher } from 'undici';
import type { InternalUpstreamName, Upstream } from '../catalog/merchant.ts';

/** Request headers a buyer may pass to the upstream; everything else (payment credentials included) stays here. */
const FORWARDED_REQUEST_HEADERS = ['accept', 'accept-language', 'content-type', 'user-agent'];
/** Response headers passed back; anything that could name the origin (server, via, location, cookies...) is dropped. */
const RETURNED_RESPONSE_HEADERS = ['content-type', 'content-language', 'cache-control', 'etag', 'last-modified'];

export interface UpstreamRequest {
  method: string;
  /** The route and any appended segments, e.g. `historical/2024-01-01..2024-02-01`. */
  path: string;
  /** The raw query string, without `?`, forwarded verbatim. */
  query: string;
  headers: Record<string, string>;
  body?: Uint8Array;
}

export type UpstreamResult =
  | { ok: true; status: number; headers: Record<string, string>; body: Uint8Array; latencyMs: number }
  | { ok: false; error: string; latencyMs: number };

/**
 * A paid request's upstream call, made ready before the payment settles; or the refusal of a request that can only
 * fail (its input is bad), answered then, so that nothing is charged for it.
 */
export type PreparedCall = { ok: true; call(): Promise<UpstreamResult> } | { ok: false; status: number; error: string };

/** The upstreams served inside the gateway (`Upstream` kind `internal`): what `name` makes of a request. */
export type InternalUpstream = (name: InternalUpstreamName, request: UpstreamRequest) => PreparedCall;

/** The upstream URL for a request: the merchant's base URL, the route path, the query string as it came. */
export function upstreamUrl(baseUrl: string, path: string, query: string): string {
  const base = baseUrl.endsWith('/') ? baseUrl.slice(0, -1) : baseUrl;
  return `${base}/${path}${query ? `?${query}` : ''}`;
}

/**
 * Calls a URL merchant's upstream with its secret headers added, through a pooled, address-guarded dispatcher with
 * timeouts. A 5xx counts as a failure of the upstream (the breaker's business); its body still comes back.
 */
export async function forwardToUpstream(upstream: Extract<Upstream, { kind: 'url' }>, req: UpstreamRequest, dispatcher: Dispatcher, timeoutMs: number): Promise<UpstreamResult> {
  const started = performance.now();
  const headers: Record<string, string> = {};
  for (const name of FORWARDED_REQUEST_HEADERS) {
    const v = req.headers[name];
    if (v !== undefined) headers[name] = v;
  }
  for (const [name, value] of Object.entries(upstream.secretHeaders)) headers[name.toLowerCase()] = value;
  try {
    const res = await request(upstreamUrl(upstream.baseUrl, req.path, req.query), {
      method: req.method as Dispatcher.HttpMethod,
      headers,
      ...(req.body && req.body.length > 0 ? { body: req.body } : {}),
      dispatcher,
      signal: AbortSignal.timeout(timeoutMs),
      maxRedirections: 0,
    });
    const body = new Uint8Array(await res.body.arrayBuffer());
    const returned: Record<string, string> = {};
    for (const name of RETURNED_RESPONSE_HEADERS) {
      const v = res.headers[name];
      if (typeof v === 'string') returned[name] = v;
    }
    return { ok: true, status: res.statusCode, headers: returned, body, latencyMs: performance.now() - started };
  } catch (err) {
    // The message is for our logs and records only: it may name the upstream host, so it never reaches a buyer.
    return { ok: false, error: (err as Error).message, latencyMs: performance.now() - started };
  }
}
