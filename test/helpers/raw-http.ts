import { connect } from 'node:net';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** The whole answer as received (for messages). */
  raw: string;
}

/**
 * One HTTP/1.1 request written byte for byte on a fresh socket (`fetch` would normalise `..`, `%2e` and `\` before
 * sending), read until the server closes (a HEAD answer: until its headers end). `target` goes on the request line as it is. A `body` may be partial: the
 * request then announces `contentLength` and sends only what is given, and the answer is read anyway.
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
  return new Promise<RawResponse>((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no complete answer to ${method} ${JSON.stringify(target)} in time`));
    }, opts.timeoutMs ?? 60_000);
    socket.on('connect', () => {
      socket.write(head);
      if (body.length > 0) socket.write(body);
    });
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      // A HEAD answer ends with its headers (its Content-Length announces a body that never comes).
      if (method === 'HEAD' && Buffer.concat(chunks).includes('\r\n\r\n')) socket.destroy();
    });
    socket.on('error', () => {}); // EPIPE/ECONNRESET when the server answers early and closes: the answer counts
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(parseResponse(Buffer.concat(chunks)));
    });
  });
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
