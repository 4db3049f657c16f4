/**
 * A flood of HTTP/1.1 requests over a few keep-alive sockets, pipelined in batches: hundreds of thousands of
 * requests in seconds, as an attacker would send them. Answers are read and counted by status.
 */
import { connect, type Socket } from 'node:net';

export interface FloodOptions {
  host: string;
  port: number;
  /** The raw request `i` (bytes on the wire: request line, headers, blank line, body). */
  request(i: number): string;
  total: number;
  sockets?: number;
  /** Requests written at once per socket before waiting for their answers. */
  batch?: number;
}

/** Counts of answers by status code. Rejects if a socket closes early or an answer cannot be parsed. */
export async function flood(opts: FloodOptions): Promise<Map<number, number>> {
  const statuses = new Map<number, number>();
  const sockets = opts.sockets ?? 8;
  const batch = opts.batch ?? 64;
  let next = 0;
  const worker = async (): Promise<void> => {
    const socket = await open(opts.host, opts.port);
    const reader = answers(socket);
    try {
      while (next < opts.total) {
        const start = next;
        const end = Math.min(opts.total, start + batch);
        next = end;
        let wire = '';
        for (let i = start; i < end; i++) wire += opts.request(i);
        socket.write(wire);
        for (let i = start; i < end; i++) {
          const status = await reader.next();
          statuses.set(status, (statuses.get(status) ?? 0) + 1);
        }
      }
    } finally {
      socket.destroy();
    }
  };
  await Promise.all(Array.from({ length: sockets }, worker));
  return statuses;
}

function open(host: string, port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect({ host, port }, () => resolve(s));
    s.once('error', reject);
  });
}

/** Reads answers off a socket one at a time (status line, headers, `content-length` bytes of body). */
function answers(socket: Socket): { next(): Promise<number> } {
  let buffer: Buffer = Buffer.alloc(0);
  let waiting: (() => void) | undefined;
  let failure: Error | undefined;
  socket.on('data', (chunk: Buffer) => {
    buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
    waiting?.();
  });
  const fail = (e: Error) => {
    failure ??= e;
    waiting?.();
  };
  socket.on('error', fail);
  socket.on('close', () => fail(new Error('the server closed the connection')));
  return {
    async next() {
      for (;;) {
        const end = buffer.indexOf('\r\n\r\n');
        if (end >= 0) {
          const head = buffer.subarray(0, end).toString('latin1');
          const status = /^HTTP\/1\.1 (\d{3})/.exec(head);
          if (!status) throw new Error(`not an HTTP answer: ${JSON.stringify(head.slice(0, 80))}`);
          const length = /\r\ncontent-length: *(\d+)/i.exec(head);
          const size = end + 4 + Number(length?.[1] ?? 0);
          if (buffer.length >= size) {
            buffer = buffer.subarray(size);
            return Number(status[1]);
          }
        }
        if (failure) throw failure;
        await new Promise<void>((r) => (waiting = r));
        waiting = undefined;
      }
    },
  };
}
