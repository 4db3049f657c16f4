/**
 * Calls to the gateway's public API, and what each failure means in words. Every call has a timeout; a failure is
 * an {@link ApiError} whose message a person can act on.
 */

export class ApiError extends Error {
  /** 0 when no answer came (network down, timed out). */
  readonly status: number;
  readonly body: unknown;
  constructor(status: number, message: string, body?: unknown) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.body = body;
  }
}

export interface ApiAnswer<T> {
  status: number;
  body: T;
  headers: Headers;
}

export interface ApiOptions extends RequestInit {
  timeoutMs?: number;
  /** Statuses that are answers, not errors (2xx always are). */
  expect?: number[];
}

/** The `error` the API sent (every gate402 error body is `{error}`; problem+json has `detail`). */
function errorText(body: unknown): string | undefined {
  if (body && typeof body === 'object') {
    const b = body as { error?: unknown; detail?: unknown; title?: unknown };
    if (typeof b.error === 'string' && b.error) return b.error;
    if (typeof b.detail === 'string' && b.detail) return b.detail;
    if (typeof b.title === 'string' && b.title) return b.title;
  }
  return undefined;
}

function sentence(text: string): string {
  const t = text.trim();
  const first = t.charAt(0).toUpperCase() + t.slice(1);
  return /[.!?]$/.test(first) ? first : `${first}.`;
}

/** What a failed answer means, in words: the API's own explanation where it gave one. */
export function explainStatus(status: number, body: unknown, headers?: Headers): string {
  const said = errorText(body);
  switch (status) {
    case 400:
      return said ? sentence(said) : 'The gateway did not accept this request (it is malformed).';
    case 402:
      return said ? sentence(said) : 'Payment is required and none was accepted; nothing was charged.';
    case 403:
      return said ? sentence(said) : 'This is not allowed for your wallet.';
    case 404:
      return said ? sentence(said) : 'Not found: this gateway does not offer it (is the feature turned off?).';
    case 413:
      return said ? sentence(said) : 'That is too large for the gateway.';
    case 415:
      return said ? sentence(said) : 'The gateway did not understand the format of the request.';
    case 429: {
      const wait = Number(headers?.get('retry-after'));
      return `Too many requests from your address just now; try again ${Number.isFinite(wait) && wait > 0 ? `in ${Math.ceil(wait)} seconds` : 'in a minute'}.`;
    }
    case 500:
      return 'The gateway failed unexpectedly (HTTP 500). Try again later; if it keeps happening, tell the operator.';
    case 502:
    case 503:
    case 504:
      return said ? sentence(said) : `The gateway or the chain behind it is not available right now (HTTP ${status}); try again shortly.`;
    default:
      return said ? sentence(said) : `The gateway answered HTTP ${status}.`;
  }
}

/** `fetch` of a same-origin API path, parsed as JSON; throws {@link ApiError} unless the status is 2xx or expected. */
export async function api<T>(path: string, options: ApiOptions = {}): Promise<ApiAnswer<T>> {
  const { timeoutMs = 20_000, expect = [], ...init } = options;
  let res: Response;
  try {
    res = await fetch(path, { ...init, signal: AbortSignal.timeout(timeoutMs), headers: { accept: 'application/json', ...init.headers } });
  } catch (err) {
    const timedOut = err instanceof DOMException && err.name === 'TimeoutError';
    throw new ApiError(
      0,
      timedOut
        ? `The gateway did not answer within ${Math.round(timeoutMs / 1000)} seconds. Check your connection and try again.`
        : 'The gateway cannot be reached. Check your connection and try again.',
    );
  }
  const text = await res.text().catch(() => '');
  let body: unknown = text;
  if ((res.headers.get('content-type') ?? '').includes('json') && text !== '') {
    try {
      body = JSON.parse(text);
    } catch {
      throw new ApiError(res.status, `The gateway sent an answer this page cannot read (HTTP ${res.status}).`);
    }
  }
  if ((res.status < 200 || res.status > 299) && !expect.includes(res.status)) throw new ApiError(res.status, explainStatus(res.status, body, res.headers), body);
  return { status: res.status, body: body as T, headers: res.headers };
}

/** POST a JSON body. */
export function postJson<T>(path: string, value: unknown, options: ApiOptions = {}): Promise<ApiAnswer<T>> {
  return api<T>(path, { ...options, method: 'POST', body: JSON.stringify(value), headers: { 'content-type': 'application/json', ...options.headers } });
}
