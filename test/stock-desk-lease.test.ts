// The desk lease on real PostgreSQL leases: of three nodes' desks, the first takes it and starts once; the others
// stand by; when the holder stops renewing (it died), exactly one standby takes it over and starts its desk once; a
// holder whose lease was taken away meanwhile (it was paused) is told it lost it; a desk that fails to start gives
// the lease back for another to take. Expiry is forced by the database's clock, never by sleeping past a term.
import { readFileSync } from 'node:fs';
import t from 'tap';
import { createLogger } from '../src/log/logger.ts';
import { DeskLease } from '../src/stock/desk-lease.ts';
import { deskLease, Leases, LEASES_TABLE } from '../src/store/postgres/leases.ts';
import { until } from './helpers/paid-gateway.ts';
import { startPostgres, testPool } from './helpers/postgres.ts';

const db = await startPostgres();
const pool = testPool(db.url, 10);
t.teardown(async () => {
  await pool.end();
  await db.stop();
});
// The lease migrations as shipped.
for (const m of ['050-cluster-leases.sql', '060-lease-epochs.sql']) await pool.query(readFileSync(new URL(`../src/store/postgres/migrations/${m}`, import.meta.url), 'utf8'));
const log = createLogger('test', { level: 'error' });
// A long term: nothing expires by itself while a loaded machine is slow; the tests expire it in the database.
const TERM_MS = 60_000;
const expire = (name: string) => pool.query(`UPDATE ${LEASES_TABLE} SET expires_at = clock_timestamp() - interval '1 millisecond' WHERE name = $1`, [name]);
const holderOf = async (name: string) => (await pool.query<{ node: string }>(`SELECT node FROM ${LEASES_TABLE} WHERE name = $1 AND expires_at > clock_timestamp()`, [name])).rows[0]?.node;

function desk(node: string, name: string, activate: () => Promise<void> = async () => {}) {
  const events = { activated: 0, lost: [] as string[] };
  const lease = new DeskLease({
    leases: new Leases(pool, { node, boot: `${node}-boot` }, { leaseMs: TERM_MS, timeoutMs: 5000 }),
    name,
    // Ticks every third of the term: 20 s, so each test drives its ticks by calling start() (one try) itself.
    termMs: TERM_MS,
    activate: async () => {
      events.activated += 1;
      await activate();
    },
    onLost: (why) => events.lost.push(why),
    log,
  });
  const tick = async () => {
    await lease.start();
    await lease.settled();
  };
  return { lease, events, tick };
}

t.test('one desk runs; when its holder dies, exactly one standby takes it over and starts once', async (t) => {
  const name = deskLease('0x00000000000000000000000000000000000000d1');
  const [a, b, c] = [desk('a', name), desk('b', name), desk('c', name)];
  t.teardown(() => Promise.all([a, b, c].map((d) => d.lease.stop())));
  await a.tick();
  await Promise.all([b.tick(), c.tick()]);
  t.same([a.lease.active, b.lease.active, c.lease.active], [true, false, false], 'the first runs the desk; the others stand by');
  t.equal(await holderOf(name), 'a');
  // a dies: it renews no more, and its lease expires.
  await a.lease.stop();
  await expire(name);
  await Promise.all([b.tick(), c.tick(), b.tick(), c.tick()]);
  t.equal([b, c].filter((d) => d.lease.active).length, 1, 'exactly one standby runs the desk now');
  t.equal(b.events.activated + c.events.activated, 1, 'and started it once');
  t.equal(await holderOf(name), b.lease.active ? 'b' : 'c', 'the lease names it');
});

t.test('a holder whose lease was taken while it was paused learns it lost it, and runs the desk no more', async (t) => {
  const name = deskLease('0x00000000000000000000000000000000000000d2');
  const [a, b] = [desk('a', name), desk('b', name)];
  t.teardown(() => Promise.all([a, b].map((d) => d.lease.stop())));
  await a.tick();
  await expire(name); // a paused past its term
  await b.tick();
  t.ok(b.lease.active, 'b took the expired lease');
  await a.tick(); // a resumes: its renewal finds the lease gone
  t.equal(a.events.lost.length, 1, 'a is told it lost the lease');
  t.notOk(a.lease.active, 'and runs the desk no more');
  t.equal(await holderOf(name), 'b');
});

t.test('a desk that cannot start gives the lease back; another takes it', async (t) => {
  const name = deskLease('0x00000000000000000000000000000000000000d3');
  const a = desk('a', name, async () => {
    throw new Error('the chain does not answer');
  });
  const b = desk('b', name);
  t.teardown(() => Promise.all([a, b].map((d) => d.lease.stop())));
  await a.tick();
  t.notOk(a.lease.active, 'a does not run the desk');
  await until(async () => (await holderOf(name)) === undefined, 'the lease to be given back', 10_000);
  await b.tick();
  t.ok(b.lease.active, 'b runs it');
});
