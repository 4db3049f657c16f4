/**
 * One call to a remote facilitator's `POST /settle` or `POST /verify`, in the wire format of `@x402/core`'s
 * `HTTPFacilitatorClient` (a JSON `{x402Version, paymentPayload, paymentRequirements}` body; a 200 JSON answer), and
 * what its outcome tells about the payment.
 *
 * It is spoken here over undici rather than through that client: the client takes no abort signal per call, reads
 * any answer whole whatever its size, follows redirects, and reports a refused connection (nothing sent, the next
 * facilitator may be asked at once) and a connection lost after sending (outcome unknown) alike, as thrown errors.
 * Here every call has a deadline, answers are read up to {@link MAX_ANSWER_BYTES}, redirects are not followed, and
 * the outcome says which of the two it was.
 */
import { Buffer } from 'node:buffer';
import { request, type Dispatcher } from 'undici';
import { discardBody } from '../../http/discard-body.ts';
import { parseJsonBytes } from '../../protocol/x402/codec.ts';
import type { VerifyRequest } from '../../protocol/x402/types.ts';
import type { FacilitatorEndpoint } from './facilitators-config.ts';

/** A facilitator's answer is a few hundred bytes; one larger than this is not an answer. */
export const MAX_ANSWER_BYTES = 64 * 1024;

/** Why a call brought no usable answer; the metrics' `kind` label. */
export type CallFailureKind = 'unreachable' | 'timeout' | 'connection_lost' | 'http_5xx' | 'http_4xx' | 'bad_answer';

export type CallOutcome =
  /** A 200 whose body is JSON: the facilitator's answer, to be checked against the protocol's shape. */
  | { kind: 'answered'; body: unknown }
  /**
   * No answer. `sent: false` when the request provably never reached the facilitator's settlement (the connection
   * was refused or not made in time, or it refused the request with a 4xx before judging it); `sent: true` when it
   * may have acted on it (a timeout or a lost connection after sending, a 5xx, an answer that is not one).
   */
  | { kind: 'failed'; failure: CallFailureKind; sent: boolean; error: string };

/** Error codes of a connection that was never made: nothing was sent. */
const NOT_CONNECTED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

export async function callFacilitator(endpoint: FacilitatorEndpoint, route: 'settle' | 'verify', body: VerifyRequest, dispatcher: Dispatcher, timeoutMs: number): Promise<CallOutcome> {
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    const res = await request(`${endpoint.url}/${route}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ x402Version: body.x402Version, paymentPayload: body.paymentPayload, paymentRequirements: body.paymentRequirements }),
      dispatcher,
      signal,
      maxRedirections: 0,
    });
    const status = res.statusCode;
    if (status !== 200) {
      discardBody(res.body);
      // A 4xx (a body it would not take, a rate limit) is refused before any settlement; a 5xx or other may have acted.
      if (status >= 400 && status < 500) return { kind: 'failed', failure: 'http_4xx', sent: false, error: `answered ${status}` };
      return { kind: 'failed', failure: status >= 500 ? 'http_5xx' : 'bad_answer', sent: true, error: `answered ${status}` };
    }
    const chunks: Buffer[] = [];
    let received = 0;
    for await (const chunk of res.body as AsyncIterable<Buffer>) {
      received += chunk.length;
      if (received > MAX_ANSWER_BYTES) {
        discardBody(res.body);
        return { kind: 'failed', failure: 'bad_answer', sent: true, error: `an answer over ${MAX_ANSWER_BYTES} bytes` };
      }
      chunks.push(chunk);
    }
    const parsed = parseJsonBytes(new Uint8Array(Buffer.concat(chunks)));
    if (!parsed.ok) return { kind: 'failed', failure: 'bad_answer', sent: true, error: `an answer that is not JSON: ${parsed.error.message}` };
    return { kind: 'answered', body: parsed.value };
  } catch (err) {
    if (signal.aborted) return { kind: 'failed', failure: 'timeout', sent: true, error: `no answer within ${timeoutMs} ms` };
    const code = errorCode(err);
    if (code !== undefined && NOT_CONNECTED.has(code)) return { kind: 'failed', failure: 'unreachable', sent: false, error: code };
    return { kind: 'failed', failure: code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' ? 'timeout' : 'connection_lost', sent: true, error: code ?? String(err) };
  }
}

/** The `code` of an error or of the errors it wraps (undici wraps the socket's). */
function errorCode(err: unknown): string | undefined {
  let current = err;
  for (let depth = 0; depth < 5 && current !== null && typeof current === 'object'; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && code !== 'UND_ERR_SOCKET') return code;
    if (typeof code === 'string' && (current as { cause?: unknown }).cause === undefined) return code;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}
