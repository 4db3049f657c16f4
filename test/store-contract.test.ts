// What every store does, LMDB and PostgreSQL alike: claims won exactly once under concurrency, a claim's writes
// and `atomically`'s all or nothing, listings in key order, records that outlive the store that wrote them. Then
// what only a shared PostgreSQL store has to: two instances on one database, a write that outlives a SIGKILL of its
// writer, migrations applied once however many nodes start at once, an outage reported as store_unwritable and
// recovered from.
import t from 'tap';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { openLmdbStore } from '../src/store/lmdb/open-lmdb-store.ts';
import { openStore, type Store } from '../src/store/open-store.ts';
import { migrate, shippedMigrations } from '../src/store/postgres/migrate.ts';
import { openPostgresStore } from '../src/store/postgres/open-postgres-store.ts';
import { startPostgres, testPool } from './helpers/postgres.ts';
import { tempDir } from './helpers/temp-dir.ts';

const listed = async <T>(entries: AsyncIterable<T>): Promise<T[]> => {
  const out: T[] = [];
  for await (const e of entries) out.push(e);
  return out;
};

interface Backend {
  name: string;
  /** Opens a store; each call on the same `at` opens the same records (another process, or the same after a restart). */
  open(at: string): Promise<Store>;
  /** A fresh place for records. */
  place(): Promise<string>;
  /** Whether two stores may be open on one place at once (two nodes). */
  shared: boolean;
}

const db = await startPostgres();
/** A name for another database on db's server, which may be the run's shared one: unique to this run of the file. */
const fresh = (what: string): string => `${what}_${randomBytes(4).toString('hex')}`;
t.teardown(() => db.stop());
let databases = 0;
const backends: Backend[] = [
  { name: 'LMDB', open: async (at) => openLmdbStore(at), place: async () => tempDir('store-contract'), shared: false },
  {
    name: 'PostgreSQL',
    open: (url) => openStore({ dataDir: '/nonexistent', url }, { poolSize: 4 }),
    place: () => db.server.createDatabase(fresh(`contract_${++databases}`)),
    shared: true,
  },
];

