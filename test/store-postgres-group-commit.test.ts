// Group commit on PostgreSQL: the record writes made in one turn of the event loop (puts of many payments, a batch
// written atomically) go in one statement, so one commit, which the database's transaction counter shows; each caller
// is still told its own outcome (a backward write refused to its own caller, with the stored rank), a key written
// twice in one turn lands in order, a fenced group writes nothing and rejects every caller, and one bad row fails only
// its own write. Claims likewise: the claims of one turn (each with its records) are one commit, and of two nodes
// claiming the same nonces at once exactly one wins each, its record the only one written.
import pg from 'pg';
import t from 'tap';
import { RECORD_ORDERS } from '../src/cli/record-orders.ts';
import type { PaymentRecord } from '../src/engine/payment-record.ts';
import type { LeaseToken } from '../src/store/fence.ts';
import { openStore } from '../src/store/open-store.ts';
import { Leases } from '../src/store/postgres/leases.ts';
import type { PutResult, Refused } from '../src/store/record-order.ts';
import { startPostgres, testPool } from './helpers/postgres.ts';

const db = await startPostgres();
t.teardown(() => db.stop());
const admin = new pg.Client({ connectionString: db.url });
await admin.connect();
t.teardown(() => admin.end());

const payment = (id: string, state: string, attempt = 'a1'): PaymentRecord =>
  ({ id, attempt, network: 'eip155:1', payer: '0x1', fingerprint: 'f', request: { big: 'x'.repeat(200) }, state, txs: [], createdAt: 1, updatedAt: 1 }) as unknown as PaymentRecord;

/**
 * The transactions that wrote the rows of these keys (each row's `xmin`): counted in this test's own rows, since the
 * run's PostgreSQL server is shared and other files' transactions draw ids from the same counter meanwhile.
 */
const writers = async (keys: string[]) => {
  const { rows } = await admin.query<{ xmin: string }>('SELECT xmin::text FROM records WHERE key = ANY($1) UNION SELECT xmin::text FROM claims WHERE key = ANY($1)', [keys]);
  return rows.length;
};

t.test('the writes of one turn are one commit; each caller learns its own outcome', async (t) => {
  const refused: Refused[] = [];
  const store = await openStore({ dataDir: '/nonexistent', url: db.url }, { poolSize: 4, orders: RECORD_ORDERS, onRefused: (_c, _k, r) => void refused.push(r) });
  t.teardown(() => store.close());
  const payments = store.collection<PaymentRecord>('payments');
  const batches = store.collection<{ id: string; state: string; txs: []; members: string[] }>('payment-batches');
  await payments.put('settled-one', payment('settled-one', 'settled'));

  const results: Array<Promise<PutResult | undefined>> = [];
  for (let i = 0; i < 20; i++) results.push(payments.putIfNewer(`p${i}`, payment(`p${i}`, 'broadcasting')));
  // A backward write in the same turn: refused, and told to its own caller only.
  results.push(payments.putIfNewer('settled-one', payment('settled-one', 'broadcasting')));
  results.push(
    store
      .atomically(() => {
        batches.putWithin('b1', { id: 'b1', state: 'mined', txs: [], members: ['p0', 'p1'] });
        payments.putWithin('m1', payment('m1', 'settled'));
      })
      .then(() => undefined),
  );
  const outcomes = await Promise.all(results);
  const written = [...Array.from({ length: 20 }, (_, i) => `p${i}`), 'm1', 'b1'];
  t.equal(await writers(written), 1, '21 callers, 22 rows written: by one transaction');
  for (let i = 0; i < 20; i++) t.same(outcomes[i], { written: true }, `p${i} written`);
  t.match(outcomes[20], { written: false, reason: 'backward' }, 'the backward write refused, to its caller');
  const storedRank = (outcomes[20] as Refused).storedRank;
  t.ok(storedRank > (outcomes[20] as Refused).rank, `told with the stored rank (${storedRank})`);
  t.equal(refused.length, 1, 'and told to the store owner once');
  t.equal((await payments.get('settled-one'))?.state, 'settled', 'the settled record stays');
  t.equal((await payments.get('m1'))?.state, 'settled', "the atomic caller's writes landed");
  t.equal((await batches.get('b1'))?.state, 'mined');
  t.equal((await payments.get('p19'))?.state, 'broadcasting');
});

