// Monotonic records, on LMDB and PostgreSQL alike: of each ordered record kind (payments, settlement batches, stock
// orders), every pair of states is written one after the other, by `put` and inside `atomically`; a write whose
// state ranks below the stored one's is refused (the stored record stays, the refusal is answered and told), a
// forward write lands, and an equal rank is written (the last writer wins: a record rewritten in its state, a grown
// trail, a resumed record entering a sibling state).
import t from 'tap';
import { RECORD_ORDERS } from '../src/cli/record-orders.ts';
import { BATCH_STATE_RANK, type BatchRecord, PAYMENT_STATE_RANK, type PaymentRecord } from '../src/engine/payment-record.ts';
import { ORDER_STATE_RANK, type StockOrder } from '../src/stock/order-record.ts';
import { openLmdbStore } from '../src/store/lmdb/open-lmdb-store.ts';
import { openStore, type Store } from '../src/store/open-store.ts';
import type { Refused } from '../src/store/record-order.ts';
import { startPostgres } from './helpers/postgres.ts';
import { tempDir } from './helpers/temp-dir.ts';

interface Kind<T> {
  collection: string;
  ranks: Readonly<Record<string, number>>;
  record(key: string, state: string): T;
}

const payment = (id: string, state: string): PaymentRecord =>
  ({ id, attempt: 'a1', network: 'eip155:1', payer: '0x1', fingerprint: 'f', request: {}, state, txs: [], createdAt: 1, updatedAt: 1 }) as unknown as PaymentRecord;
const batch = (id: string, state: string): BatchRecord => ({ id, network: 'eip155:1', members: ['p'], txs: [], state, createdAt: 1, updatedAt: 1 });
const order = (id: string, state: string): StockOrder => ({ id, state, swapTxs: [], refundTxs: [], refundAttempts: 0 }) as unknown as StockOrder;

const kinds: Kind<unknown>[] = [
  { collection: 'payments', ranks: PAYMENT_STATE_RANK, record: payment },
  { collection: 'payment-batches', ranks: BATCH_STATE_RANK, record: batch },
  { collection: 'stock-orders', ranks: ORDER_STATE_RANK, record: order },
] as Kind<unknown>[];

const db = await startPostgres();
t.teardown(() => db.stop());

const backends: Array<{ name: string; open(refused: Refused[]): Promise<Store> }> = [
  { name: 'LMDB', open: async (refused) => openLmdbStore(tempDir('monotonic'), { orders: RECORD_ORDERS, onRefused: (_c, _k, r) => void refused.push(r) }) },
  { name: 'PostgreSQL', open: (refused) => openStore({ dataDir: '/nonexistent', url: db.url }, { poolSize: 4, orders: RECORD_ORDERS, onRefused: (_c, _k, r) => void refused.push(r) }) },
];

const stateOf = (v: unknown) => (v as { state: string }).state;

for (const b of backends) {
  for (const kind of kinds) {
    const states = Object.keys(kind.ranks);
    const rank = (s: string) => kind.ranks[s] as number;
    t.test(`${b.name}: ${kind.collection}: every backward write is refused, every forward or equal-rank one lands`, async (t) => {
      const refused: Refused[] = [];
      const store = await b.open(refused);
      t.teardown(() => store.close());
      const records = store.collection(kind.collection);
      const pairs = states.flatMap((a) => states.map((z) => [a, z] as const));
      const outcomes = await Promise.all(
        pairs.map(async ([a, z]) => {
          const key = `${b.name}|put|${a}->${z}`;
          await records.put(key, kind.record(key, a));
          const result = await records.putIfNewer(key, kind.record(key, z));
          return { a, z, result, stored: stateOf(await records.get(key)) };
        }),
      );
      let backward = 0;
      for (const { a, z, result, stored } of outcomes) {
        if (rank(z) < rank(a)) {
          backward++;
          t.equal(stored, a, `${a} then ${z}: ${a} stays`);
          t.match(result, { written: false, reason: 'backward' }, `${a} then ${z}: refused, and said so`);
        } else {
          t.equal(stored, z, `${a} then ${z}: ${z} written${rank(z) === rank(a) ? ' (equal rank: the last writer wins)' : ''}`);
          t.same(result, { written: true });
        }
      }
      t.ok(backward > 0, `${backward} backward pairs tried`);
      t.equal(refused.length, backward, 'each refusal told to the store owner (logged and counted)');
      t.ok(
        refused.every((r) => r.rank < r.storedRank),
        'each told with both ranks',
      );
    });

    t.test(`${b.name}: ${kind.collection}: the same inside atomically (a batch's members written with their batch)`, async (t) => {
      const refused: Refused[] = [];
      const store = await b.open(refused);
      t.teardown(() => store.close());
      const records = store.collection(kind.collection);
      const pairs = states.flatMap((a) => states.map((z) => [a, z] as const));
      const key = (a: string, z: string) => `${b.name}|atomic|${a}->${z}`;
      await store.atomically(() => {
        for (const [a, z] of pairs) records.putWithin(key(a, z), kind.record(key(a, z), a));
      });
      await store.atomically(() => {
        for (const [a, z] of pairs) records.putWithin(key(a, z), kind.record(key(a, z), z));
      });
      let wrong = 0;
      for (const [a, z] of pairs) if (stateOf(await records.get(key(a, z))) !== (rank(z) < rank(a) ? a : z)) wrong++;
      t.equal(wrong, 0, `every one of ${pairs.length} pairs: backward refused, the others written, in one transaction`);
      await new Promise((r) => setImmediate(r));
      t.equal(refused.length, pairs.filter(([a, z]) => rank(z) < rank(a)).length, 'each refusal told');
    });
  }

  t.test(`${b.name}: a longer trail is newer whatever its state; a finished record is never overwritten by an unfinished one; another attempt is not compared`, async (t) => {
    const store = await b.open([]);
    t.teardown(() => store.close());
    const payments = store.collection<PaymentRecord>('payments');
    const tx = { hash: '0x01' } as unknown as PaymentRecord['txs'][number];
    const p = payment('trail', 'reconciling');
    await payments.put('trail', { ...p, txs: [tx] });
    t.match(await payments.putIfNewer('trail', { ...p, state: 'inFlight', txs: [tx] }), { written: false }, 'inFlight after reconciling, same trail: refused');
    t.same(await payments.putIfNewer('trail', { ...p, state: 'inFlight', txs: [tx, { ...tx, hash: '0x02' }] }), { written: true }, 'with a replacement signed since: written');
    await payments.put('trail', { ...p, state: 'settled', txs: [tx] });
    t.match(await payments.putIfNewer('trail', { ...p, state: 'inFlight', txs: [tx, tx, tx] }), { written: false }, 'settled stays settled, whatever trail a late write carries');
    t.same(await payments.putIfNewer('trail', { ...p, attempt: 'a2', state: 'claiming' }), { written: true }, 'a new attempt on the nonce (its claim won) is written');
    const unordered = store.collection<{ state: string }>('paid-requests');
    await unordered.put('u', { state: 'settled' });
    t.same(await unordered.putIfNewer('u', { state: 'claiming' }), { written: true }, 'a collection without a rank is written as before');
  });
}
