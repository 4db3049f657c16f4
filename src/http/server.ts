/**
 * A thin, promise-based HTTP/1.1 server over uWebSockets.js (`uws-pack`), shared by the facilitator and
 * the marketplace gateway.
 *
 * Handlers are `async (req) => ({ status, headers?, body? })`. The wrapper owns every uWS rule:
 * - the uWS request object is only valid synchronously inside the route callback, so method, path, query and
 *   headers are copied there, before anything else (the peer address too, unless the handler answered
 *   synchronously without asking for it);
 * - a handler that returns a response rather than a promise is answered inside that callback;
 * - `onAborted` and `onData` are attached in that same callback, before any asynchronous work (`onData` only when
 *   the request has a body, `onAborted` only when the callback returns without having answered, or for HEAD);
 * - every `onData` chunk is copied (uWS neuters the ArrayBuffer when the callback returns);
 * - the response is written once, corked (uWS corks the synchronous part of the route callback itself; later
 *   writes go through `res.cork(...)`), and never after the client went away;
 * - the body is bounded by `maxBodyBytes`: a larger declared `content-length` is answered 413 before reading,
 *   and a streamed (chunked) body is answered 413 as soon as it crosses the limit, without buffering more.
 *   Both 413s close the connection so that the client cannot keep the server reading. The body is collected
 *   from the start (bounded by the limit), so a handler may call `req.body()` late. A route may have its own
 *   limit, and may take its body on demand ({@link RouteOptions}): then nothing past what already arrived is read
 *   until the handler asks for it, and a handler that answers without asking answers at once and closes the
 *   connection rather than reading a body it will not use.
 *
 * Errors: a handler may throw {@link HttpError} for a deliberate status; any other exception is logged to
 * stderr (with its stack) and answered `500 {"error":"internal error"}`. Unknown paths get 404, a known path
 * with another method 405 with `Allow`. All error bodies are JSON `{error: string}`.
 *
 * uWS itself answers some malformed requests without reaching us (e.g. HTTP/1.0 and absolute-form request
 * targets get 505, oversized header blocks 431).
 */
import { Buffer } from 'node:buffer';
import { STATUS_CODES } from 'node:http';
import * as uws from 'uWebSockets.js';
import { App, us_listen_socket_close, us_socket_local_port } from 'uWebSockets.js';
import type { HttpRequest as UwsRequest, HttpResponse as UwsResponse, RecognizedString, TemplatedApp, us_listen_socket, us_socket } from 'uWebSockets.js';
import { ConnectionGuard, type ConnectionLimits, type ConnectionStats } from './connection-guard.ts';
import { connectionLimitsFromEnv } from './connection-limits.ts';
import { formatBinaryAddress } from './ip.ts';
import { clientIp, type TrustProxy } from './trust-proxy.ts';
import { Router, StringRecord } from './router.ts';

export interface HttpRequest {
  /** As sent (HTTP methods are case-sensitive), e.g. `GET`. */
  readonly method: string;
  /** Raw request path without the query string, still percent-encoded, e.g. `/m/weather/forecast`. */
  readonly path: string;
  /** Raw query string without the `?`; empty when absent. */
  readonly query: string;
  /** Lower-cased names; repeated header lines joined with `, ` (`cookie` with `; `). */
  readonly headers: Readonly<Record<string, string>>;
  /** Canonical client IP (see `ip.ts`): the socket peer, or with `trustProxy` the right-most untrusted `X-Forwarded-For` hop. */
  readonly remoteIp: string;
  /** Path parameters of a pattern route (`:name`, `*`); empty for exact routes. */
  readonly params: Readonly<Record<string, string>>;
  /**
   * The whole request body (empty when there is none). Rejects with {@link PayloadTooLargeError} over
   * `maxBodyBytes` (the 413 has then already been sent) and with {@link RequestAbortedError} if the client
   * disconnected. Calling it again returns the same promise.
   */
  body(): Promise<Uint8Array>;
}