for (const b of backends) {
  t.test(`${b.name}: of 60 concurrent claims on one key exactly one wins, and every loser learns who`, async (t) => {
    const at = await b.place();
    const stores = b.shared ? [await b.open(at), await b.open(at)] : [await b.open(at)];
    t.teardown(() => Promise.all(stores.map((s) => s.close())));
    const results = await Promise.all(Array.from({ length: 60 }, (_, i) => (stores[i % stores.length] as Store).nonces.claim('k', `payment-${i}`)));
    const winners = results.flatMap((r, i) => (r.claimed ? [`payment-${i}`] : []));
    t.equal(winners.length, 1, `one winner across ${stores.length} store instance(s)`);
    t.same(new Set(results.flatMap((r) => (r.claimed ? [] : [r.holder]))), new Set(winners), 'losers learn the winner');
    for (const s of stores) t.equal(await s.nonces.holder('k'), winners[0], 'every instance reads the holder');
    const store = stores.at(-1) as Store;
    t.same(await store.nonces.claim('k', 'late'), { claimed: false, holder: winners[0] }, 'a later claim loses too');
    t.equal(await store.nonces.release('k', 'late'), false, 'only the holder can release');
    t.equal(await store.nonces.takeover('k', 'late', 'thief'), false, 'a takeover must name the holder');
    t.equal(await store.nonces.takeover('k', winners[0] as string, 'next'), true);
    t.equal(await store.nonces.holder('k'), 'next');
    t.equal(await store.nonces.release('k', 'next'), true);
    t.equal(await store.nonces.holder('k'), undefined, 'released: free again');
    t.equal(await store.claims('served').holder('k'), undefined, 'claim sets are apart');
  });

  t.test(`${b.name}: a claim's writes land with the claim, and only for the winner`, async (t) => {
    const store = await b.open(await b.place());
    t.teardown(() => store.close());
    const records = store.collection<{ by: string }>('payments');
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => store.nonces.claim('n', `a${i}`, () => records.putWithin('n', { by: `a${i}` }))));
    const winner = results.findIndex((r) => r.claimed);
    t.same(await records.get('n'), { by: `a${winner}` }, "the record is the winner's");
  });

  t.test(`${b.name}: atomically writes all or nothing`, async (t) => {
    const store = await b.open(await b.place());
    t.teardown(() => store.close());
    const batches = store.collection<{ members: string[] }>('payment-batches');
    const payments = store.collection<{ batch: string }>('payments');
    await store.atomically(() => {
      batches.putWithin('b1', { members: ['p1', 'p2'] });
      payments.putWithin('p1', { batch: 'b1' });
      payments.putWithin('p2', { batch: 'b1' });
    });
    t.same([await batches.get('b1'), await payments.get('p1'), await payments.get('p2')], [{ members: ['p1', 'p2'] }, { batch: 'b1' }, { batch: 'b1' }]);
    await t.rejects(
      store.atomically(() => {
        batches.putWithin('b2', { members: ['p3'] });
        throw new Error('the batch could not be built');
      }),
      /could not be built/,
    );
    t.equal(await batches.get('b2'), undefined, 'a callback that throws writes nothing');
    t.throws(() => payments.putWithin('p9', { batch: 'none' }), /outside a store transaction/, 'putWithin belongs in a callback');
  });

  t.test(`${b.name}: records list by prefix in key order, either way, however many`, async (t) => {
    const store = await b.open(await b.place());
    t.teardown(() => store.close());
    const c = store.collection<number>('orders');
    await Promise.all([c.put('b:2', 2), c.put('a:1', 1), c.put('b:1', 1), c.put('c:1', 3), c.put('b', 0)]);
    t.same(await listed(c.entries('b:')), [
      ['b:1', 1],
      ['b:2', 2],
    ]);
    t.same(await listed(c.entries('b:', { reverse: true })), [
      ['b:2', 2],
      ['b:1', 1],
    ]);
    t.equal((await listed(c.entries())).length, 5);
    const many = store.collection<number>('feed');
    await Promise.all(Array.from({ length: 600 }, (_, i) => many.put(`k${String(i).padStart(4, '0')}`, i)));
    const all = await listed(many.entries('k', { reverse: true }));
    t.equal(all.length, 600, 'past one page of a listing');
    t.same(
      all.map(([, v]) => v),
      Array.from({ length: 600 }, (_, i) => 599 - i),
      'newest first, none twice',
    );
    await c.remove('b');
    t.equal(await c.get('b'), undefined, 'removed');
  });

  t.test(`${b.name}: records outlive the store that wrote them${b.shared ? ', and another instance sees them at once' : ''}`, async (t) => {
    const at = await b.place();
    const first = await b.open(at);
    const odd = { text: 'nul \u0000, quote ", emoji 🦊, backslash \\', n: 1.5, list: [null, true], nested: { deep: 'x' } };
    await first.collection('payments').put('p', odd);
    await first.nonces.claim('n', 'p');
    if (b.shared) {
      const second = await b.open(at);
      t.same(await second.collection('payments').get('p'), odd, 'a second instance reads the first one’s record');
      await second.collection('payments').put('p', { ...odd, n: 2 });
      t.same(await first.collection('payments').get('p'), { ...odd, n: 2 }, 'and the first reads the second’s, uncached');
      await second.close();
    }
    await first.close();
    const again = await b.open(at);
    t.teardown(() => again.close());
    t.match(await again.collection('payments').get('p'), { text: odd.text }, 'reopened: the record is there, its text exact');
    t.equal(await again.nonces.holder('n'), 'p', 'so is the claim');
    t.same(again.health(), { ok: true, value: undefined });
  });
}

t.test('PostgreSQL: an acknowledged write survives SIGKILL of the writer', async (t) => {
  const url = await db.server.createDatabase(fresh('killed_writer'));
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/store-writer.ts', url, 'pay-1'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const line = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => resolve(d.toString()));
    child.once('exit', (code) => reject(new Error(`writer exited ${code}`)));
  });
  t.match(line, /written true/);
  child.kill('SIGKILL');
  await new Promise((r) => child.once('exit', r));
  const store = await openPostgresStore(url, { poolSize: 1 });
  t.teardown(() => store.close());
  t.same(await store.collection('payments').get('pay-1'), { amount: '10000' }, 'the record is there after the crash');
  t.equal(await store.nonces.holder('nonce-pay-1'), 'pay-1', 'so is the nonce claim');
});

t.test('PostgreSQL: migrations are applied once, however many nodes start at once', async (t) => {
  const url = await db.server.createDatabase(fresh('migrations_race'));
  const stores = await Promise.all(Array.from({ length: 4 }, () => openPostgresStore(url, { poolSize: 2 })));
  t.teardown(() => Promise.all(stores.map((s) => s.close())));
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  t.teardown(() => client.end());
  const { rows } = await client.query<{ version: number; name: string }>('SELECT version, name FROM schema_migrations ORDER BY version');
  t.same(
    rows,
    shippedMigrations().map((m) => ({ version: m.version, name: m.name })),
    'each shipped migration recorded once',
  );
  const pool = testPool(url, 1);
  t.teardown(() => pool.end());
  t.same(await migrate(pool), [], 'a later start applies nothing');
});

