/**
 * Bounded connections: how many sockets one client address may hold open, how many the whole process may, and how
 * long a connection may stay open without sending a request.
 *
 * uWS tells of every HTTP connection through `app.filter((res, count) => ...)`: `count` 1 when it opens (the peer
 * address is readable then), -1 when it closes. Three facts of uWS.js shape what follows, each checked against
 * `uws-pack` 20.0.8:
 * - every callback gets a new `res` object for the same socket, so a connection cannot be recognised by its object;
 * - at the close the descriptor is already closed: `getRemoteAddress()` on the closing connection reads as empty,
 *   while every connection still open reads its address (its memory is freed only after that loop iteration);
 * - `res.close()` runs the close callback before it returns.
 * So a close is matched to its connection by the one open connection whose address now reads empty (a scan over the
 * open connections: one `getpeername` each, which the per-client and total caps bound), or directly when this guard
 * closed it. A connection refused at its opening is closed at once and never counted.
 *
 * The cap is per client address (an IPv6 client per /64, as the rate limits count it). Behind trusted proxies
 * (`GATE402_TRUST_PROXY`), a connection from a proxy carries many clients: the per-client cap does not apply to it,
 * only the total does (the proxy in front enforces its own).
 *
 * Idle: a connection that has sent no request `idleTimeoutMs` after it opened is closed (uWS's own timeout, about
 * 10 s, closes the rest). A request is seen by an `onData` set on the connection when it opens (uWS calls it after a
 * body-less request's handler), by a response already written on it, or, for a request whose handler still runs, by
 * a request in flight from that address (then the connection is looked at again one timeout later, not closed).
 */
import type { HttpResponse as UwsResponse, TemplatedApp } from 'uWebSockets.js';
import { formatBinaryAddress, ipRateLimitKey, parseIp, unmapIp, cidrContains } from './ip.ts';
import type { TrustProxy } from './trust-proxy.ts';

export interface ConnectionLimits {
  /** Open connections one client address may hold; 0: no per-client cap. */
  maxPerClient: number;
  /** Open connections of the whole process (every server in it together); 0: no total cap. */
  maxTotal: number;
  /** A connection that sent no request this long after it opened is closed; 0: only uWS's own (about 10 s). */
  idleTimeoutMs: number;
}

export interface ConnectionStats {
  open: number;
  /** Connections closed at their opening: their client (or the process) was at its cap. */
  refused: number;
  /** Connections closed for sending nothing within the idle timeout. */
  idleClosed: number;
  /** Closes that could not be matched to a connection (should stay 0). */
  unmatched: number;
}

interface Connection {
  readonly key: string;
  readonly res: UwsResponse;
  timer: NodeJS.Timeout | undefined;
  /** A request was seen on it. */
  active: boolean;
}

/** Every guarded server of the process together: the total cap is about the process's descriptors. */
let processOpen = 0;

export class ConnectionGuard {
  readonly #limits: ConnectionLimits;
  readonly #exempt: (peer: string) => boolean;
  readonly #open = new Set<Connection>();
  readonly #byKey = new Map<string, number>();
  readonly #inflight = new Map<string, number>();
  /** Set while this guard closes a connection itself: the close callback that runs inside `res.close()` is about it. */
  #closing: Connection | 'refused' | undefined;
  #stopped = false;
  /** Connections whose idle timer runs. */
  #watching = 0;
  readonly stats: ConnectionStats = { open: 0, refused: 0, idleClosed: 0, unmatched: 0 };

  constructor(limits: ConnectionLimits, trustProxy: TrustProxy = false) {
    for (const [name, v] of Object.entries(limits)) if (!Number.isSafeInteger(v) || v < 0) throw new RangeError(`connection limit ${name} must be a non-negative integer, got ${v}`);
    this.#limits = { ...limits };
    this.#exempt = trustedPeer(trustProxy);
  }

  /** Hooks the guard into `app`. */
  attach(app: TemplatedApp): void {
    const onConnection = (res: UwsResponse, count: number): void => {
      if (count > 0) this.#opened(res);
      else this.#closed();
    };
    app.filter(onConnection);
  }

  /** The client key of a peer address (as `formatBinaryAddress` gives it). */
  static key(peer: string): string {
    return ipRateLimitKey(peer);
  }

