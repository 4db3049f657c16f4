/**
 * Bounded connections and bodies, against the real gateway (a spawned process, stock on, default limits but a short
 * idle timeout):
 * - one client address opens far more sockets than its cap and sends nothing: the excess is closed at once, the
 *   rest once idle, another address is answered throughout, and the process keeps its descriptors (/proc/<pid>/fd);
 * - 120 unpaid 14 MB POSTs to non-upload routes are refused 413 before their bodies are read, and the gateway's RSS
 *   (/proc/<pid>/status VmRSS) is back within 10% after them; registration still takes a body past that limit.
 */
import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { CAIP2 } from '../../src/chain/canonical.ts';
import { network, testDevnet, TEST_MANIFEST_PATH } from '../helpers/devnet.ts';
import { spawnFacilitator } from '../helpers/spawn-facilitator.ts';
import { rawRequest } from '../helpers/raw-http.ts';
import { gassedKey } from '../helpers/stock.ts';

const stock = network(testDevnet(), CAIP2.stockChain);
const IDLE_MS = 2000;
const PER_CLIENT = 512; // the default
const deskKey = await gassedKey(stock);
const gw = await spawnFacilitator({
  manifestPath: TEST_MANIFEST_PATH,
  part: 'gateway',
  env: { GATE402_STOCK_ENABLED: 'true', GATE402_STOCK_DESK_KEY: deskKey, GATE402_RELAYER_KEYS: await gassedKey(stock), GATE402_CONNECTION_IDLE_MS: String(IDLE_MS) },
});
t.teardown(() => gw.stop());
const pid = gw.child.pid as number;
const { port } = new URL(gw.url);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const descriptors = () => readdirSync(`/proc/${pid}/fd`).length;
const rssBytes = () => Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) * 1024;

