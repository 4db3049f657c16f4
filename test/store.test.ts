// The LMDB store's own cases (a crash of the writer, the directory it opens, a full disk); what every store must do,
// LMDB and PostgreSQL alike, is in store-contract.test.ts.
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { open } from 'lmdb';
import { join } from 'node:path';
import { eip3009NonceKey } from '../src/schemes/eip3009/nonce-key.ts';
import { permit2NonceKey } from '../src/schemes/permit2/nonce-key.ts';
import { createMetrics } from '../src/metrics/metrics.ts';
import { openLmdbStore } from '../src/store/lmdb/open-lmdb-store.ts';
import { parseExposition, valueOf as metricValue } from './helpers/prometheus.ts';
import { tempDir } from './helpers/temp-dir.ts';

const made: string[] = [];
const dir = () => {
  const d = tempDir('store');
  made.push(d);
  return d;
};
// Registered first, so it runs after each test's own teardown has closed its store.
t.teardown(() => {
  for (const d of made) rmSync(d, { recursive: true, force: true });
});

t.test('nonce keys name the on-chain uniqueness scope', async (t) => {
  const a = eip3009NonceKey('eip155:8453', '0xAbC0000000000000000000000000000000000001', '0xDef0000000000000000000000000000000000002', '0xAA');
  t.equal(a, eip3009NonceKey('eip155:8453', '0xabc0000000000000000000000000000000000001', '0xdef0000000000000000000000000000000000002', '0xaa'), 'case does not make a new key');
  t.not(a, eip3009NonceKey('eip155:84532', '0xabc0000000000000000000000000000000000001', '0xdef0000000000000000000000000000000000002', '0xaa'), 'another network is another key');
  t.equal(permit2NonceKey('eip155:4663', '0xDef0000000000000000000000000000000000002', 255n), permit2NonceKey('eip155:4663', '0xdef0000000000000000000000000000000000002', '255'));
});

t.test('an acknowledged write survives SIGKILL of the writer', async (t) => {
  const path = dir();
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/store-writer.ts', path, 'pay-1'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const line = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => resolve(d.toString()));
    child.once('exit', (code) => reject(new Error(`writer exited ${code}`)));
  });
  t.match(line, /written true/);
  child.kill('SIGKILL');
  await new Promise((r) => child.once('exit', r));
  const store = openLmdbStore(path);
  t.teardown(() => store.close());
  t.same(await store.collection('payments').get('pay-1'), { amount: '10000' }, 'the record is there after the crash');
  t.equal(await store.nonces.holder('nonce-pay-1'), 'pay-1', 'so is the nonce claim');
});

t.test('a write that comes while the store closes (a loop still running as the process stops) is refused; the process goes on', async (t) => {
  const store = openLmdbStore(dir());
  const records = store.collection<{ n: number }>('records');
  const claims = store.claims('late');
  await records.put('before', { n: 1 });
  const closed = store.close();
  // Seen under load at Ctrl-C: such a write was queued for a commit that ran after the environment closed, and threw
  // where nothing could catch it ("The environment is already closed"), so `gate402 start` exited 1.
  await t.rejects(records.put('after', { n: 2 }), { code: 'store_unavailable' }, 'a put is refused as the store being unavailable');
  await t.rejects(records.remove('before'), { code: 'store_unavailable' }, 'so is a remove');
  await t.rejects(claims.claim('k', 'me'), { code: 'store_unavailable' }, 'and a claim');
  await t.rejects(
    store.atomically(() => records.putWithin('x', { n: 3 })),
    { code: 'store_unavailable' },
    'and a transaction',
  );
  await closed;
  // Anything lmdb-js had queued would run now.
  await new Promise((r) => setTimeout(r, 50));
  const again = openLmdbStore(made.at(-1) as string);
  t.same(await again.collection<{ n: number }>('records').get('before'), { n: 1 }, 'what was written before is there');
  t.equal(await again.collection<{ n: number }>('records').get('after'), undefined, 'what was refused is not');
  await again.close();
});

