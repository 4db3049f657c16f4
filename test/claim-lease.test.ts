// The channel claimer's lease on a real (embedded) PostgreSQL store: of two nodes, the first runs the claimer and
// tells the other on which networks it claims (the standby takes vouchers there, and only there); when the holder
// pauses past its term, the standby takes the lease over and starts its claimer, and from then on every write the
// paused holder makes with the claim lease is refused by the database (fenced by the lease's epoch), its signing is
// refused once it learns it, and its claimer is stopped. Expiry is forced by the database's clock, never by sleeping.
import t from 'tap';
import { CLAIM_LEASE, CLAIMER_WORD, ClaimRole, type ClaimerWord, type ClaimFence } from '../src/channels/claim-lease.ts';
import { createLogger } from '../src/log/logger.ts';
import { isFenced } from '../src/store/fence.ts';
import { openStore } from '../src/store/open-store.ts';
import { Leases, LEASES_TABLE } from '../src/store/postgres/leases.ts';
import { startPostgres, testPool } from './helpers/postgres.ts';

const db = await startPostgres();
const store = await openStore({ url: db.url } as never);
const pool = testPool(db.url, 4);
t.teardown(async () => {
  await pool.end();
  await store.close();
  await db.stop();
});
const log = createLogger('test', { level: 'error' });
// A long term: nothing expires by itself while a loaded machine is slow; the test expires it in the database.
const TERM_MS = 60_000;
const BASE = 'eip155:8453';
const OTHER = 'eip155:84532';
const expire = () => pool.query(`UPDATE ${LEASES_TABLE} SET expires_at = clock_timestamp() - interval '1 millisecond' WHERE name = $1`, [CLAIM_LEASE]);
const holder = async () => (await pool.query<{ node: string }>(`SELECT node FROM ${LEASES_TABLE} WHERE name = $1 AND expires_at > clock_timestamp()`, [CLAIM_LEASE])).rows[0]?.node;

/** A node's claim role; its claimer claims on BASE alone, and is counted started and stopped. */
function node(name: string) {
  const seen = { started: 0, stopped: 0, lost: [] as string[], fence: undefined as ClaimFence | undefined };
  const role = new ClaimRole({
    leases: new Leases(pool, { node: name, boot: `${name}-boot` }, { leaseMs: TERM_MS, timeoutMs: 5000 }),
    termMs: TERM_MS,
    node: name,
    networks: [BASE, OTHER],
    word: (fence) => store.collection<ClaimerWord>(CLAIMER_WORD, { fence }),
    start: async (lease) => {
      seen.started += 1;
      seen.fence = lease;
      return {
        claiming: (network) => network === BASE,
        stop: async () => {
          seen.stopped += 1;
        },
      };
    },
    onLost: (why) => seen.lost.push(why),
    log,
  });
  t.teardown(() => role.stop());
  // Ticks every third of the term (20 s): each test drives a tick by calling start() (one try) itself.
  return { role, seen, tick: () => role.start() };
}

t.test('one claimer; the standby takes vouchers where the holder says it claims; a paused holder is fenced out', async (t) => {
  const a = node('a');
  const b = node('b');
  await a.tick();
  await b.tick();
  t.same([a.role.active, b.role.active], [true, false], 'the first node runs the claimer; the second stands by');
  t.equal(await holder(), 'a', 'the lease names it');
  t.same([a.seen.started, b.seen.started], [1, 0], 'one claimer started');
  t.same([b.role.claiming(BASE), b.role.claiming(OTHER)], [true, false], 'the standby takes vouchers where the holder claims, and nowhere else');
  t.equal((await store.collection<ClaimerWord>(CLAIMER_WORD).get('holder'))?.node, 'a', "the holder's word names it");

  const probe = (fence: ClaimFence | undefined) => store.collection<number>('claim-lease-probe', { fence: fence?.fence as never });
  await probe(a.seen.fence).put('k', 1);
  t.equal(await store.collection<number>('claim-lease-probe').get('k'), 1, "the holder's fenced write lands");

  // a pauses past its term: b takes the lease over and starts its claimer.
  await expire();
  await b.tick();
  t.ok(b.role.active, 'the standby took the expired lease and runs the claimer');
  t.equal(await holder(), 'b', 'the lease names the new holder');
  t.equal(b.seen.started, 1, 'its claimer started once');
  // a wakes up and writes before any renewal tells it anything: the database refuses.
  const stale = await probe(a.seen.fence)
    .put('k', 2)
    .then(
      () => undefined,
      (error: unknown) => error,
    );
  t.ok(isFenced(stale), `the paused holder's write is refused: ${String(stale)}`);
  await probe(b.seen.fence).put('k', 3);
  t.equal(await store.collection<number>('claim-lease-probe').get('k'), 3, "only the new holder's writes land");
  // Its renewal tick finds the lease gone: it stops its claimer and signs nothing more.
  await a.tick();
  t.equal(a.seen.lost.length, 1, 'the paused holder learns it lost the lease');
  t.equal(a.seen.stopped, 1, 'its claimer is stopped');
  t.match(a.seen.fence?.signing(), /fenced/, 'and its signing is refused');
  t.notOk(a.role.active, 'it runs the claimer no more');
  t.equal(b.seen.fence?.signing(), undefined, 'the new holder signs');
  await a.tick();
  t.same([a.role.claiming(BASE), a.role.claiming(OTHER)], [true, false], 'standing by, it takes vouchers where the new holder claims');
});