t.test('PostgreSQL: an unreachable database is a clear error at start, and store_unwritable while running', async (t) => {
  const closed = db.server.url('no_such_database');
  await t.rejects(openPostgresStore(closed, { connectTimeoutMs: 1000 }), /PostgreSQL store at postgres:\/\/postgres:\*\*\*@.*could not be opened: .*no_such_database/, 'named, password hidden');

  const outage = fresh('outage');
  const url = await db.server.createDatabase(outage);
  const store = await openPostgresStore(url, { poolSize: 2, connectTimeoutMs: 1000, statementTimeoutMs: 1000, failureMemoryMs: 300 });
  t.teardown(() => store.close());
  const admin = new pg.Client({ connectionString: db.server.url() });
  await admin.connect();
  t.teardown(() => admin.end());
  const cutOff = async (allow: boolean) => {
    await admin.query(`ALTER DATABASE ${outage} ALLOW_CONNECTIONS ${allow}`);
    if (!allow) await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [outage]);
  };
  const payments = store.collection<{ state: string }>('payments');
  await payments.put('p', { state: 'broadcasting' });
  await cutOff(false);
  t.teardown(() => cutOff(true));
  await t.rejects(payments.put('p', { state: 'settled' }), 'the write says it failed');
  t.match(store.health(), { ok: false, error: { code: 'store_unwritable' } }, 'and the store is unhealthy: the gateway sheds');
  await cutOff(true);
  // Probes are at most once a second, and the failure is remembered 300 ms after: asked until it is healthy (a
  // loaded machine may need more than one probe to reconnect), for at most 20 s.
  let healthy = await store.probe();
  for (let i = 0; i < 80 && !healthy.ok; i++) {
    await new Promise((r) => setTimeout(r, 250));
    healthy = await store.probe();
  }
  t.same(healthy, { ok: true, value: undefined }, 'back once writes work again and the failure is forgotten');
  t.same(await payments.get('p'), { state: 'broadcasting' }, 'the record is where its last committed write left it');
});

t.test('PostgreSQL: a write the database refuses for its content fails alone, the store stays healthy', async (t) => {
  const store = await openPostgresStore(await db.server.createDatabase(fresh('content')), { poolSize: 2 });
  t.teardown(() => store.close());
  const c = store.collection<number>('c');
  await t.rejects(
    store.atomically(() => {
      c.putWithin('fine', 1);
      c.putWithin('nul\u0000key', 2);
    }),
    'a key PostgreSQL text cannot hold',
  );
  t.equal(await c.get('fine'), undefined, 'all or nothing: the other write is not there');
  t.same(store.health(), { ok: true, value: undefined }, 'a refused record is not an outage');
});

t.test('PostgreSQL: a storm of lookups reads every key right and does not hold up a write asked after it', async (t) => {
  const url = await db.server.createDatabase(fresh('lookups'));
  // What is measured is where the write waits in the pool, not the disk: the commit does not wait for its WAL flush
  // (on a server other test files share, one fsync can take longer than every lookup below).
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`ALTER DATABASE "${new URL(url).pathname.slice(1)}" SET synchronous_commit = off`);
  await admin.end();
  const store = await openPostgresStore(url, { poolSize: 4 });
  t.teardown(() => store.close());
  const records = store.collection<{ n: number }>('records');
  // 4,096 keys: eight lookup statements one after another (512 keys each, one at a time on a pool of four), so the
  // write asked with them has seven statements' time of margin over the last.
  const keys = Array.from({ length: 4096 }, (_, i) => `k${i}`);
  await store.atomically(() => {
    for (const [i, key] of keys.entries()) if (i % 2 === 0) records.putWithin(key, { n: i });
  });
  // The pool's four connections are open before the storm (a new one takes longer than a lookup).
  await Promise.all(Array.from({ length: 4 }, () => store.pool.query('SELECT pg_sleep(0.05)')));
  await Promise.all(['k1', 'k2', 'k3', 'k4'].map((key) => store.nonces.claim(key, `holder-${key}`)));
  // Each key asked for twice, and claims alongside: 8,194 lookups in one turn of the event loop, on 4 connections.
  const order: string[] = [];
  const reads = [...keys, ...keys].map((key) =>
    records.get(key).then((value) => {
      order.push('read');
      return value;
    }),
  );
  const holders = ['k1', 'k2'].map((key) => store.nonces.holder(key));
  const write = records.put('late', { n: -1 }).then(() => order.push('write'));
  const values = await Promise.all(reads);
  await write;
  t.same(
    values,
    [...keys, ...keys].map((_, i) => ((i % keys.length) % 2 === 0 ? { n: i % keys.length } : undefined)),
    'every lookup answers its own key: the record, or nothing',
  );
  t.same(await Promise.all(holders), ['holder-k1', 'holder-k2'], "each claim's holder");
  t.ok(order.indexOf('write') < order.length - 1, `the write is committed before the last lookup is answered (at ${order.indexOf('write')} of ${order.length})`);
  t.same(await records.get('late'), { n: -1 }, 'and read back');
});
