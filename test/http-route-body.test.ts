/**
 * Per-route body limits and bodies read on demand, on real sockets: a route may take less than the server's limit,
 * and a route that reads its body only when asked answers a refusal at once, without reading what it did not ask for.
 */
import t from 'tap';
import { createHttpServer, json } from '../src/http/server.ts';
import { rawRequest } from './helpers/raw-http.ts';

let bodiesRead = 0;
const server = createHttpServer({ host: '127.0.0.1', port: 0, maxBodyBytes: 4 * 1024 * 1024, log: () => {} });
server
  .route('POST', '/upload', async (req) => json(200, { bytes: (await req.body()).length }))
  .route('POST', '/small', async (req) => json(200, { bytes: (await req.body()).length }), { maxBodyBytes: 1024 })
  .route(
    'POST',
    '/gated',
    async (req) => {
      // A slow check first (as a signature check would be); the body is read only for those who pass.
      await new Promise((r) => setTimeout(r, 50));
      if (req.headers['x-pass'] !== 'yes') return json(402, { error: 'refused on the headers' });
      bodiesRead++;
      return json(200, { bytes: (await req.body()).length });
    },
    { maxBodyBytes: 64 * 1024, bodyOnDemand: true },
  );
const port = await server.listen();
const origin = `http://127.0.0.1:${port}`;
t.teardown(() => server.close(100));

t.test('a route limit below the server limit', async (t) => {
  const declared = await rawRequest(origin, 'POST', '/small', { body: Buffer.from('x'), contentLength: 2048 });
  t.equal(declared.status, 413, 'refused on its Content-Length');
  t.match(declared.body, /larger than 1024 bytes/);
  t.equal((await rawRequest(origin, 'POST', '/small', { body: Buffer.alloc(1024, 0x61) })).status, 200, 'the limit itself passes');
  const big = await rawRequest(origin, 'POST', '/upload', { body: Buffer.alloc(2 * 1024 * 1024, 0x61) });
  t.equal(big.status, 200, 'other routes keep the server limit');
  t.equal(JSON.parse(big.body).bytes, 2 * 1024 * 1024);
});

t.test('a body read on demand: refused at once without it, read in full when asked for', async (t) => {
  const refused = await rawRequest(origin, 'POST', '/gated', { body: Buffer.from('{'), contentLength: 60_000, timeoutMs: 10_000 });
  // rawRequest resolves when the server closes: had it waited for the 59,999 bytes still owed, it would time out.
  t.equal(refused.status, 402, 'answered, and the connection closed, while the body was still owed');
  t.equal(bodiesRead, 0);
  const passed = await rawRequest(origin, 'POST', '/gated', { headers: { 'x-pass': 'yes' }, body: Buffer.alloc(60_000, 0x62) });
  t.equal(passed.status, 200);
  t.equal(JSON.parse(passed.body).bytes, 60_000, 'the whole body, once asked for');
  const tooBig = await rawRequest(origin, 'POST', '/gated', { headers: { 'x-pass': 'yes' }, body: Buffer.from('{'), contentLength: 65 * 1024 });
  t.equal(tooBig.status, 413, 'its own limit holds');
  const fetched = await fetch(`${origin}/gated`, { method: 'POST', headers: { 'x-pass': 'yes' }, body: 'hello' });
  t.same(await fetched.json(), { bytes: 5 }, 'a small body over keep-alive');
});
