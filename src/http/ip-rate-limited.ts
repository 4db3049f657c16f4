import { ipRateLimitKey } from './ip.ts';
import type { TokenBucketLimiter } from './rate-limit.ts';
import { json, type HttpHandler } from './server.ts';

/** `handler` behind a per-client-IP token bucket: over the limit, 429 with `retry-after` and nothing else happens. */
export function ipRateLimited(handler: HttpHandler, limiter: TokenBucketLimiter, what: string): HttpHandler {
  return (req) => {
    const taken = limiter.take(ipRateLimitKey(req.remoteIp));
    if (!taken.allowed) return json(429, { error: `too many ${what} from this address; try again later` }, { 'cache-control': 'no-store', 'retry-after': String(taken.retryAfterSeconds) });
    return handler(req);
  };
}
