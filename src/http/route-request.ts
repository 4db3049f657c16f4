/**
 * The request a handler sees, read out of uWS inside the route callback (the uWS request object is only valid
 * there): headers joined per name, the client address copied out on first use.
 */
import type { HttpRequest as UwsRequest, HttpResponse as UwsResponse } from 'uWebSockets.js';
import type { Exchange } from './exchange.ts';
import { formatBinaryAddress } from './ip.ts';
import { StringRecord } from './router.ts';
import type { HttpRequest } from './server.ts';
import { clientIp, type TrustProxy } from './trust-proxy.ts';

export function readHeaders(req: UwsRequest): Record<string, string> {
  const headers = new StringRecord();
  req.forEach((key, value) => {
    const k = key.toLowerCase();
    const prev = headers[k];
    headers[k] = prev === undefined ? value : `${prev}${k === 'cookie' ? '; ' : ', '}${value}`;
  });
  return headers;
}

/**
 * What a handler sees. The client address costs a copy out of uWS, so it is read on first use (the rate-limited
 * routes), or by {@link keepPeer} before the route callback returns when the handler goes on asynchronously.
 */
export class RouteRequest implements HttpRequest {
  #remoteIp: string | undefined;
  #peer: ArrayBuffer | undefined;
  #peerText: ArrayBuffer | undefined;
  #peerIp: string | undefined;
  readonly method: string;
  readonly path: string;
  readonly query: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly params: Readonly<Record<string, string>>;
  private readonly exchange: Exchange;
  private readonly res: UwsResponse;
  private readonly trustProxy: TrustProxy;
  constructor(
    method: string,
    path: string,
    query: string,
    headers: Readonly<Record<string, string>>,
    params: Readonly<Record<string, string>>,
    exchange: Exchange,
    res: UwsResponse,
    trustProxy: TrustProxy,
  ) {
    this.method = method;
    this.path = path;
    this.query = query;
    this.headers = headers;
    this.params = params;
    this.exchange = exchange;
    this.res = res;
    this.trustProxy = trustProxy;
  }

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
