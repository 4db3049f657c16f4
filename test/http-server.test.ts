/**
 * The facilitator's HTTP layer on real sockets (uWS + fetch / node:net).
 *
 * This tests the HTTP layer only: the FacilitatorService below is a small in-test stand-in that records
 * what it was called with; it does not decode or judge payments (that is the engine's job, tested elsewhere).
 */
import { freePort } from './helpers/devnet.ts';
import { rawExchange } from './helpers/raw-http.ts';
import t from 'tap';
import net from 'node:net';
import { startFacilitatorHttp, type FacilitatorHttpOptions } from '../src/facilitator/http-app.ts';
import type { FacilitatorService, ServiceAnswer } from '../src/facilitator/service.ts';
import { createHttpServer, HttpError, json } from '../src/http/server.ts';

const SUPPORTED = {
  kinds: [{ x402Version: 2, scheme: 'exact', network: 'eip155:84532' }],
  extensions: [],
  signers: { 'eip155:*': ['0x1111111111111111111111111111111111111111'] },
};

interface Recorder extends FacilitatorService {
  calls: { route: 'verify' | 'settle'; body: Uint8Array }[];
}

function recordingService(overrides: Partial<FacilitatorService> = {}): Recorder {
  const calls: Recorder['calls'] = [];
  return {
    calls,
    supported: () => SUPPORTED,
    verify: async (body): Promise<ServiceAnswer> => {
      calls.push({ route: 'verify', body });
      return { status: 200, body: { isValid: true, payer: '0x2222222222222222222222222222222222222222' } };
    },
    settle: async (body): Promise<ServiceAnswer> => {
      calls.push({ route: 'settle', body });
      return { status: 400, body: { error: 'malformed body' } };
    },
    health: async () => ({ ok: true, details: { relayers: 2 } }),
    ...overrides,
  };
}

async function start(t: { teardown(fn: () => unknown): void }, service: FacilitatorService, opts: Partial<FacilitatorHttpOptions> = {}) {
  const logs: string[] = [];
  const app = await startFacilitatorHttp(service, {
    host: '127.0.0.1',
    port: 0,
    maxBodyBytes: 1024,
    rateLimit: { capacity: 1000, refillPerSecond: 1000 },
    log: (l) => logs.push(l),
    ...opts,
  });
  t.teardown(() => app.close());
  return { base: `http://127.0.0.1:${app.port}`, port: app.port, logs, app };
}

const JSON_HEADERS = { 'content-type': 'application/json' };

function streamOf(total: number, chunk = 256): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream({
    pull(c) {
      if (sent >= total) return c.close();
      const n = Math.min(chunk, total - sent);
      const bytes = new Uint8Array(n).map((_, i) => (sent + i) % 251);
      sent += n;
      c.enqueue(bytes);
    },
  });
}

/** One raw HTTP/1.1 exchange over a fresh socket; resolves with the whole first response (head and body), as sent. */
async function raw(port: number, request: string | Buffer): Promise<string> {
  const a = await rawExchange('127.0.0.1', port, typeof request === 'string' ? Buffer.from(request, 'latin1') : request, { timeoutMs: 30_000 });
  return `${a.head}\r\n\r\n${a.body.toString('latin1')}`;
}