  /**
   * Whether a connection's idle check is pending: only then do requests in flight need counting (a request started
   * while none is pending cannot be a pending connection's first).
   */
  get watching(): boolean {
    return this.#watching > 0;
  }

  /** A request from `key` whose answer is not written yet (see the idle rule). */
  requestStarted(key: string): void {
    this.#inflight.set(key, (this.#inflight.get(key) ?? 0) + 1);
  }

  requestEnded(key: string): void {
    const n = (this.#inflight.get(key) ?? 1) - 1;
    if (n <= 0) this.#inflight.delete(key);
    else this.#inflight.set(key, n);
  }

  /** Open connections of `key` (tests, metrics). */
  openFrom(key: string): number {
    return this.#byKey.get(key) ?? 0;
  }

  /** Before the app closes every socket: nothing is tracked any more (no scan per close). */
  stop(): void {
    this.#stopped = true;
    for (const c of this.#open) this.#forget(c);
  }

  #opened(res: UwsResponse): void {
    if (this.#stopped) return;
    const bin = res.getRemoteAddress();
    const peer = formatBinaryAddress(bin, bin.byteLength === 4 || bin.byteLength === 16 ? undefined : res.getRemoteAddressAsText());
    const key = ConnectionGuard.key(peer);
    const { maxPerClient, maxTotal, idleTimeoutMs } = this.#limits;
    const overTotal = maxTotal > 0 && processOpen >= maxTotal;
    const overClient = maxPerClient > 0 && (this.#byKey.get(key) ?? 0) >= maxPerClient && !this.#exempt(peer);
    if (overTotal || overClient) {
      this.stats.refused++;
      this.#closing = 'refused';
      try {
        res.close();
      } finally {
        this.#closing = undefined;
      }
      return;
    }
    const c: Connection = { key, res, timer: undefined, active: false };
    this.#open.add(c);
    this.#byKey.set(key, (this.#byKey.get(key) ?? 0) + 1);
    processOpen++;
    this.stats.open++;
    if (idleTimeoutMs > 0) {
      // uWS calls this after the handler of a request without a body (a handler that reads a body sets its own).
      res.onData(() => {
        c.active = true;
      });
      c.timer = setTimeout(() => this.#idleCheck(c), idleTimeoutMs);
      c.timer.unref();
      this.#watching++;
    }
  }

  #closed(): void {
    const closing = this.#closing;
    if (closing === 'refused') return; // never counted
    if (closing !== undefined) {
      this.#forget(closing);
      return;
    }
    if (this.#stopped) return;
    for (const c of this.#open) {
      if (c.res.getRemoteAddress().byteLength === 0) {
        this.#forget(c);
        return;
      }
    }
    this.stats.unmatched++;
  }

  #forget(c: Connection): void {
    if (!this.#open.delete(c)) return;
    if (c.timer !== undefined) {
      clearTimeout(c.timer);
      this.#watching--;
    }
    c.timer = undefined;
    const n = (this.#byKey.get(c.key) ?? 1) - 1;
    if (n <= 0) this.#byKey.delete(c.key);
    else this.#byKey.set(c.key, n);
    processOpen--;
    this.stats.open--;
  }

  #idleCheck(c: Connection): void {
    c.timer = undefined;
    this.#watching--;
    if (!this.#open.has(c) || c.active) return;
    if (c.res.getWriteOffset() > 0) return; // it was answered: a request came
    if ((this.#inflight.get(c.key) ?? 0) > 0) {
      // Perhaps its request is the one still running: look again later rather than cut a request off.
      c.timer = setTimeout(() => this.#idleCheck(c), this.#limits.idleTimeoutMs);
      c.timer.unref();
      this.#watching++;
      return;
    }
    this.stats.idleClosed++;
    this.#closing = c;
    try {
      c.res.close();
    } finally {
      this.#closing = undefined;
    }
    this.#forget(c); // in case uWS did not call back
  }
}

/** Peers whose connections carry other clients' requests (trusted proxies): the per-client cap does not apply. */
function trustedPeer(trust: TrustProxy): (peer: string) => boolean {
  if (trust === false) return () => false;
  if ('hops' in trust) return () => trust.hops > 0;
  return (peer) => {
    const ip = parseIp(peer);
    if (!ip) return false;
    const plain = unmapIp(ip);
    return trust.cidrs.some((c) => cidrContains(c, plain) || cidrContains(c, ip));
  };
}
