import { connect } from 'node:net';

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