t.test('a data directory that exists already (a mounted volume) or has a dot in its name opens', async (t) => {
  for (const name of ['data.v1', 'gate402.lmdb', 'plain']) {
    for (const exists of [true, false]) {
      const path = join(dir(), name);
      if (exists) {
        mkdirSync(path);
        writeFileSync(join(path, 'README'), 'a volume with something in it already');
      }
      const store = openLmdbStore(path);
      await store.collection<number>('c').put('k', 1);
      await store.close();
      t.ok(statSync(path).isDirectory(), `${name} (${exists ? 'existing' : 'new'}) is a directory`);
      const again = openLmdbStore(path);
      t.equal(await again.collection<number>('c').get('k'), 1, `${name} (${exists ? 'existing' : 'new'}) keeps its records`);
      await again.close();
    }
  }
});

/** lmdb's `open`, but every write fails while `state.failing` (as on a full disk). */
function failingLmdb(state: { failing: boolean }): typeof open {
  const diskFull = () => Promise.reject(Object.assign(new Error('MDB_MAP_FULL: No space left on device'), { code: 'ENOSPC' }));
  const WRITES = new Set(['put', 'remove', 'ifNoExists', 'transaction', 'ifVersion']);
  const wrap = <D extends object>(db: D): D =>
    new Proxy(db, {
      get(target, prop) {
        const v = Reflect.get(target, prop, target) as unknown;
        if (typeof v !== 'function') return v;
        if (typeof prop === 'string' && WRITES.has(prop)) return (...args: unknown[]) => (state.failing ? diskFull() : (v as (...a: unknown[]) => unknown).apply(target, args));
        if (prop === 'openDB') return (...args: unknown[]) => wrap((v as (...a: unknown[]) => object).apply(target, args));
        return (v as (...a: unknown[]) => unknown).bind(target);
      },
    });
  return ((options: Parameters<typeof open>[0]) => wrap(open(options as never))) as typeof open;
}

t.test('a write that fails (disk full) rejects only its own promise; the store says unhealthy until writes work again', async (t) => {
  const state = { failing: false };
  const unhandled: unknown[] = [];
  const onUnhandled = (e: unknown) => unhandled.push(e);
  process.on('unhandledRejection', onUnhandled);
  t.teardown(() => void process.off('unhandledRejection', onUnhandled));
  const metrics = createMetrics({ defaultMetrics: false });
  const store = openLmdbStore(dir(), { openLmdb: failingLmdb(state) as never, failureMemoryMs: 4000, onError: () => metrics.storeError('lmdb') });
  metrics.declareStore('lmdb');
  const storeErrors = async () => metricValue(parseExposition((await metrics.scrape()).body), 'gate402_store_errors_total', { store: 'lmdb' });
  t.teardown(() => store.close());
  const payments = store.collection<{ state: string }>('payments');
  await payments.put('p', { state: 'broadcasting' });
  t.same(store.health(), { ok: true, value: undefined });
  t.equal(await storeErrors(), 0, 'the error counter is there, at zero');

  state.failing = true;
  await t.rejects(payments.put('p', { state: 'settled' }), /No space left/, 'the write says it failed');
  await t.rejects(store.nonces.claim('n', 'holder'), /No space left/);
  t.same(await payments.get('p'), { state: 'broadcasting' }, 'the record is where its last durable write left it');
  t.equal(await store.nonces.holder('n'), undefined, 'and the claim was not taken');
  t.match(store.health(), { ok: false, error: { code: 'store_unwritable', message: /No space left/ } }, 'unhealthy');
  t.match(await store.probe(), { ok: false }, 'a probe while the disk is full fails too');
  t.equal(await storeErrors(), 3, 'each failed write counted: the record, the claim, the probe');

  state.failing = false;
  await new Promise((r) => setTimeout(r, 1100)); // probes are at most once a second
  // Remembered for 4 s from the last failure: 1.1 s later is well inside that, however loaded the machine.
  t.match(await store.probe(), { ok: false }, 'a write succeeds again, but a failure is remembered for a while');
  let healthy = await store.probe();
  for (let i = 0; i < 100 && !healthy.ok; i++) {
    await new Promise((r) => setTimeout(r, 100));
    healthy = await store.probe();
  }
  t.same(healthy, { ok: true, value: undefined }, 'then healthy again, once the memory has passed');
  await payments.put('p', { state: 'settled' });
  t.same(await payments.get('p'), { state: 'settled' });
  await new Promise((r) => setTimeout(r, 50));
  t.same(unhandled, [], 'no unhandled rejection');
});