t.test('one key written twice in a turn lands in order; a bad row fails only its own caller', async (t) => {
  const store = await openStore({ dataDir: '/nonexistent', url: db.url }, { poolSize: 4, orders: RECORD_ORDERS });
  t.teardown(() => store.close());
  const payments = store.collection<PaymentRecord>('payments');
  const plain = store.collection<unknown>('plain');
  const first = payments.put('twice', payment('twice', 'broadcasting'));
  const second = payments.put('twice', payment('twice', 'settled'));
  await Promise.all([first, second]);
  t.equal((await payments.get('twice'))?.state, 'settled', 'the later write is the one that stays');
  // A string PostgreSQL's json type refuses (a lone surrogate escape) beside good writes of the same turn.
  const bad = plain.put('bad', { s: '\ud800' });
  const good = plain.put('good', { s: 'fine' });
  const other = payments.put('other', payment('other', 'inFlight'));
  const [b, g, o] = await Promise.allSettled([bad, good, other]);
  t.equal(g.status, 'fulfilled', 'a good write of the same turn lands');
  t.equal(o.status, 'fulfilled', 'and another');
  t.same(await plain.get('good'), { s: 'fine' });
  if (b.status === 'rejected') t.pass('the bad row failed its own write');
  else t.same(await plain.get('bad'), { s: '\ud800' }, 'or, taken by the database, it is stored as written');
});

t.test('a fenced group writes nothing and rejects every caller as fenced', async (t) => {
  const store = await openStore({ dataDir: '/nonexistent', url: db.url }, { poolSize: 4, orders: RECORD_ORDERS });
  t.teardown(() => store.close());
  const pool = testPool(db.url, 2);
  t.teardown(() => pool.end());
  const leases = new Leases(pool, { node: 'g1', boot: 'g1-boot' }, { leaseMs: 60_000, timeoutMs: 5000 });
  const taken = await leases.take('node:g1');
  if (!taken.ok) throw new Error('could not take the lease');
  let lease: LeaseToken | undefined = { name: 'node:g1', epoch: taken.value.epoch };
  store.fence(() => lease);
  const payments = store.collection<PaymentRecord>('payments');
  await payments.put('live', payment('live', 'broadcasting'));
  t.equal((await payments.get('live'))?.state, 'broadcasting', 'with the lease live, a grouped write lands');
  lease = { name: 'node:g1', epoch: taken.value.epoch + 1000 };
  const writes = [payments.put('f1', payment('f1', 'settled')), payments.put('f2', payment('f2', 'settled')), store.atomically(() => payments.putWithin('f3', payment('f3', 'settled')))];
  for (const w of writes) await t.rejects(w, { code: 'fenced' }, 'each caller told it was fenced');
  t.equal(await payments.get('f1'), undefined, 'nothing landed');
  t.equal(await payments.get('f3'), undefined);
});

t.test('the claims of one turn are one commit: of two nodes claiming the same nonces, one wins each, with its record only', async (t) => {
  const [a, b] = await Promise.all(['a', 'b'].map(() => openStore({ dataDir: '/nonexistent', url: db.url }, { poolSize: 4, orders: RECORD_ORDERS })));
  if (!a || !b) throw new Error('no store');
  t.teardown(() => Promise.all([a.close(), b.close()]));
  const [pa, pb] = [a, b].map((s) => s.collection<PaymentRecord>('payments')) as [ReturnType<typeof a.collection<PaymentRecord>>, ReturnType<typeof b.collection<PaymentRecord>>];
  const keys = Array.from({ length: 30 }, (_, i) => `n${i}`);
  // One node's claims alone: 30 claims, each with its payment record, in one write transaction.
  const alone = await Promise.all(keys.slice(0, 10).map((k) => a.nonces.claim(k, `a-${k}`, () => pa.putWithin(k, payment(k, 'claiming', `a-${k}`)))));
  t.equal(await writers(keys.slice(0, 10)), 1, '10 claims with their records: written by one transaction');
  t.ok(
    alone.every((c) => c.claimed),
    'each claimed',
  );
  // Both nodes at once on all 30 keys (10 of them already held by a).
  const both = await Promise.all(
    keys.flatMap((k) => [
      a.nonces.claim(k, `a-${k}`, () => pa.putWithin(k, payment(k, 'claiming', `a-${k}`))).then((c) => ({ k, node: 'a', c })),
      b.nonces.claim(k, `b-${k}`, () => pb.putWithin(k, payment(k, 'claiming', `b-${k}`))).then((c) => ({ k, node: 'b', c })),
    ]),
  );
  for (const [i, k] of keys.entries()) {
    const mine = both.filter((x) => x.k === k);
    const winners = mine.filter((x) => x.c.claimed);
    const holder = await a.nonces.holder(k);
    if (i < 10) t.ok(winners.length === 0 && holder === `a-${k}`, `${k}: held before, won by neither`);
    else t.ok(winners.length === 1 && holder === `${winners[0]?.node}-${k}`, `${k}: won once, by the holder`);
    t.equal((await pb.get(k))?.attempt, holder, `${k}: the record is the holder's`);
    for (const loser of mine.filter((x) => !x.c.claimed)) t.same(loser.c, { claimed: false, holder }, `${k}: the loser at ${loser.node} is told the holder`);
  }
  // Takeovers of one turn, with their records, only where the holder still is the one named.
  const moved = await Promise.all(keys.slice(0, 4).map((k, i) => a.nonces.takeover(k, i < 2 ? `a-${k}` : 'nobody', `served-${k}`, () => pa.putWithin(k, payment(k, 'settled', `served-${k}`)))));
  t.same(moved, [true, true, false, false], 'a takeover moves only a claim its `from` holds');
  t.equal(await a.nonces.holder('n0'), 'served-n0');
  t.equal((await pa.get('n0'))?.state, 'settled', "a takeover's record lands with it");
  t.equal(await a.nonces.holder('n2'), 'a-n2', 'a refused takeover leaves the claim');
  t.equal((await pa.get('n2'))?.state, 'claiming', 'and writes nothing');
});

