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
import { STATUS_CODES } from 'node:http';
import * as uws from 'uWebSockets.js';
import { App, us_listen_socket_close, us_socket_local_port } from 'uWebSockets.js';
import type { HttpRequest as UwsRequest, HttpResponse as UwsResponse, TemplatedApp, us_listen_socket, us_socket } from 'uWebSockets.js';
import { ConnectionGuard, type ConnectionLimits, type ConnectionStats } from './connection-guard.ts';
import { connectionLimitsFromEnv } from './connection-limits.ts';
import { describeError, Exchange } from './exchange.ts';
import type { FilledHeader } from './header-template.ts';
import { errorBody } from './prepared-response.ts';
import { readHeaders, RouteRequest } from './route-request.ts';
import type { TrustProxy } from './trust-proxy.ts';
import { Router } from './router.ts';

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
          log(`http: ${ex.label}: writing the response failed: ${describeError(err)}`);
        }
        if (client !== undefined) guard?.requestEnded(client);
        settled();
      },
      (err: unknown) => {
        try {
          ex.fail(err);
        } catch (e) {
          log(`http: ${ex.label}: writing the response failed: ${describeError(e)}`);
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
      log(`http: request callback failed: ${describeError(err)}`);
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