/** An answer to a GET from another loopback address (Linux routes all of 127/8 to lo). */
function getFrom(localAddress: string, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port: Number(port), localAddress });
    let head = '';
    s.setTimeout(20_000, () => s.destroy(new Error(`no answer to ${path} from ${localAddress}`)));
    s.on('connect', () => s.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`));
    s.on('data', (d) => {
      head += d.toString('latin1');
      const m = /^HTTP\/1\.1 (\d{3})/.exec(head);
      if (m) {
        resolve(Number(m[1]));
        s.destroy();
      }
    });
    s.on('error', reject);
  });
}

t.test('one address with many idle sockets: excess closed at once, idle ones after the timeout, others served', async (t) => {
  const fdBefore = descriptors();
  const total = PER_CLIENT * 3;
  // (Sockets still in the kernel's accept queue are admitted as earlier ones close: so lifetimes vary, the cap does not.)
  const sockets: { s: Socket; opened: number; closed?: number }[] = [];
  // In batches: the listen backlog is finite, and the point is the server's answer, not the kernel's queue.
  for (let i = 0; i < total; i += 128) {
    await Promise.all(
      Array.from({ length: Math.min(128, total - i) }, () => {
        const s = connect({ host: '127.0.0.1', port: Number(port), localAddress: '127.0.0.3' });
        const entry: { s: Socket; opened: number; closed?: number } = { s, opened: 0 };
        sockets.push(entry);
        s.on('error', () => {});
        s.on('close', () => {
          entry.closed = performance.now();
        });
        return new Promise<void>((r) =>
          s.on('connect', () => {
            entry.opened = performance.now();
            r();
          }),
        );
      }),
    );
  }
  const allOpened = performance.now();
  // Meanwhile another address is answered.
  t.equal(await getFrom('127.0.0.2', '/health'), 200, 'another address is served while the first holds its cap');
  t.equal(await getFrom('127.0.0.2', '/m/catjoke/joke'), 402, 'an unpaid request from another address gets its 402');
  // The excess is closed at once: well before the idle timeout, at most the cap is still open.
  await sleep(IDLE_MS / 4);
  const openEarly = sockets.filter((x) => x.closed === undefined).length;
  t.ok(openEarly <= PER_CLIENT, `at most the cap of ${PER_CLIENT} still open before the idle timeout (${openEarly} of ${total})`);
  const fdDuring = descriptors();
  t.ok(fdDuring - fdBefore <= PER_CLIENT + 64, `the gateway holds ${fdDuring - fdBefore} more descriptors, about the cap, not ${total}`);
  // The idle ones go after the idle timeout (uWS's own would take about 10 s).
  const deadline = allOpened + IDLE_MS + 6000;
  while (sockets.some((x) => x.closed === undefined) && performance.now() < deadline) await sleep(100);
  const stillOpen = sockets.filter((x) => x.closed === undefined).length;
  t.equal(stillOpen, 0, `every idle socket closed within ${IDLE_MS + 6000} ms of opening (${stillOpen} open)`);
  for (const x of sockets) x.s.destroy();
  await sleep(500);
  t.ok(descriptors() - fdBefore <= 16, `descriptors back (${fdBefore} before, ${descriptors()} after)`);
  // The address is served again once its sockets are gone.
  t.equal(await getFrom('127.0.0.3', '/health'), 200, 'the flooding address itself is served once its sockets are closed');
});

/**
 * A POST of `size` bytes to `path`, declared or chunked. Resolves to the status the gateway answered (undefined if
 * the connection was reset before the answer could be read: the server closes on a 413 with the body unread) and how
 * many body bytes the socket took before the gateway closed it.
 */
function bigPost(path: string, size: number, chunked: boolean): Promise<{ status: number | undefined; written: number }> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port: Number(port) });
    const head = chunked
      ? `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`
      : `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${size}\r\n\r\n`;
    let answer = '';
    let status: number | undefined;
    let written = 0;
    s.setTimeout(60_000, () => s.destroy());
    s.on('error', () => {}); // the server closes while we still write: EPIPE / ECONNRESET are expected
    s.on('data', (d) => {
      answer += d.toString('latin1');
      status ??= Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]) || undefined;
    });
    s.on('close', () => resolve({ status, written }));
    s.on('connect', async () => {
      s.write(head);
      const piece = Buffer.alloc(256 * 1024, 0x61);
      const framed = chunked ? Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')]) : piece;
      while (written < size && !s.destroyed && status === undefined) {
        const ok = s.write(framed);
        written += piece.length;
        if (!ok) {
          await new Promise((r) => {
            s.once('drain', r);
            s.once('close', r);
          });
        }
      }
      if (!s.destroyed) s.end(chunked ? '0\r\n\r\n' : '');
    });
  });
}

t.test('120 unpaid 14 MB POSTs are refused before buffering; RSS comes back; registration keeps its limit', async (t) => {
  const size = 14 * 1024 * 1024;
  // Warm up so that the baseline is a running gateway's.
  for (let i = 0; i < 4; i++) await bigPost('/api/stock/buy?symbol=TSLA&stable_amount=1', 64 * 1024, false);
  await sleep(1000);
  const before = rssBytes();
  let peak = before;
  const sampling = setInterval(() => (peak = Math.max(peak, rssBytes())), 50);
  const answers: { status: number | undefined; written: number }[] = [];
  const targets = ['/api/stock/buy?symbol=TSLA&stable_amount=1', '/api/stock/sponsor'];
  for (let round = 0; round < 15; round++) {
    answers.push(...(await Promise.all(Array.from({ length: 8 }, (_, i) => bigPost(targets[i % 2] as string, size, i % 4 >= 2)))));
  }
  clearInterval(sampling);
  t.equal(answers.length, 120);
  // A declared length over the limit is a 413 before anything is read; a chunked body is cut off where it crosses
  // the limit (a 413, or the answer its handler had already chosen, sent with the connection's close).
  const declared = answers.filter((_, i) => i % 4 < 2);
  t.ok(
    declared.every((a) => a.status === 413 || a.status === undefined) && declared.some((a) => a.status === 413),
    `each declared 14 MB body answered 413 (or reset with its 413 unread): ${[...new Set(declared.map((a) => a.status ?? 'reset'))].join(', ')}`,
  );
  const streamed = answers.filter((_, i) => i % 4 >= 2);
  t.ok(
    streamed.every((a) => a.status === undefined || (a.status >= 400 && a.status < 500)),
    `each chunked one refused: ${[...new Set(streamed.map((a) => a.status ?? 'reset'))].join(', ')}`,
  );
  const mostTaken = Math.max(...answers.map((a) => a.written));
  t.ok(mostTaken < size, `no body was read to its end: at most ${mostTaken} of ${size} bytes went into a socket (kernel buffers included)`);
  await sleep(2000);
  const after = rssBytes();
  const mib = (b: number) => (b / 1048576).toFixed(0);
  t.ok(after <= before * 1.1, `RSS back within 10%: ${mib(before)} MiB before, peak ${mib(peak)}, ${mib(after)} after`);
  t.ok(peak - before < 64 * 1024 * 1024, `the flood never took 64 MiB more (peak ${mib(peak)} MiB against ${mib(before)})`);

  const json413 = await rawRequest(gw.url, 'POST', '/api/stock/sponsor', { headers: { 'content-type': 'application/json' }, contentLength: size, body: Buffer.alloc(0), timeoutMs: 20_000 });
  t.equal(json413.status, 413);
  t.match(JSON.parse(json413.body), { error: /request body larger than 16384 bytes/ }, 'a clear JSON 413 naming the limit');

  // Registration takes uploads: a 1 MiB body is read and judged (not a 413).
  const upload = await rawRequest(gw.url, 'POST', '/api/merchants', { headers: { 'content-type': 'application/json' }, body: Buffer.alloc(1024 * 1024, 0x20), timeoutMs: 30_000 });
  t.not(upload.status, 413, `a 1 MiB registration is read, not refused for its size (${upload.status})`);
  t.ok(upload.status >= 400 && upload.status < 500, `and answered as the client's mistake it is (${upload.status} ${upload.body.slice(0, 80)})`);
});