t.test('two nodes claiming the same keys in opposite orders at once do not deadlock: every claim answered, one winner each', async (t) => {
  const [a, b] = await Promise.all(['a', 'b'].map(() => openStore({ dataDir: '/nonexistent', url: db.url }, { poolSize: 4, orders: RECORD_ORDERS })));
  if (!a || !b) throw new Error('no store');
  t.teardown(() => Promise.all([a.close(), b.close()]));
  // The same payments sent to both nodes, arriving in opposite orders: each node's statement would lock the keys in
  // its own order, and each would wait for the other's.
  for (let round = 0; round < 5; round++) {
    const keys = Array.from({ length: 200 }, (_, i) => `r${round}-k${String(i).padStart(3, '0')}`);
    const outcomes = await Promise.allSettled([
      ...keys.map((k) => a.nonces.claim(k, `a-${k}`).then((c) => ({ k, c }))),
      ...[...keys].reverse().map((k) => b.nonces.claim(k, `b-${k}`).then((c) => ({ k, c }))),
    ]);
    const failed = outcomes.filter((o) => o.status === 'rejected').map((o) => String((o as PromiseRejectedResult).reason));
    t.same(failed.slice(0, 1), [], `round ${round}: no claim failed (${failed.length} did)`);
    const won = outcomes.flatMap((o) => (o.status === 'fulfilled' && o.value.c.claimed ? [o.value.k] : []));
    t.equal(new Set(won).size === keys.length && won.length === keys.length, true, `round ${round}: each of the ${keys.length} keys won exactly once`);
  }
});

t.test('two nodes writing the same records in opposite orders at once do not deadlock: every write lands', async (t) => {
  const [a, b] = await Promise.all(['a', 'b'].map(() => openStore({ dataDir: '/nonexistent', url: db.url }, { poolSize: 4, orders: RECORD_ORDERS })));
  if (!a || !b) throw new Error('no store');
  t.teardown(() => Promise.all([a.close(), b.close()]));
  const [ra, rb] = [a, b].map((s) => s.collection<{ by: string }>('shared-records')) as [ReturnType<typeof a.collection<{ by: string }>>, ReturnType<typeof b.collection<{ by: string }>>];
  for (let round = 0; round < 5; round++) {
    const keys = Array.from({ length: 200 }, (_, i) => `r${round}-k${String(i).padStart(3, '0')}`);
    const outcomes = await Promise.allSettled([
      ...keys.map((k) => ra.put(k, { by: 'a' })),
      // One node's writes as one all-or-nothing transaction, in the opposite order.
      b.atomically(() => {
        for (const k of [...keys].reverse()) rb.putWithin(k, { by: 'b' });
      }),
    ]);
    const failed = outcomes.filter((o) => o.status === 'rejected').map((o) => String((o as PromiseRejectedResult).reason));
    t.same(failed.slice(0, 1), [], `round ${round}: no write failed (${failed.length} did)`);
    const stored = await Promise.all(keys.map((k) => ra.get(k)));
    t.ok(
      stored.every((v) => v?.by === 'a' || v?.by === 'b'),
      `round ${round}: every record is one node's write`,
    );
  }
});
