import { Buffer } from 'node:buffer';
import { request, type Dispatcher } from 'undici';
import { discardBody } from '../../http/discard-body.ts';
import { upstreamFailed, type PreparedCall, type UpstreamRequest, type UpstreamResult } from '../../ports/upstream.ts';
import { ok } from '../../protocol/result.ts';
import type { InternalUpstreamName } from '../catalog/merchant.ts';

/** Request headers a buyer may pass to the upstream; everything else (payment credentials included) stays here. */
const FORWARDED_REQUEST_HEADERS = ['accept', 'accept-language', 'content-type', 'user-agent'];
/**
 * Response headers passed back; anything that could name the origin (server, via, location, cookies...) is dropped,
 * and so is `cache-control`: a paid answer is always `private, no-store` (see `paid-headers.ts`).
 */
const RETURNED_RESPONSE_HEADERS = ['content-type', 'content-language', 'etag', 'last-modified'];

/** The upstreams served inside the gateway (`Upstream` kind `internal`): what `name` makes of a request. */
export type InternalUpstream = (name: InternalUpstreamName, request: UpstreamRequest) => PreparedCall;

/** What a call to a URL upstream may take: time and bytes. */
export interface UpstreamLimits {
  timeoutMs: number;
  /** The largest response body read; a larger one fails the call (the read stops there). */
  maxBytes: number;
}

/**
 * Calls a URL merchant's upstream at `url` (built and checked by `confinedUpstreamUrl`) with its secret headers
 * added, through a pooled, address-guarded dispatcher with timeouts. Redirects are never followed (a 3xx is the
 * caller's to judge); the body is counted as it streams and the call fails once it crosses `maxBytes`, without
 * reading on. A 5xx counts as a failure of the upstream (the breaker's business); its body still comes back.
 */
export async function forwardToUpstream(url: string, secretHeaders: Record<string, string>, req: UpstreamRequest, dispatcher: Dispatcher, limits: UpstreamLimits): Promise<UpstreamResult> {
  const started = performance.now();
  const headers: Record<string, string> = {};
  for (const name of FORWARDED_REQUEST_HEADERS) {
    const v = req.headers[name];
    if (v !== undefined) headers[name] = v;
  }
  for (const [name, value] of Object.entries(secretHeaders)) headers[name.toLowerCase()] = value;
  const failed = (error: string): UpstreamResult => upstreamFailed(error, performance.now() - started);
  try {
    const res = await request(url, {
      method: req.method as Dispatcher.HttpMethod,
      headers,
      ...(req.body && req.body.length > 0 ? { body: req.body } : {}),
      dispatcher,
      signal: AbortSignal.timeout(limits.timeoutMs),
      maxRedirections: 0,
    });
    const declared = Number(res.headers['content-length']);
    if (Number.isFinite(declared) && declared > limits.maxBytes) {
      discardBody(res.body);
      return failed(`the upstream announced ${declared} bytes, over the limit of ${limits.maxBytes}`);
    }
    const chunks: Buffer[] = [];
    let received = 0;
    for await (const chunk of res.body as AsyncIterable<Buffer>) {
      received += chunk.length;
      if (received > limits.maxBytes) {
        discardBody(res.body);
        return failed(`the upstream response passed the limit of ${limits.maxBytes} bytes`);
      }
      chunks.push(chunk);
    }
    const body = new Uint8Array(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
    const returned: Record<string, string> = {};
    for (const name of RETURNED_RESPONSE_HEADERS) {
      const v = res.headers[name];
      if (typeof v === 'string') returned[name] = v;
    }
    return ok({ status: res.statusCode, headers: returned, body, latencyMs: performance.now() - started });
  } catch (err) {
    // The message is for our logs and records only: it may name the upstream host, so it never reaches a buyer.
    return failed((err as Error).message);
  }
}