/**
 * A frozen response (`Object.freeze` on it and on its `headers`) may be returned again and again: the server checks
 * and encodes it once, on its first use. A response that differs each time may still share a frozen `headers` object
 * (checked and encoded once, on its first use) and add its own in `moreHeaders` (checked on every use).
 */
export interface HttpResponse {
  status: number;
  /** Must not contain `content-length`, `transfer-encoding` or `connection` (the server writes those). */
  headers?: Record<string, string>;
  /** Written after `headers`, with the same rules; names not in `headers`. */
  moreHeaders?: Record<string, string | FilledHeader>;
  body?: string | Uint8Array;
}

/** A handler that returns a response (not a promise) is answered before the route callback returns. */
export type HttpHandler = (req: HttpRequest) => Promise<HttpResponse> | HttpResponse;

export interface RouteOptions {
  /** This route's request body limit, instead of the server's `maxBodyBytes`. */
  maxBodyBytes?: number;
  /**
   * Read the body only once the handler calls `req.body()` (the socket is paused until then), so that a request can
   * be refused on its headers without its body being read.
   */
  bodyOnDemand?: boolean;
}

interface RegisteredRoute {
  handler: HttpHandler;
  maxBodyBytes: number;
  bodyOnDemand: boolean;
}

/** Told of each response written: the route's registered path (`unmatched`), method, status, seconds since arrival. */
export type ResponseObserver = (route: string, method: string, status: number, seconds: number) => void;

export interface HttpServerOptions {
  host: string;
  /** 0 picks a free port; `listen()` resolves to the actual one. */
  port: number;
  maxBodyBytes: number;
  /** Take the client IP from `X-Forwarded-For`, behind these proxies (see `trust-proxy.ts`; `true`: one). */
  trustProxy?: boolean | TrustProxy;
  /** Where handler failures are logged; defaults to stderr. */
  log?: (line: string) => void;
  /**
   * Called once per response written, with the matched route's registered path (`unmatched` when none matched), the
   * method, the status and the seconds since the request arrived. Not called for a client that went away first.
   */
  observe?: ResponseObserver;
  /**
   * Per-client and total connection caps and the idle timeout (see `connection-guard.ts`); by default from the
   * environment (`connectionLimitsFromEnv`); `false`: none.
   */
  connections?: ConnectionLimits | false;
}

export interface HttpServer {
  /** Registers a handler (see `router.ts` for path patterns). Returns the server for chaining. */
  route(method: string, path: string, handler: HttpHandler, options?: RouteOptions): HttpServer;
  /** Starts listening; resolves to the bound port. */
  listen(): Promise<number>;
  /**
   * Stops accepting connections, waits up to `graceMs` (default 5000) for running handlers, then closes every
   * socket. Requests arriving meanwhile on open keep-alive connections get 503.
   */
  close(graceMs?: number): Promise<void>;
  /** Connections open, refused at their cap, closed idle (undefined without connection limits). */
  connectionStats(): Readonly<ConnectionStats> | undefined;
}

/** Throw from a handler to answer `status` with `{error: message}`. */
export class HttpError extends Error {
  readonly status: number;
  readonly headers: Record<string, string> | undefined;
  constructor(status: number, message: string, headers?: Record<string, string>) {
    super(message);
    this.name = 'HttpError';
    this.status = status;
    this.headers = headers;
  }
}

export class PayloadTooLargeError extends HttpError {
  constructor(limit: number) {
    super(413, `request body larger than ${limit} bytes`);
    this.name = 'PayloadTooLargeError';
  }
}

export class RequestAbortedError extends Error {
  constructor() {
    super('client disconnected');
    this.name = 'RequestAbortedError';
  }
}

export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

/** A JSON response: `content-type: application/json; charset=utf-8` plus `headers`. */
export function json(status: number, value: unknown, headers?: Record<string, string>): HttpResponse {
  return { status, headers: { 'content-type': JSON_CONTENT_TYPE, ...headers }, body: JSON.stringify(value) };
}

