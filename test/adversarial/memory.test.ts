/**
 * Bounded memory: whatever anyone sends, the gateway's heap does not grow with it. The real gateway (a spawned
 * process) is flooded over keep-alive sockets with requests that each name something new: unknown slugs, unknown
 * routes, appended segments, bad credentials, registrations from ever new client addresses (X-Forwarded-For behind
 * a trusted proxy). Its heap after a warm-up flood and after a flood four times larger, each time after a full GC
 * (test/helpers/heap-probe.mjs), must be the same to within 4 MiB: a per-request entry in any map (a key and its
 * entry, 40 bytes and more) would be over 4.5 MiB here.
 */
import t, { type Test } from 'tap';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { CAIP2 } from '../../src/chain/canonical.ts';
import { startFixtureUpstreams } from '../../src/devnet/fixtures/server.ts';
import { network, testDevnet, TEST_MANIFEST_PATH } from '../helpers/devnet.ts';
import { flood } from '../helpers/flood.ts';
import { spawnFacilitator } from '../helpers/spawn-facilitator.ts';
import { gassedKey } from '../helpers/stock.ts';
import { tempDir } from '../helpers/temp-dir.ts';

const WARM_UP = 30_000;
/** Four times the warm-up: a leak of 35 bytes a request (less than any map entry) would pass the slack below. */
const FLOOD = 4 * WARM_UP;
/** Allowed heap growth between the two measurements. */
const SLACK_BYTES = 4 * 1024 * 1024;

const n = network(testDevnet(), CAIP2.stockChain);
const fixtures = await startFixtureUpstreams({ host: '127.0.0.1', port: 0 });
t.teardown(() => fixtures.close());
const probe = pathToFileURL(resolve(import.meta.dirname, '../helpers/heap-probe.mjs')).href;
const dataDir = tempDir('memory');
const heapFile = join(dataDir, 'heap.json');
const gw = await spawnFacilitator({
  part: 'gateway',
  dataDir,
  manifestPath: TEST_MANIFEST_PATH,
  env: {
    GATE402_RELAYER_KEYS: await gassedKey(n),
    GATE402_CATALOG_UPSTREAM_BASE: new URL(fixtures.baseUrlFor('catjoke')).origin,
    GATE402_TRUST_PROXY: '1',
    NODE_OPTIONS: `--expose-gc --import=${probe}`,
    GATE402_TEST_HEAP_FILE: heapFile,
  },
});
t.teardown(async () => {
  await gw.stop();
  rmSync(dataDir, { recursive: true, force: true });
});
const port = Number(new URL(gw.url).port);

let probes = 0;
/** The gateway's heap in use after a full GC. */
async function heapUsed(): Promise<number> {
  const seq = ++probes;
  gw.child.kill('SIGUSR2');
  for (;;) {
    if (existsSync(heapFile)) {
      const m = JSON.parse(readFileSync(heapFile, 'utf8')) as { seq: number; heapUsed: number };
      if (m.seq === seq) return m.heapUsed;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Request `i` of a flood named `run`: something the gateway has never seen, from an address it has never seen. */
function hostile(run: string) {
  return (i: number): string => {
    const id = `zz-${run}${i.toString(36)}`; // no slug, route or page starts so
    const ip = `${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}.${run.length}`;
    const head = (method: string, path: string, extra = '') => `${method} ${path} HTTP/1.1\r\nhost: gate402\r\nx-forwarded-for: 6.6.6.6, ${ip}\r\n${extra}`;
    switch (i % 10) {
      case 0:
      case 1:
        return `${head('GET', `/m/${id}/joke`)}\r\n`;
      case 2:
        return `${head('GET', `/m/${id}/openapi.json`)}\r\n`;
      case 3:
        return `${head('GET', `/api/merchants/${id}`)}\r\n`;
      case 4:
        return `${head('POST', `/m/${id}/joke`, 'content-length: 2\r\n')}\r\n{}`;
      case 5:
        return `${head('GET', `/m/catjoke/${id}`)}\r\n`;
      case 6:
        return `${head('GET', `/m/catjoke/joke/${id}?q=${id}`)}\r\n`;
      case 7:
        return `${head('GET', `/${id}/${id}`)}\r\n`;
      case 8:
        return `${head('GET', '/m/catjoke/joke', `payment-signature: ${Buffer.from(`{"x402Version":2,"id":"${id}"}`).toString('base64')}\r\n`)}\r\n`;
      default:
        return `${head('POST', '/api/merchants', 'content-type: application/json\r\ncontent-length: 2\r\n')}\r\n{}`;
    }
  };
}

/** After a flood: forget what only the last moments hold (this second's 402s, buckets not yet refilled). */
async function quiet(): Promise<void> {
  await new Promise((r) => setTimeout(r, 2500));
  // Each rate-limited request drops a few idle buckets; one address, so it adds none.
  await flood({ host: '127.0.0.1', port, total: 20_000, request: () => 'POST /api/merchants HTTP/1.1\r\nhost: gate402\r\nx-forwarded-for: 198.51.100.1\r\ncontent-length: 2\r\n\r\n{}' });
  await fetch(`${gw.url}/m/catjoke/joke`).then((r) => r.arrayBuffer());
}

function noServerErrors(t: Test, statuses: Map<number, number>, total: number): void {
  const counted = [...statuses.values()].reduce((a, b) => a + b, 0);
  t.equal(counted, total, 'every request was answered');
  const errors = [...statuses].filter(([s]) => s >= 500);
  t.same(errors, [], 'no 5xx');
  t.same(
    [...statuses.keys()].filter((s) => ![400, 402, 404, 405, 429].includes(s)),
    [],
    `only refusals: ${JSON.stringify([...statuses])}`,
  );
}

t.test('a flood of things never seen leaves the heap flat', async (t) => {
  const warm = await flood({ host: '127.0.0.1', port, total: WARM_UP, request: hostile('w') });
  noServerErrors(t, warm, WARM_UP);
  await quiet();
  const before = await heapUsed();
  const started = Date.now();
  const big = await flood({ host: '127.0.0.1', port, total: FLOOD, request: hostile('f') });
  t.comment(`${FLOOD} requests in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  noServerErrors(t, big, FLOOD);
  await quiet();
  const after = await heapUsed();
  t.comment(`heap in use after GC: ${(before / 2 ** 20).toFixed(1)} MiB after ${WARM_UP} requests, ${(after / 2 ** 20).toFixed(1)} MiB after ${FLOOD} more`);
  t.ok(after - before < SLACK_BYTES, `the heap grew by ${((after - before) / 2 ** 20).toFixed(2)} MiB (at most ${SLACK_BYTES / 2 ** 20} MiB allowed)`);
  t.equal((await fetch(`${gw.url}/health`)).status, 200, 'and the gateway is well');
});
