/**
 * The connection guard of the HTTP server (src/http/connection-guard.ts) over real sockets: the per-client cap, the
 * idle rule, and every close matched to its connection (so that a client's count comes back down).
 */
import t from 'tap';
import { connect, type Socket } from 'node:net';
import { createHttpServer, json, type HttpServer } from '../src/http/server.ts';

const IDLE_MS = 300;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function start(): Promise<{ server: HttpServer; port: number }> {
  const server = createHttpServer({ host: '127.0.0.1', port: 0, maxBodyBytes: 1024, connections: { maxPerClient: 4, maxTotal: 0, idleTimeoutMs: IDLE_MS } });
  server
    .route('GET', '/fast', () => json(200, { ok: true }))
    .route('GET', '/slow', async () => {
      await sleep(IDLE_MS * 3);
      return json(200, { slow: true });
    })
    .route('POST', '/echo', async (req) => json(200, { bytes: (await req.body()).length }));
  const port = await server.listen();
  return { server, port };
}

interface Client {
  s: Socket;
  closed: boolean;
  received: string;
}

async function open(port: number, localAddress: string): Promise<Client> {
  const s = connect({ host: '127.0.0.1', port, localAddress });
  const c: Client = { s, closed: false, received: '' };
  s.on('error', () => {});
  s.on('data', (d) => {
    c.received += d.toString('latin1');
  });
  s.on('close', () => {
    c.closed = true;
  });
  await new Promise((r) => s.once('connect', r));
  return c;
}

async function until(check: () => boolean, ms = 10_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!check() && Date.now() < deadline) await sleep(20);
  return check();
}

const statuses = (c: Client) => [...c.received.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]));

t.test('over the cap: closed at once; idle: closed after the timeout; every close matched', async (t) => {
  const { server, port } = await start();
  t.teardown(() => server.close(0));
  const clients = await Promise.all(Array.from({ length: 10 }, () => open(port, '127.0.0.4')));
  t.ok(await until(() => server.connectionStats()?.refused === 6), `6 refused (${JSON.stringify(server.connectionStats())})`);
  t.ok(await until(() => clients.filter((c) => c.closed).length >= 6), 'the client sees them closed');
  t.equal(server.connectionStats()?.open, 4);
  t.ok(await until(() => clients.every((c) => c.closed)), 'the 4 admitted ones are closed once idle');
  t.match(server.connectionStats(), { open: 0, idleClosed: 4, unmatched: 0 });
  // Another address was never limited by the first one's count.
  const other = await open(port, '127.0.0.5');
  other.s.write('GET /fast HTTP/1.1\r\nHost: x\r\n\r\n');
  t.ok(await until(() => statuses(other).length === 1));
  t.same(statuses(other), [200]);
  other.s.destroy();
});

t.test('clients that close their own connections get their count back', async (t) => {
  const { server, port } = await start();
  t.teardown(() => server.close(0));
  for (let round = 0; round < 3; round++) {
    const clients = await Promise.all(Array.from({ length: 4 }, () => open(port, '127.0.0.6')));
    t.ok(await until(() => server.connectionStats()?.open === 4), `round ${round}: 4 open`);
    // Half after a request, half without one.
    clients[0]?.s.write('GET /fast HTTP/1.1\r\nHost: x\r\n\r\n');
    clients[1]?.s.write('POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc');
    await until(() => statuses(clients[0] as Client).length === 1 && statuses(clients[1] as Client).length === 1);
    for (const c of clients) c.s.destroy();
    t.ok(await until(() => server.connectionStats()?.open === 0), `round ${round}: all closes matched (${JSON.stringify(server.connectionStats())})`);
  }
  t.match(server.connectionStats(), { refused: 0, unmatched: 0 });
});

t.test('a connection whose request takes longer than the idle timeout is not cut; nor one that was answered', async (t) => {
  const { server, port } = await start();
  t.teardown(() => server.close(0));
  const slow = await open(port, '127.0.0.7');
  slow.s.write('GET /slow HTTP/1.1\r\nHost: x\r\n\r\n');
  const posted = await open(port, '127.0.0.8');
  posted.s.write('POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc');
  t.ok(await until(() => statuses(slow).length === 1), 'the slow request is answered');
  t.same(statuses(slow), [200]);
  t.notOk(slow.closed, 'on its open connection');
  t.same(statuses(posted), [200]);
  // Past the idle timeout, the answered connection still serves its next request.
  await sleep(IDLE_MS * 2);
  t.notOk(posted.closed, 'the answered connection is still open');
  posted.s.write('GET /fast HTTP/1.1\r\nHost: x\r\n\r\n');
  t.ok(await until(() => statuses(posted).length === 2));
  t.same(statuses(posted), [200, 200]);
  t.equal(server.connectionStats()?.idleClosed, 0);
  slow.s.destroy();
  posted.s.destroy();
});