/** `"413 Payload Too Large"`: the status line uWS `writeStatus` expects. */
export function statusLine(status: number): string {
  return `${status} ${STATUS_CODES[status] ?? 'Unknown'}`;
}

const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
/** What a {@link fillHeader} filler may hold: base64url characters, which are valid anywhere in a header value. */
const FILLER = /^[A-Za-z0-9_-]*$/;

/** The fixed parts of a header value, checked once; per response, {@link fillHeader} puts fillers between them. */
export interface HeaderTemplate {
  readonly parts: readonly string[];
}

/** A header value made by {@link fillHeader}: written as it is, its template having been checked and its fillers too. */
export class FilledHeader {
  private constructor(readonly value: string) {}

  /** @internal */
  static of(value: string): FilledHeader {
    return new FilledHeader(value);
  }
}

/** Checks the fixed parts of a header value once (throws TypeError like any invalid header). */
export function headerTemplate(parts: readonly string[]): HeaderTemplate {
  for (const part of parts) if (!HEADER_VALUE.test(part)) throw new TypeError(`invalid header template part ${JSON.stringify(part)}`);
  return Object.freeze({ parts: Object.freeze([...parts]) });
}

/**
 * A header value: the template's parts with `fillers` between them (one fewer filler than parts), each filler only
 * base64url characters. Only the short fillers are checked per response, not the whole value.
 */
export function fillHeader(template: HeaderTemplate, fillers: readonly string[]): FilledHeader {
  const { parts } = template;
  if (fillers.length !== parts.length - 1) throw new TypeError(`a header template of ${parts.length} parts takes ${parts.length - 1} fillers`);
  let value = parts[0] as string;
  for (let i = 0; i < fillers.length; i++) {
    const filler = fillers[i] as string;
    if (!FILLER.test(filler)) throw new TypeError(`invalid header filler ${JSON.stringify(filler)}`);
    value += filler + (parts[i + 1] as string);
  }
  return FilledHeader.of(value);
}
const RESERVED_HEADERS = new Set(['content-length', 'transfer-encoding', 'connection']);
const EMPTY = new Uint8Array(0);
/** The body of every request that has none: no promise to make per request. */
const NO_BODY: Promise<Uint8Array> = Promise.resolve(EMPTY);

interface PreparedResponse {
  status: number;
  /** `statusLine(status)` */
  line: RecognizedString;
  headers: [RecognizedString, RecognizedString][];
  /** A string goes to uWS as it is (encoded there, straight into the socket's buffer: no Buffer made per response). */
  body: Uint8Array | string;
}

/**
 * Frozen responses, checked and encoded once (see {@link HttpResponse}), status line and headers included: uWS takes
 * bytes as they are, where it would encode a string on every write.
 */
const preparedFrozen = new WeakMap<HttpResponse, PreparedResponse>();
/** Frozen `headers` objects shared by responses that are not frozen themselves, checked and encoded once. */
const preparedFrozenHeaders = new WeakMap<Record<string, string>, [Buffer, Buffer][]>();

/**
 * Header names that passed the checks below: the few a handler writes are checked once, not per response. Bounded:
 * past it (names an upstream chose, say) a name is simply checked every time.
 */
const checkedNames = new Set<string>();
const CHECKED_NAMES_MAX = 512;

function checkName(name: string): void {
  if (checkedNames.has(name)) return;
  if (!HEADER_NAME.test(name)) throw new TypeError(`invalid response header name ${JSON.stringify(name)}`);
  if (RESERVED_HEADERS.has(name.toLowerCase())) throw new TypeError(`response header ${name} is set by the server`);
  if (checkedNames.size < CHECKED_NAMES_MAX) checkedNames.add(name);
}

