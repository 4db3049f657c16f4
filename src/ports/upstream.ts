/**
 * The upstream port: what a paid route calls once its payment settles. The marketplace's URL and file upstreams
 * and the stock desk's in-process `stock-data` all implement it, and the paywall depends only on this, so neither
 * side imports the other.
 */
import type { Err, Failure, HttpFailure, Ok } from '../protocol/result.ts';

export interface UpstreamRequest {
  method: string;
  /** The route and any appended segments, each canonically encoded (see `gateway/paywall/upstream-path.ts`), e.g. `historical/2024-01-01..2024-02-01`. */
  path: string;
  /** The raw query string, without `?` (checked by `checkQuery`), forwarded as it came. */
  query: string;
  headers: Record<string, string>;
  body?: Uint8Array;
}

/** An upstream's answer, as it came, and how long it took. */
export interface UpstreamAnswer {
  status: number;
  headers: Record<string, string>;
  body: Uint8Array;
  latencyMs: number;
}

/** An upstream call that gave no answer (unreachable, timed out, too large, a file gone): why, and how long it took. */
export interface UpstreamFailure extends Failure<'upstream_failed'> {
  latencyMs: number;
}

/** An upstream call's outcome: its answer, or why it failed; the latency is measured either way. */
export type UpstreamResult = Ok<UpstreamAnswer> | Err<UpstreamFailure>;

/** The upstream gave no answer. */
export function upstreamFailed(message: string, latencyMs: number): Err<UpstreamFailure> {
  return { ok: false, error: { code: 'upstream_failed', message, latencyMs } };
}

/** How long a call took, answered or not. */
export function latencyOf(result: UpstreamResult): number {
  return result.ok ? result.value.latencyMs : result.error.latencyMs;
}

/** The call itself, made once the payment settles. */
export type UpstreamCall = () => Promise<UpstreamResult>;

/**
 * Why a request is refused before it is paid for: its input is bad (400), names nothing (404), or the upstream is
 * off (503); an address in it is malformed (400). The message is the buyer's to read.
 */
export type UpstreamRefusalCode = 'invalid_input' | 'invalid_address' | 'not_found' | 'upstream_off';

/**
 * A paid request's upstream call, made ready before the payment settles; or the refusal of a request that can only
 * fail (its input is bad), answered then, so that nothing is charged for it.
 */
export type PreparedCall = Ok<UpstreamCall> | Err<HttpFailure<UpstreamRefusalCode>>;

/** An upstream served in-process: checks a request now and hands back the call to make once it is paid. */
export type UpstreamPort = (request: UpstreamRequest) => PreparedCall;
