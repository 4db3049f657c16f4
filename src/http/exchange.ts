/**
 * One request/response pair inside the server: the request body collected within its limit (or on demand), the
 * client going away, and the single corked write of the answer.
 */
import { Buffer } from 'node:buffer';
import type { HttpResponse as UwsResponse } from 'uWebSockets.js';
import { errorBody, prepare, type PreparedResponse } from './prepared-response.ts';
import { HttpError, PayloadTooLargeError, RequestAbortedError, type HttpResponse, type ResponseObserver } from './server.ts';

/** The body of every request that has none: no promise to make per request. */
const NO_BODY: Promise<Uint8Array> = Promise.resolve(new Uint8Array(0));

/** An exception as logged: its stack when it has one. */
export function describeError(err: unknown): string {
  return err instanceof Error ? (err.stack ?? `${err.name}: ${err.message}`) : String(err);
}

const DRAINED_BODY_BYTES = 16 * 1024;

/**
 * One request/response pair: body collection, abort tracking and the single write.
 *
 * A response decided before the request body has fully arrived (e.g. a 429 before reading) is held until
 * the body ends, so the connection stays in sync for keep-alive; if the body then crosses `maxBodyBytes`
 * the held response is sent with `Connection: close` instead of reading on.
 */
export class Exchange {
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

  private readonly res: UwsResponse;
  readonly method: string;
  readonly path: string;
  private readonly log: (line: string) => void;
  private readonly observe: ResponseObserver | undefined;
  constructor(res: UwsResponse, method: string, path: string, maxBodyBytes: number, log: (line: string) => void, observe: ResponseObserver | undefined) {
    this.res = res;
    this.method = method;
    this.path = path;
    this.log = log;
    this.observe = observe;
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
      this.log(`http: ${this.label}: invalid response: ${describeError(err)}`);
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
        this.log(`http: ${this.label}: invalid HttpError: ${describeError(e)}`);
        prepared = errorBody(500, 'internal error');
      }
      this.respond(prepared);
      return;
    }
    this.log(`http: ${this.label} failed: ${describeError(err)}`);
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