function checkedHeaders(record: Record<string, string | FilledHeader> | undefined, out: [RecognizedString, RecognizedString][] = []): [RecognizedString, RecognizedString][] {
  if (record === undefined) return out;
  for (const name of Object.keys(record)) {
    const value = record[name];
    checkName(name);
    if (value instanceof FilledHeader) {
      out.push([name, value.value]);
      continue;
    }
    if (typeof value !== 'string' || !HEADER_VALUE.test(value)) throw new TypeError(`invalid value for response header ${name}`);
    out.push([name, value]);
  }
  return out;
}

const frozenOrAbsent = (o: object | undefined) => o === undefined || Object.isFrozen(o);
const utf8 = (text: RecognizedString) => (typeof text === 'string' ? Buffer.from(text, 'utf8') : (text as Buffer)); // as uWS encodes a string

function prepare(r: HttpResponse): PreparedResponse {
  if (r === null || typeof r !== 'object') throw new TypeError('handler returned no response object');
  const frozen = Object.isFrozen(r) && frozenOrAbsent(r.headers) && frozenOrAbsent(r.moreHeaders);
  if (frozen) {
    const hit = preparedFrozen.get(r);
    if (hit !== undefined) return hit;
  }
  const { status } = r;
  if (!Number.isInteger(status) || status < 200 || status > 599) throw new TypeError(`invalid response status ${String(status)}`);
  let headers: [RecognizedString, RecognizedString][];
  if (!frozen && r.headers !== undefined && Object.isFrozen(r.headers)) {
    let shared = preparedFrozenHeaders.get(r.headers);
    if (shared === undefined) {
      shared = checkedHeaders(r.headers).map(([n, v]): [Buffer, Buffer] => [utf8(n), utf8(v)]);
      preparedFrozenHeaders.set(r.headers, shared);
    }
    headers = r.moreHeaders === undefined ? shared : checkedHeaders(r.moreHeaders, [...shared]);
  } else headers = checkedHeaders(r.moreHeaders, checkedHeaders(r.headers));
  const body = r.body === undefined ? EMPTY : r.body;
  if (!(body instanceof Uint8Array) && typeof body !== 'string') throw new TypeError('response body must be a string or a Uint8Array');
  if ((status === 204 || status === 304) && body.length > 0) throw new TypeError(`a ${status} response has no body`);
  if (!frozen) return { status, line: statusLine(status), headers, body };
  const prepared = { status, line: utf8(statusLine(status)), headers: headers.map(([n, v]): [Buffer, Buffer] => [utf8(n), utf8(v)]), body: typeof body === 'string' ? utf8(body) : body };
  preparedFrozen.set(r, prepared);
  return prepared;
}

function errorBody(status: number, message: string, headers?: Record<string, string>): PreparedResponse {
  return prepare(json(status, { error: message }, headers));
}

function readHeaders(req: UwsRequest): Record<string, string> {
  const headers = new StringRecord();
  req.forEach((key, value) => {
    const k = key.toLowerCase();
    const prev = headers[k];
    headers[k] = prev === undefined ? value : `${prev}${k === 'cookie' ? '; ' : ', '}${value}`;
  });
  return headers;
}

function describe(err: unknown): string {
  return err instanceof Error ? (err.stack ?? `${err.name}: ${err.message}`) : String(err);
}

/**
 * What a handler sees. The client address costs a copy out of uWS, so it is read on first use (the rate-limited
 * routes), or by {@link keepPeer} before the route callback returns when the handler goes on asynchronously.
 */
class RouteRequest implements HttpRequest {
  #remoteIp: string | undefined;
  #peer: ArrayBuffer | undefined;
  #peerText: ArrayBuffer | undefined;
  #peerIp: string | undefined;
  constructor(
    readonly method: string,
    readonly path: string,
    readonly query: string,
    readonly headers: Readonly<Record<string, string>>,
    readonly params: Readonly<Record<string, string>>,
    private readonly exchange: Exchange,
    private readonly res: UwsResponse,
    private readonly trustProxy: TrustProxy,
  ) {}

