import { connect } from 'node:net';

/*
 * Raw HTTP/1.1 over a TCP socket, for what fetch would normalise or refuse to send: `rawRequest` builds the request
 * from parts (paid-path tests), `rawExchange` writes bytes as given (framing and header fuzzing).
 */

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** The whole answer as received (for messages). */
  raw: string;
}

/**
 * One HTTP/1.1 request built from parts and written byte for byte on a fresh socket (`fetch` would normalise `..`,
 * `%2e` and `\` before sending), answered as {@link rawExchange} reads an answer (a HEAD answer: up to its headers).
 * `target` goes on the request line as it is. A `body` may be partial: the request then announces `contentLength` and
 * sends only what is given, and the answer is read anyway.
 */
export async function rawRequest(
  origin: string,
  method: string,
  target: string,
  opts: { headers?: Record<string, string>; body?: Buffer; contentLength?: number; timeoutMs?: number } = {},
): Promise<RawResponse> {
  const { hostname, port } = new URL(origin);
  const body = opts.body ?? Buffer.alloc(0);
  const length = opts.contentLength ?? body.length;
  const lines = [`${method} ${target} HTTP/1.1`, `Host: ${hostname}:${port}`, 'Connection: close'];
  for (const [k, v] of Object.entries(opts.headers ?? {})) lines.push(`${k}: ${v}`);
  if (length > 0 || method === 'POST') lines.push(`Content-Length: ${length}`);
  const head = Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1');
  const answer = await rawExchange(hostname, Number(port), Buffer.concat([head, body]), { timeoutMs: opts.timeoutMs ?? 60_000, bodyless: method === 'HEAD' });
  if (answer.timedOut) throw new Error(`no complete answer to ${method} ${JSON.stringify(target)} in time`);
  return parseResponse(answer.status === undefined ? Buffer.from(answer.head, 'latin1') : Buffer.concat([Buffer.from(`${answer.head}\r\n\r\n`, 'latin1'), answer.body]));
}

export function parseResponse(bytes: Buffer): RawResponse {
  const raw = bytes.toString('latin1');
  const end = raw.indexOf('\r\n\r\n');
  const head = end < 0 ? raw : raw.slice(0, end);
  const [statusLine, ...headerLines] = head.split('\r\n');
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine ?? '')?.[1] ?? 0);
  const headers: Record<string, string> = {};
  for (const line of headerLines) {
    const cut = line.indexOf(':');
    if (cut > 0) headers[line.slice(0, cut).trim().toLowerCase()] = line.slice(cut + 1).trim();
  }
  let body = end < 0 ? '' : bytes.subarray(Buffer.byteLength(raw.slice(0, end + 4), 'latin1')).toString('utf8');
  if (headers['transfer-encoding'] === 'chunked') body = dechunk(body);
  return { status, headers, body, raw };
}

function dechunk(text: string): string {
  let out = '';
  let rest = text;
  for (;;) {
    const cut = rest.indexOf('\r\n');
    if (cut < 0) return out;
    const size = parseInt(rest.slice(0, cut), 16);
    if (!Number.isFinite(size) || size === 0) return out;
    out += rest.slice(cut + 2, cut + 2 + size);
    rest = rest.slice(cut + 2 + size + 2);
  }
}

/** What came back for bytes written on a fresh TCP connection. */
export interface RawAnswer {
  /** The status of the (final, non-1xx) response; undefined when the server closed or reset without one. */
  status?: number;
  /** The response head, as sent (latin1). */
  head: string;
  body: Buffer;
  /** No answer within the time limit. */
  timedOut: boolean;
  /** A socket error (e.g. ECONNRESET), if any. */
  error?: string;
}

/**
 * Writes `request` on a new connection to host:port and reads one HTTP/1.1 response (Content-Length, chunked or
 * until close); for things fetch cannot send (raw bytes in the path, bad framing, broken headers). `bodyless`: the
 * request was HEAD (its answer has no body). The connection is closed once the response is complete.
 */
export function rawExchange(host: string, port: number, request: Buffer, opts: { timeoutMs: number; bodyless?: boolean }): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const sock = connect({ host, port });
    let buf = Buffer.alloc(0);
    let answer: RawAnswer | undefined;
    let error: string | undefined;
    let settled = false;
    const finish = (timedOut: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.destroy();
      resolve(answer ?? { head: buf.toString('latin1'), body: Buffer.alloc(0), timedOut, ...(error ? { error } : {}) });
    };
    const timer = setTimeout(() => finish(true), opts.timeoutMs);
    const parse = () => {
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buf.subarray(0, end).toString('latin1');
        const m = /^HTTP\/1\.[01] (\d{3})/.exec(head);
        if (!m) {
          answer = { head, body: Buffer.alloc(0), timedOut: false, error: 'not an HTTP response' };
          return finish(false);
        }
        const status = Number(m[1]);
        const rest = buf.subarray(end + 4);
        if (status >= 100 && status < 200) {
          buf = rest; // an interim answer (100 Continue): the final one follows
          continue;
        }
        const length = /\r\ncontent-length:\s*(\d+)/i.exec(head);
        const chunked = /\r\ntransfer-encoding:[^\r]*chunked/i.test(head);
        if (opts.bodyless || status === 204 || status === 304) {
          answer = { status, head, body: Buffer.alloc(0), timedOut: false };
          return finish(false);
        }
        if (length) {
          const n = Number(length[1]);
          answer = { status, head, body: rest.subarray(0, n), timedOut: false };
          if (rest.length >= n) return finish(false);
          return;
        }
        answer = { status, head, body: rest, timedOut: false };
        if (chunked && rest.includes('0\r\n\r\n')) return finish(false);
        return; // read until the server closes
      }
    };
    sock.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      parse();
    });
    sock.on('error', (err: NodeJS.ErrnoException) => {
      error = err.code ?? err.message;
    });
    sock.on('close', () => finish(false));
    sock.on('connect', () => sock.write(request));
  });
}

/** Whether something accepts TCP connections on `port` of 127.0.0.1 (a refused start must bind nothing). */
export function listening(port: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