/** Polls `ready` until it holds (a busy machine is slow, not wrong); fails the wait after a generous limit. */
async function until(ready: () => boolean, what: string, limitMs = 30_000): Promise<void> {
  const started = Date.now();
  while (!ready()) {
    if (Date.now() - started > limitMs) throw new Error(`still waiting for ${what} after ${limitMs} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

t.test('GET /supported answers the service JSON', async (t) => {
  const { base } = await start(t, recordingService());
  const r = await fetch(`${base}/supported`);
  t.equal(r.status, 200);
  t.equal(r.headers.get('content-type'), 'application/json; charset=utf-8');
  t.same(await r.json(), SUPPORTED);
  const h = await fetch(`${base}/supported`, { method: 'HEAD' });
  t.equal(h.status, 200, 'HEAD works on GET routes');
  t.equal(h.headers.get('content-length'), String(JSON.stringify(SUPPORTED).length));
  t.equal(await h.text(), '');
});

t.test('verify and settle receive the exact body bytes; status and body pass through', async (t) => {
  const svc = recordingService();
  const { base } = await start(t, svc);
  const bytes = new Uint8Array([0x7b, 0x22, 0xff, 0x00, 0xc3, 0x28, 0x0a, 0x7d]); // not even valid UTF-8: bytes are bytes
  const v = await fetch(`${base}/verify`, { method: 'POST', headers: JSON_HEADERS, body: bytes });
  t.equal(v.status, 200);
  t.equal(v.headers.get('cache-control'), 'no-store');
  t.same(await v.json(), { isValid: true, payer: '0x2222222222222222222222222222222222222222' });
  const s = await fetch(`${base}/settle`, { method: 'POST', headers: { 'content-type': 'Application/JSON; charset=UTF-8' }, body: '{"a":1}' });
  t.equal(s.status, 400, 'a service 400 is passed through');
  t.same(await s.json(), { error: 'malformed body' });
  t.same(
    svc.calls.map((c) => [c.route, Buffer.from(c.body).toString('hex')]),
    [
      ['verify', Buffer.from(bytes).toString('hex')],
      ['settle', Buffer.from('{"a":1}').toString('hex')],
    ],
  );

  // a chunked body assembled from many pieces, exactly at the limit
  svc.calls.length = 0;
  const c = await fetch(`${base}/verify`, { method: 'POST', headers: JSON_HEADERS, body: streamOf(1024, 100), duplex: 'half' } as RequestInit);
  t.equal(c.status, 200, 'a body of exactly maxBodyBytes is accepted');
  await c.arrayBuffer();
  const expected = new Uint8Array(1024).map((_, i) => i % 251);
  t.equal(svc.calls.length, 1);
  t.same(Buffer.from(svc.calls[0]!.body), Buffer.from(expected), 'chunks copied and joined in order');

  const e = await fetch(`${base}/verify`, { method: 'POST', headers: JSON_HEADERS });
  t.equal(e.status, 200, 'an empty body reaches the service (it decides it is malformed)');
  t.equal(svc.calls[1]?.body.length, 0);
});

t.test('413 for bodies over maxBodyBytes, with and without content-length', async (t) => {
  const svc = recordingService();
  const { base, port } = await start(t, svc);
  const big = await fetch(`${base}/verify`, { method: 'POST', headers: JSON_HEADERS, body: new Uint8Array(1025) });
  t.equal(big.status, 413, 'declared content-length over the limit');
  t.match(await big.json(), { error: String });
  const huge = await fetch(`${base}/settle`, { method: 'POST', headers: JSON_HEADERS, body: new Uint8Array(5_000_000) });
  t.equal(huge.status, 413, 'a 5 MB body is refused up front');
  await huge.arrayBuffer();
  const chunked = await fetch(`${base}/verify`, { method: 'POST', headers: JSON_HEADERS, body: streamOf(200_000, 4096), duplex: 'half' } as RequestInit);
  t.equal(chunked.status, 413, 'chunked body crossing the limit');
  t.match(await chunked.json(), { error: String });
  t.equal(svc.calls.length, 0, 'the service never saw an oversized body');

  // raw chunked request that keeps going: the 413 arrives while the client is still sending
  const s = net.connect(port, '127.0.0.1');
  let got = '';
  s.on('data', (d) => (got += d.toString()));
  s.on('error', () => {});
  s.write('POST /verify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
  s.write(`800\r\n${'a'.repeat(0x800)}\r\n`);
  await until(() => /\r\n\r\n/.test(got), 'the 413');
  t.match(got, /^HTTP\/1\.1 413 Payload Too Large\r\n/, 'answered before the body ended, with a proper reason phrase');
  t.match(got, /Connection: close/i, 'and the connection is closed rather than read on');
  s.destroy();

  const ok = await fetch(`${base}/verify`, { method: 'POST', headers: JSON_HEADERS, body: '{}' });
  t.equal(ok.status, 200, 'server fine afterwards');
  await ok.arrayBuffer();
});

t.test('415 without a JSON content type', async (t) => {
  const svc = recordingService();
  const { base } = await start(t, svc);
  for (const ct of ['text/plain', 'application/jsonx', 'multipart/form-data; boundary=application/json']) {
    const r = await fetch(`${base}/verify`, { method: 'POST', headers: { 'content-type': ct }, body: '{}' });
    t.equal(r.status, 415, ct);
    t.same(await r.json(), { error: 'content-type must be application/json' });
  }
  const none = await fetch(`${base}/settle`, { method: 'POST', body: new Uint8Array([1, 2]) });
  t.equal(none.status, 415, 'no content type');
  await none.arrayBuffer();
  t.equal(svc.calls.length, 0);
});

t.test('404 for unknown paths, 405 with Allow for known paths', async (t) => {
  const { base, port } = await start(t, recordingService());
  const nf = await fetch(`${base}/nope`);
  t.equal(nf.status, 404);
  t.same(await nf.json(), { error: 'not found' });
  t.equal((await fetch(`${base}/verify/`)).status, 404, 'no trailing-slash aliasing');
  const gv = await fetch(`${base}/verify`);
  t.equal(gv.status, 405);
  t.equal(gv.headers.get('allow'), 'POST');
  t.same(await gv.json(), { error: 'method not allowed' });
  const ps = await fetch(`${base}/supported`, { method: 'POST', headers: JSON_HEADERS, body: '{}' });
  t.equal(ps.status, 405);
  t.equal(ps.headers.get('allow'), 'GET, HEAD');
  await ps.arrayBuffer();
  const text = await raw(port, 'DELETE /settle HTTP/1.1\r\nHost: x\r\n\r\n');
  t.match(text, /^HTTP\/1\.1 405 Method Not Allowed\r\n/);
  t.match(text, /\r\nallow: POST\r\n/i);
});

t.test('GET /health: 200 when ok, 503 when not, details included', async (t) => {
  let ok = true;
  const { base } = await start(t, recordingService({ health: async () => ({ ok, details: { rpc: ok ? 'up' : 'down' } }) }));
  const up = await fetch(`${base}/health`);
  t.equal(up.status, 200);
  t.same(await up.json(), { ok: true, details: { rpc: 'up' } });
  ok = false;
  const down = await fetch(`${base}/health`);
  t.equal(down.status, 503);
  t.same(await down.json(), { ok: false, details: { rpc: 'down' } });
});

t.test('429 with Retry-After per client IP (via trustProxy + X-Forwarded-For)', async (t) => {
  const svc = recordingService();
  const now = 1_000_000; // frozen clock: no refill during the test
  const { base } = await start(t, svc, { trustProxy: true, rateLimit: { capacity: 3, refillPerSecond: 0.5 }, now: () => now });
  const post = (ip: string, path = '/verify') =>
    // The proxy appended `ip`; the client's own (spoofed, changing) entry on the left counts for nothing.
    fetch(`${base}${path}`, { method: 'POST', headers: { ...JSON_HEADERS, 'x-forwarded-for': `10.0.${Math.floor(Math.random() * 250)}.1, ${ip}` }, body: '{"x":1}' });
  for (let i = 0; i < 3; i++) {
    const r = await post('203.0.113.7', i === 1 ? '/settle' : '/verify');
    t.not(r.status, 429, `burst request ${i + 1}`);
    await r.arrayBuffer();
  }
  const limited = await post('203.0.113.7');
  t.equal(limited.status, 429);
  t.equal(limited.headers.get('retry-after'), '2', 'one token at 0.5/s: 2 whole seconds');
  t.same(await limited.json(), { error: 'rate limited' });
  const mapped = await post('::ffff:203.0.113.7');
  t.equal(mapped.status, 429, 'the IPv4-mapped spelling is the same client');
  await mapped.arrayBuffer();
  const other = await post('198.51.100.9');
  t.equal(other.status, 200, 'another IP is not limited');
  await other.arrayBuffer();
  t.equal(svc.calls.length, 4, 'limited requests never reached the service');
  const sup = await fetch(`${base}/supported`, { headers: { 'x-forwarded-for': '203.0.113.7' } });
  t.equal(sup.status, 200, '/supported is not rate limited');
  await sup.arrayBuffer();
});

t.test('without trustProxy, X-Forwarded-For is ignored: the socket address is the client', async (t) => {
  const { base } = await start(t, recordingService(), { rateLimit: { capacity: 2, refillPerSecond: 0.001 }, now: () => 0 });
  const statuses: number[] = [];
  for (const ip of ['1.1.1.1', '2.2.2.2', '3.3.3.3']) {
    const r = await fetch(`${base}/verify`, { method: 'POST', headers: { ...JSON_HEADERS, 'x-forwarded-for': ip }, body: '{}' });
    statuses.push(r.status);
    await r.arrayBuffer();
  }
  t.same(statuses, [200, 200, 429], 'all three count against 127.0.0.1');
});

t.test('a service that throws gives 500 JSON without a stack, and is logged', async (t) => {
  const { base, logs } = await start(
    t,
    recordingService({
      verify: async () => {
        throw new Error('engine exploded at secret/path.ts:12');
      },
      supported: () => {
        throw new TypeError('sync throw');
      },
    }),
  );
  const r = await fetch(`${base}/verify`, { method: 'POST', headers: JSON_HEADERS, body: '{}' });
  t.equal(r.status, 500);
  const text = await r.text();
  t.same(JSON.parse(text), { error: 'internal error' });
  t.notMatch(text, /exploded|\.ts|at /, 'no message or stack leaks');
  const s = await fetch(`${base}/supported`);
  t.equal(s.status, 500, 'a synchronous throw too');
  await s.arrayBuffer();
  t.equal(logs.length, 2);
  t.match(logs[0], /POST \/verify failed: Error: engine exploded/);
  t.match(logs[0], /\n\s+at /, 'the log has the stack');
});

t.test('clients that abort mid-body or mid-handler do not hurt the server', async (t) => {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let slowCalls = 0;
  const svc = recordingService({
    settle: async (body) => {
      slowCalls++;
      await gate;
      return { status: 200, body: { success: true, bytes: body.length } };
    },
  });
  const { base, port, logs } = await start(t, svc);

  // 1. headers promise 500 bytes, only 100 arrive, then the socket is destroyed
  for (let i = 0; i < 20; i++) {
    await new Promise<void>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => {
        s.write(`POST /verify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n${'{'.repeat(100)}`);
        setTimeout(() => {
          s.destroy();
          resolve();
        }, 10);
      });
      s.on('error', () => {});
    });
  }
  // 2. a complete request whose client leaves while the service is still working
  await new Promise<void>((resolve) => {
    const s = net.connect(port, '127.0.0.1', () => {
      s.write('POST /settle HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}');
      const wait = setInterval(() => {
        if (slowCalls === 1) {
          clearInterval(wait);
          s.destroy();
          resolve();
        }
      }, 5);
    });
    s.on('error', () => {});
  });
  await new Promise((r) => setTimeout(r, 50));
  release(); // the service answers after the client is gone: nothing may be written to the dead response
  await new Promise((r) => setTimeout(r, 50));

  t.equal(svc.calls.length, 0, 'truncated bodies never reached the service');
  t.same(logs, [], 'nothing was written to (or failed on) an aborted response');
  const r = await fetch(`${base}/verify`, { method: 'POST', headers: JSON_HEADERS, body: '{}' });
  t.equal(r.status, 200, 'later requests still work');
  await r.arrayBuffer();
  const r2 = await fetch(`${base}/settle`, { method: 'POST', headers: JSON_HEADERS, body: '{}' });
  t.same(await r2.json(), { success: true, bytes: 2 });
});

t.test('an early answer (429) to a request whose body is still arriving keeps the connection usable', async (t) => {
  const { port } = await start(t, recordingService(), { rateLimit: { capacity: 1, refillPerSecond: 0.001 }, now: () => 0 });
  const s = net.connect(port, '127.0.0.1');
  let got = '';
  s.on('data', (d) => (got += d.toString()));
  await new Promise((r) => s.once('connect', r));
  const req = (body: string) => `POST /verify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
  s.write(`${req('{}')}{}`);
  await new Promise((r) => setTimeout(r, 50));
  s.write(`${req('{"abc":1}')}{"ab`); // rate limited; the rest of the body comes later
  await new Promise((r) => setTimeout(r, 50));
  s.write('c":1}');
  await new Promise((r) => setTimeout(r, 50));
  s.write('GET /supported HTTP/1.1\r\nHost: x\r\n\r\n');
  await until(() => [...got.matchAll(/HTTP\/1\.1 (\d{3}) /g)].length >= 3 && got.indexOf('\r\n\r\n', got.lastIndexOf('HTTP/1.1 ')) > 0, 'three answers');
  s.destroy();
  const statuses = [...got.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => m[1]);
  t.same(statuses, ['200', '429', '200'], 'three answers on one connection, in order');
  t.match(got, /\r\nretry-after: \d+\r\n/i);
});

t.test('a held early answer is sent with Connection: close once the body crosses the limit', async (t) => {
  const { port } = await start(t, recordingService(), { rateLimit: { capacity: 1, refillPerSecond: 0.001 }, now: () => 0 });
  await raw(port, 'POST /verify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}');
  const s = net.connect(port, '127.0.0.1');
  let got = '';
  let closed = false;
  s.on('data', (d) => (got += d.toString()));
  s.on('error', () => {});
  s.on('close', () => (closed = true));
  s.write('POST /verify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
  for (let i = 0; i < 4; i++) {
    s.write(`200\r\n${'a'.repeat(0x200)}\r\n`); // 4 x 512 bytes > 1024
    await new Promise((r) => setTimeout(r, 20));
  }
  await until(() => closed, 'the server to close the connection');
  t.match(got, /^HTTP\/1\.1 429 Too Many Requests\r\n/, 'the decided answer, not a 413');
  t.match(got, /Connection: close/i);
  t.ok(closed, 'the server stopped reading the endless body');
  s.destroy();
});

t.test('createHttpServer: pattern routes, HttpError, 204, invalid responses, graceful close', async (t) => {
  const logs: string[] = [];
  const server = createHttpServer({ host: '127.0.0.1', port: 0, maxBodyBytes: 100, log: (l) => logs.push(l) });
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let slowStarted = false;
  server
    .route('GET', '/m/:slug/*', async (req) => json(200, { params: { ...req.params }, query: req.query }))
    .route('GET', '/pay', async () => {
      throw new HttpError(402, 'payment required', { 'www-authenticate': 'Payment id="x"' });
    })
    .route('DELETE', '/thing', async () => ({ status: 204 }))
    .route('GET', '/bad-header', async () => ({ status: 200, headers: { 'x-evil': 'a\r\nset-cookie: b' } }))
    .route('GET', '/bad-status', async () => ({ status: 99 }))
    .route('GET', '/slow', async () => {
      slowStarted = true;
      await gate;
      return { status: 200, body: 'done' };
    });
  t.throws(() => server.route('GET', '/pay', async () => ({ status: 200 })), /already registered/);
  const port = await server.listen();
  t.teardown(() => server.close(0));
  const base = `http://127.0.0.1:${port}`;

  const m = await fetch(`${base}/m/we%20ather/v1/forecast?days=3`);
  t.same(await m.json(), { params: { slug: 'we ather', '*': 'v1/forecast' }, query: 'days=3' });
  t.equal((await fetch(`${base}/m/%E0%A4%A/x`)).status, 400, 'bad percent-encoding in a parameter');
  const p = await fetch(`${base}/pay`);
  t.equal(p.status, 402);
  t.equal(p.headers.get('www-authenticate'), 'Payment id="x"');
  t.same(await p.json(), { error: 'payment required' });
  const d = await raw(port, 'DELETE /thing HTTP/1.1\r\nHost: x\r\n\r\n');
  t.match(d, /^HTTP\/1\.1 204 No Content\r\n/);
  t.notMatch(d, /content-length/i, 'no Content-Length on a 204');
  for (const path of ['/bad-header', '/bad-status']) {
    const r = await fetch(`${base}${path}`);
    t.equal(r.status, 500, path);
    t.notOk(r.headers.get('set-cookie'), 'no header injection');
    await r.arrayBuffer();
  }
  t.equal(logs.length, 2, 'invalid responses are logged');

  const slow = fetch(`${base}/slow`);
  await until(() => slowStarted, 'the slow request to be in its handler');
  const closing = server.close(5000);
  const connect = () =>
    new Promise<string>((resolve) => {
      const c = net.connect(port, '127.0.0.1');
      c.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
      c.on('connect', () => {
        c.destroy();
        resolve('connected');
      });
    });
  // close() shuts the listening socket before it returns: no pause is needed to see it gone.
  const refused = await connect();
  t.equal(refused, 'ECONNREFUSED', 'no new connections while closing');
  const pooled = await fetch(`${base}/m/a/b`); // fetch reuses an open keep-alive connection
  t.equal(pooled.status, 503, 'a new request on an open connection is refused with 503');
  t.equal(pooled.headers.get('connection'), 'close');
  await pooled.arrayBuffer();
  release();
  const r = await slow;
  t.equal(await r.text(), 'done', 'the in-flight request finished during close');
  await closing;
});

t.test('shared frozen headers plus per-response moreHeaders: both sent, both checked', async (t) => {
  const logs: string[] = [];
  const server = createHttpServer({ host: '127.0.0.1', port: 0, maxBodyBytes: 100, log: (l) => logs.push(l) });
  const shared = Object.freeze({ 'content-type': 'text/plain', 'x-shared': 'same' });
  let n = 0;
  server
    .route('GET', '/each', () => {
      n++;
      return { status: 402, headers: shared, moreHeaders: { 'x-own': `call-${n}` }, body: `body-${n}` };
    })
    .route('GET', '/bad-more', () => ({ status: 200, headers: shared, moreHeaders: { 'x-evil': 'a\r\nset-cookie: b' } }))
    .route('GET', '/reserved-more', () => ({ status: 200, moreHeaders: { 'content-length': '5' } }));
  const port = await server.listen();
  t.teardown(() => server.close(0));
  for (const i of [1, 2, 3]) {
    const r = await fetch(`http://127.0.0.1:${port}/each`);
    t.equal(r.status, 402);
    t.equal(r.headers.get('x-shared'), 'same');
    t.equal(r.headers.get('content-type'), 'text/plain');
    t.equal(r.headers.get('x-own'), `call-${i}`, "the per-response header is this response's");
    t.equal(await r.text(), `body-${i}`);
  }
  for (const path of ['/bad-more', '/reserved-more']) {
    const r = await fetch(`http://127.0.0.1:${port}${path}`);
    t.equal(r.status, 500, `${path}: moreHeaders are checked like headers`);
    t.notOk(r.headers.get('set-cookie'));
    await r.arrayBuffer();
  }
  t.equal(logs.length, 2);
});

t.test('300 concurrent requests are all answered', async (t) => {
  const svc = recordingService({
    verify: async (body) => {
      await new Promise((r) => setTimeout(r, Math.random() * 20));
      return { status: 200, body: { echo: Buffer.from(body).toString() } };
    },
  });
  const { base } = await start(t, svc);
  const results = await Promise.all(
    Array.from({ length: 300 }, async (_, i) => {
      if (i % 3 === 0) {
        const r = await fetch(`${base}/supported`);
        return r.status === 200 && ((await r.json()) as typeof SUPPORTED).kinds.length === 1;
      }
      const r = await fetch(`${base}/verify`, { method: 'POST', headers: JSON_HEADERS, body: `{"i":${i}}` });
      const j = (await r.json()) as { echo: string };
      return r.status === 200 && j.echo === `{"i":${i}}`;
    }),
  );
  t.equal(results.filter(Boolean).length, 300, 'every request got its own correct answer');
});

t.test('startFacilitatorHttp rejects when the port is taken', async (t) => {
  const { port } = await start(t, recordingService());
  await t.rejects(startFacilitatorHttp(recordingService(), { host: '127.0.0.1', port }), /cannot listen on 127\.0\.0\.1:\d+/);
});

t.test('a second server on a port in use is refused instead of sharing it', async (t) => {
  // A fixed port, as in production (8403): a kernel-chosen port 0 is never shared, so it would prove nothing.
  const port = await freePort();
  const first = createHttpServer({ host: '127.0.0.1', port, maxBodyBytes: 100 });
  first.route('GET', '/who', () => json(200, { server: 'first' }));
  await first.listen();
  t.teardown(() => first.close());
  const second = createHttpServer({ host: '127.0.0.1', port, maxBodyBytes: 100 });
  second.route('GET', '/who', () => json(200, { server: 'second' }));
  await t.rejects(second.listen(), /cannot listen/, 'listen fails');
  for (let i = 0; i < 20; i++) t.same(await (await fetch(`http://127.0.0.1:${port}/who`)).json(), { server: 'first' });
});