  get remoteIp(): string {
    this.#remoteIp ??= clientIp(this.peerIp(), this.headers['x-forwarded-for'], this.trustProxy);
    return this.#remoteIp;
  }

  /** The socket peer's canonical address (not `X-Forwarded-For`'s). */
  peerIp(): string {
    this.#peerIp ??= formatBinaryAddress(...this.keepPeer());
    return this.#peerIp;
  }

  /** Copies the peer address out of uWS, once: from the route callback, or while the response is still open. */
  keepPeer(): [ArrayBuffer, ArrayBuffer | undefined] {
    if (this.#peer === undefined) {
      this.#peer = this.res.getRemoteAddress();
      // Only used for an address of unexpected length (see formatBinaryAddress).
      if (this.#peer.byteLength !== 4 && this.#peer.byteLength !== 16) this.#peerText = this.res.getRemoteAddressAsText();
    }
    return [this.#peer, this.#peerText];
  }

  body(): Promise<Uint8Array> {
    return this.exchange.body();
  }
}

/** A body of at most this many bytes that its handler never asked for is read and dropped, keeping the connection. */
const DRAINED_BODY_BYTES = 16 * 1024;

/**
 * One request/response pair: body collection, abort tracking and the single write.
 *
 * A response decided before the request body has fully arrived (e.g. a 429 before reading) is held until
 * the body ends, so the connection stays in sync for keep-alive; if the body then crosses `maxBodyBytes`
 * the held response is sent with `Connection: close` instead of reading on.
 */
class Exchange {
  aborted = false;
  /** A response has been chosen (it may still be held, see above). */
  decided = false;
  written = false;
  /** Still in the uWS route callback, where the response is corked already. */
  inCallback = true;
  /** For `observe`: the matched route's path, set once the router has matched. */
  route = 'unmatched';
  private held: PreparedResponse | undefined;
  private bodyComplete = true;
  private overLimit = false;
  /** The body is read only once asked for (see {@link RouteOptions.bodyOnDemand}), and it has not been yet. */
  private bodyPaused = false;
  /** The request's declared `content-length`, when it has one. */
  private declaredLength: number | undefined;
  private maxBodyBytes: number;
  private chunks: Uint8Array[] = [];
  private received = 0;
  private bodyPromise = NO_BODY;
  private resolveBody: ((b: Uint8Array) => void) | undefined;
  private rejectBody: ((e: Error) => void) | undefined;
  private readonly started: number;

  constructor(
    private readonly res: UwsResponse,
    readonly method: string,
    readonly path: string,
    maxBodyBytes: number,
    private readonly log: (line: string) => void,
    private readonly observe: ResponseObserver | undefined,
  ) {
    this.maxBodyBytes = maxBodyBytes;
    this.started = observe === undefined ? 0 : performance.now();
  }

  get label(): string {
    return `${this.method} ${this.path}`;
  }

  body(): Promise<Uint8Array> {
    if (this.bodyPaused) {
      this.bodyPaused = false;
      if (!this.aborted && !this.written) this.res.resume();
    }
    return this.bodyPromise;
  }

  /** uWS onAborted: the response object must not be touched any more. */
  abort(): void {
    this.aborted = true;
    this.held = undefined;
    this.chunks = [];
    this.rejectBody?.(new RequestAbortedError());
  }

  /**
   * Synchronously, in the route callback. Returns false when a 413 was sent up front. `route` gives the matched
   * route's body limit and whether it reads its body on demand.
   */
  startBody(headers: Record<string, string>, route?: { maxBodyBytes: number; bodyOnDemand: boolean }): boolean {
    if (route !== undefined) this.maxBodyBytes = route.maxBodyBytes;
    const declared = headers['content-length'];
    const length = declared !== undefined && /^\d+$/.test(declared) ? Number(declared) : undefined;
    this.declaredLength = length;
    if (length !== undefined && length > this.maxBodyBytes) {
      this.overLimit = true; // no handler runs, so nobody waits on the body
      this.decided = true;
      this.write(errorBody(413, `request body larger than ${this.maxBodyBytes} bytes`), true);
      return false;
    }
    this.bodyComplete = !(headers['transfer-encoding'] !== undefined || (length !== undefined && length > 0));
    if (this.bodyComplete) return true; // no body: body() is NO_BODY, and there is nothing to read
    this.bodyPromise = new Promise<Uint8Array>((resolve, reject) => {
      this.resolveBody = resolve;
      this.rejectBody = reject;
    });
    this.bodyPromise.catch(() => {}); // a handler that never reads the body must not cause an unhandled rejection
    this.res.onData((chunk, isLast) => this.onData(chunk, isLast));
    if (route?.bodyOnDemand === true) {
      this.bodyPaused = true;
      this.res.pause();
    }
    return true;
  }

  private onData(chunk: ArrayBuffer, isLast: boolean): void {
    if (this.aborted || this.overLimit || this.written) return;
    this.received += chunk.byteLength;
    if (this.received > this.maxBodyBytes) {
      this.overLimit = true;
      this.chunks = [];
      this.rejectBody?.(new PayloadTooLargeError(this.maxBodyBytes));
      const held = this.held;
      this.held = undefined;
      this.decided = true;
      this.write(held ?? errorBody(413, `request body larger than ${this.maxBodyBytes} bytes`), true);
      return;
    }
    if (!this.decided && chunk.byteLength > 0) this.chunks.push(new Uint8Array(chunk.slice(0))); // copy: uWS neuters `chunk`
    if (isLast) {
      this.bodyComplete = true;
      const body = this.chunks.length === 1 ? this.chunks[0]! : new Uint8Array(Buffer.concat(this.chunks));
      this.chunks = [];
      this.resolveBody?.(body);
      const held = this.held;
      this.held = undefined;
      if (held !== undefined) this.write(held, false);
    }
  }

  /** Sends a handler's response (an invalid one becomes a logged 500). */
  send(r: HttpResponse): void {
    if (this.decided || this.aborted) return;
    let prepared: PreparedResponse;
    try {
      prepared = prepare(r);
    } catch (err) {
      this.log(`http: ${this.label}: invalid response: ${describe(err)}`);
      prepared = errorBody(500, 'internal error');
    }
    this.respond(prepared);
  }

  /** Maps a handler's exception to a response. */
  fail(err: unknown): void {
    if (err instanceof RequestAbortedError) return; // body() after the client left: nothing to answer
    if (err instanceof HttpError) {
      if (this.decided || this.aborted) return;
      let prepared: PreparedResponse;
      try {
        prepared = errorBody(err.status, err.message, err.headers);
      } catch (e) {
        this.log(`http: ${this.label}: invalid HttpError: ${describe(e)}`);
        prepared = errorBody(500, 'internal error');
      }
      this.respond(prepared);
      return;
    }
    this.log(`http: ${this.label} failed: ${describe(err)}`);
    if (!this.decided) this.respond(errorBody(500, 'internal error'));
  }

  /** Chooses the response; writes it now, or once the request body has been received. */
  respond(r: PreparedResponse, closeConnection = false): void {
    if (this.decided || this.aborted) return;
    this.decided = true;
    if (this.bodyPaused && !closeConnection && this.declaredLength !== undefined && this.declaredLength <= DRAINED_BODY_BYTES) {
      // A small body nobody asked for is read and dropped: the answer goes once it is in, on a connection kept open.
      this.bodyPaused = false;
      this.res.resume();
      this.held = r;
      return;
    }
    // A larger body nobody asked for is not read on: the answer goes now, and the connection with it.
    if (this.bodyComplete || closeConnection || this.bodyPaused) this.write(r, closeConnection || !this.bodyComplete);
    else this.held = r;
  }

  private write(r: PreparedResponse, closeConnection: boolean): void {
    if (this.written || this.aborted) return;
    this.written = true;
    this.chunks = [];
    if (this.inCallback) this.emit(r, closeConnection);
    else this.res.cork(() => this.emit(r, closeConnection));
    this.observe?.(this.route, this.method, r.status, (performance.now() - this.started) / 1000);
  }

  private emit(r: PreparedResponse, closeConnection: boolean): void {
    const res = this.res;
    res.writeStatus(r.line);
    for (const [name, value] of r.headers) res.writeHeader(name, value);
    // endWithoutBody() without arguments writes no Content-Length (an explicit `undefined` length is
    // written as 9223372036854775808); with closeConnection a length must be given, 0 is tolerated.
    if (r.status === 204 || r.status === 304) {
      if (closeConnection) res.endWithoutBody(0, true);
      else res.endWithoutBody();
    } else if (this.method === 'HEAD') res.endWithoutBody(typeof r.body === 'string' ? Buffer.byteLength(r.body, 'utf8') : r.body.length, closeConnection);
    else res.end(r.body, closeConnection);
  }
}

export function createHttpServer(options: HttpServerOptions): HttpServer {
  const { host, port, maxBodyBytes } = options;
  if (!Number.isSafeInteger(maxBodyBytes) || maxBodyBytes < 0) throw new RangeError(`maxBodyBytes must be a non-negative integer, got ${maxBodyBytes}`);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new RangeError(`port must be 0..65535, got ${port}`);
  const trustProxy: TrustProxy = options.trustProxy === true ? { hops: 1 } : (options.trustProxy ?? false);
  const log = options.log ?? ((line: string) => void process.stderr.write(`${line}\n`));
  const router = new Router<RegisteredRoute>();
  const app: TemplatedApp = App();
  const limits = options.connections === undefined ? connectionLimitsFromEnv(process.env) : options.connections;
  const guard = limits === false ? undefined : new ConnectionGuard(limits, trustProxy);
  guard?.attach(app);
  /** Requests still running are counted per client only where the idle rule needs them. */
  const countInflight = guard !== undefined && limits !== false && limits.idleTimeoutMs > 0;
  let listenSocket: us_listen_socket | undefined;
  let closing = false;
  let closed: Promise<void> | undefined;
  let inflight = 0;
  let drained: (() => void) | undefined;

  const settled = () => {
    inflight--;
    if (inflight === 0) drained?.();
  };

  /** Answers now when it can; otherwise once the handler's promise settles (counted in `inflight` for `close`). */
  function onRequest(res: UwsResponse, req: UwsRequest, ex: Exchange): void {
    const query = req.getQuery() ?? ''; // typed as string, but undefined when the URL has no `?`
    const headers = readHeaders(req);
    const { method, path } = ex;
    const match = router.match(method, path);
    if (!ex.startBody(headers, match.kind === 'found' ? match.handler : undefined)) return;
    if (closing) {
      ex.respond(errorBody(503, 'shutting down'), true);
      return;
    }
    switch (match.kind) {
      case 'not_found':
        ex.respond(errorBody(404, 'not found'));
        return;
      case 'bad_path':
        ex.respond(errorBody(400, 'malformed path'));
        return;
      case 'method_not_allowed':
        ex.respond(errorBody(405, 'method not allowed', { allow: match.allow.join(', ') }));
        return;
      case 'found':
        ex.route = match.route;
        break;
    }
    const request = new RouteRequest(method, path, query, headers, match.params, ex, res, trustProxy);
    let result: Promise<HttpResponse> | HttpResponse;
    try {
      result = match.handler.handler(request);
    } catch (err) {
      ex.fail(err);
      return;
    }
    if (typeof (result as Partial<PromiseLike<HttpResponse>> | null)?.then !== 'function') {
      ex.send(result as HttpResponse);
      return;
    }
    request.keepPeer(); // the handler may ask for it after `res` is gone
    inflight++;
    const client = countInflight && guard?.watching === true ? ConnectionGuard.key(request.peerIp()) : undefined;
    if (client !== undefined) guard?.requestStarted(client);
    Promise.resolve(result).then(
      (r) => {
        try {
          ex.send(r);
        } catch (err) {
          log(`http: ${ex.label}: writing the response failed: ${describe(err)}`);
        }
        if (client !== undefined) guard?.requestEnded(client);
        settled();
      },
      (err: unknown) => {
        try {
          ex.fail(err);
        } catch (e) {
          log(`http: ${ex.label}: writing the response failed: ${describe(e)}`);
        }
        if (client !== undefined) guard?.requestEnded(client);
        settled();
      },
    );
  }

  app.any('/*', (res, req) => {
    try {
      // Everything from `req` is read in this callback: it is stack-allocated and invalid once it returns.
      const ex = new Exchange(res, req.getCaseSensitiveMethod(), req.getUrl(), maxBodyBytes, log, options.observe);
      // uWS must know what to do should the client leave before the answer. That is set up only when the callback
      // returns unanswered, except for HEAD: uWS counts the Content-Length a HEAD answer announces as still owed,
      // so there it must be in place before the answer.
      const isHead = ex.method === 'HEAD';
      if (isHead) res.onAborted(() => ex.abort());
      try {
        onRequest(res, req, ex);
      } catch (err) {
        ex.fail(err);
      }
      ex.inCallback = false;
      if (!ex.written && !isHead) res.onAborted(() => ex.abort());
    } catch (err) {
      // Only reachable if uWS itself threw (e.g. a discarded response); never let it escape into uWS.
      log(`http: request callback failed: ${describe(err)}`);
    }
  });

  const server: HttpServer = {
    route(method, path, handler, routeOptions = {}) {
      const limit = routeOptions.maxBodyBytes ?? maxBodyBytes;
      if (!Number.isSafeInteger(limit) || limit < 0) throw new RangeError(`maxBodyBytes of ${path} must be a non-negative integer, got ${limit}`);
      router.add(method, path, { handler, maxBodyBytes: limit, bodyOnDemand: routeOptions.bodyOnDemand === true });
      return server;
    },
    listen() {
      if (closing) return Promise.reject(new Error('server is closed'));
      if (listenSocket !== undefined) return Promise.reject(new Error('server is already listening'));
      return new Promise<number>((resolve, reject) => {
        // Exclusive: uWS otherwise binds with SO_REUSEPORT, and a second gate402 on the same port would silently
        // share its traffic (and its relayers) instead of failing. The (host, port, options, cb) overload exists at
        // run time; the typings only declare it without a host.
        const { LIBUS_LISTEN_EXCLUSIVE_PORT } = uws as unknown as { LIBUS_LISTEN_EXCLUSIVE_PORT: number };
        const listenExclusive = app.listen as unknown as (h: string, p: number, o: number, cb: (s: us_listen_socket | false) => void) => void;
        listenExclusive.call(app, host, port, LIBUS_LISTEN_EXCLUSIVE_PORT, (socket) => {
          if (socket === false) {
            reject(new Error(`cannot listen on ${host}:${port} (is it in use?)`));
            return;
          }
          listenSocket = socket;
          // The listen socket works with us_socket_local_port although it is typed for us_socket.
          resolve(us_socket_local_port(socket as unknown as us_socket));
        });
      });
    },
    close(graceMs = 5000) {
      if (closed !== undefined) return closed;
      closing = true;
      if (listenSocket !== undefined) us_listen_socket_close(listenSocket);
      listenSocket = undefined;
      closed = (async () => {
        if (inflight > 0) {
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, graceMs);
            drained = () => {
              clearTimeout(timer);
              resolve();
            };
          });
        }
        guard?.stop();
        app.close(); // force-closes the remaining (idle keep-alive) connections
      })();
      return closed;
    },
    connectionStats() {
      return guard?.stats;
    },
  };
  return server;
}
