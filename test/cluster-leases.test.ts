import { readFileSync } from 'node:fs';
import t from 'tap';
import { Membership } from '../src/cluster/membership.ts';
import { createLogger } from '../src/log/logger.ts';
import { Leases, LEASES_TABLE, relayerLease } from '../src/store/postgres/leases.ts';
import { ChangeListener, LISTENER_APPLICATION, notify } from '../src/store/postgres/notifications.ts';
import { startPostgres, testPool } from './helpers/postgres.ts';

// One database for the file; each test takes lease names of its own.
const db = await startPostgres();
const pool = testPool(db.url, 20);
t.teardown(async () => {
  await pool.end();
  await db.stop();
});
// The migration as shipped.
for (const m of ['050-cluster-leases.sql', '060-lease-epochs.sql']) await pool.query(readFileSync(new URL(`../src/store/postgres/migrations/${m}`, import.meta.url), 'utf8'));
const log = createLogger('test', { level: 'error' });
// Terms of a minute: a lease here expires only when a test moves its expiry by the database's clock, never because a
// loaded machine took longer than a short term between two statements (a 300 ms term lapsed between a take and the
// refusal the test expected, with two suites sharing the machine).
const leases = (node: string, boot = `${node}-boot`, leaseMs = 60_000) => new Leases(pool, { node, boot }, { leaseMs, timeoutMs: 2000 });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test('a live lease is refused to another node, with its holder named; expired, exactly one of many takers gets it', async (t) => {
  const name = relayerLease('0xAbC0000000000000000000000000000000000001');
  const a = leases('a');
  t.ok((await a.take(name)).ok, 'a takes the free lease');
  t.ok((await a.take(name)).ok, 'and again (it is its own)');
  const refused = await leases('b').take(name);
  t.notOk(refused.ok, 'b is refused while a holds it');
  if (!refused.ok) {
    t.equal(refused.error.holder.node, 'a', 'the refusal names the holder');
    t.ok(refused.error.expiresInMs > 0 && refused.error.expiresInMs <= 60_000, 'and how long it has left');
    t.match(refused.error.message, /held by node a/);
  }
  const restarted = await leases('a', 'a-boot-2').take(name);
  t.notOk(restarted.ok, "a restart of a (a new boot) waits for the old boot's lease too");
  // Expired by the database's clock, not by sleeping past the term; the takers' own term is long, so the winner's
  // lease cannot run out while the other nine statements are still queued on a loaded machine (with a 300 ms term
  // it did, and a second taker then took the lease the first had let lapse: correct, but not what this checks).
  await pool.query(`UPDATE ${LEASES_TABLE} SET expires_at = clock_timestamp() - interval '1 millisecond' WHERE name = $1`, [name]);
  const takers = Array.from({ length: 10 }, (_, i) => leases(`n${i}`, `n${i}-boot`));
  const results = await Promise.all(takers.map((l) => l.take(name)));
  t.equal(results.filter((r) => r.ok).length, 1, 'of ten nodes taking the expired lease at once, one gets it');
  const row = await a.read(name);
  const winner = takers.findIndex((_, i) => results[i]?.ok);
  t.equal(row?.node, `n${winner}`, 'the row names the winner');
});

t.test('renewal keeps a lease past its term; a lease taken away is missing from the renewal', async (t) => {
  const a = leases('ra');
  t.ok((await a.takeAll(['x:1', 'x:2'])).ok);
  for (let i = 0; i < 4; i++) {
    // Most of the term has passed (by the database's clock): the renewal must give a full term back.
    await pool.query(`UPDATE ${LEASES_TABLE} SET expires_at = clock_timestamp() + interval '100 milliseconds' WHERE name IN ('x:1', 'x:2')`);
    t.same([...(await a.renew())].sort(), ['x:1', 'x:2'], `renewal ${i + 1} holds both`);
    const left = await a.read('x:1');
    t.ok((left?.expiresInMs ?? 0) > 30_000, `renewal ${i + 1} extends the lease by a full term`);
  }
  t.notOk((await leases('rb').take('x:1')).ok, 'still refused to others after four terms of renewals');
  await pool.query(`UPDATE ${LEASES_TABLE} SET expires_at = clock_timestamp() - interval '1 second' WHERE name = 'x:2'`);
  t.ok((await leases('rb').take('x:2')).ok, 'expired, another node takes it');
  t.same([...(await a.renew())], ['x:1'], 'the renewal no longer holds it: the holder learns it lost it');
});

t.test('takeAll takes all or none', async (t) => {
  t.ok((await leases('ta').take('y:2')).ok);
  const b = leases('tb');
  t.notOk((await b.takeAll(['y:1', 'y:2', 'y:3'])).ok, 'refused on y:2');
  t.equal(await b.read('y:1'), undefined, 'y:1, taken on the way, was given back');
  await leases('ta').release(['y:2']);
  t.ok((await b.takeAll(['y:1', 'y:2'])).ok, 'released, it is free at once');
});

t.test('a change is heard on every listener; a listener whose connection is killed reconnects and resyncs', async (t) => {
  const heard: string[][] = [[], []];
  const resyncs = [0, 0];
  const listeners = [0, 1].map(() => new ChangeListener({ url: db.url, log, timeoutMs: 1000, checkMs: 200 }));
  t.teardown(() => Promise.all(listeners.map((l) => l.stop())));
  for (const [i, l] of listeners.entries()) {
    await l.start();
    await l.subscribe('merchants', { changed: (p) => heard[i]?.push(p), resync: () => (resyncs[i] = (resyncs[i] ?? 0) + 1) });
  }
  const sent = performance.now();
  await notify(pool, 'merchants', 'catjoke', 1000);
  while ((heard[0]?.length ?? 0) + (heard[1]?.length ?? 0) < 2 && performance.now() - sent < 10_000) await sleep(5);
  t.same(heard, [['catjoke'], ['catjoke']], 'both listeners heard the change');

  // The server ends the first listener's session (as a restart or a network cut would).
  await pool.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, [LISTENER_APPLICATION]);
  const until = performance.now() + 10_000;
  while ((resyncs[0] ?? 0) + (resyncs[1] ?? 0) < 2 && performance.now() < until) await sleep(20);
  t.same(resyncs, [1, 1], 'each listener reconnected once and told its subscriber to reload');
  await notify(pool, 'merchants', 'weather', 1000);
  const again = performance.now();
  while ((heard[0]?.length ?? 0) + (heard[1]?.length ?? 0) < 4 && performance.now() - again < 10_000) await sleep(5);
  t.same(
    heard,
    [
      ['catjoke', 'weather'],
      ['catjoke', 'weather'],
    ],
    'and hears changes again',
  );
});

t.test('a node joins with all its leases or refuses, naming the holder; a stopped node is taken over by one survivor', async (t) => {
  // A term of 3 s (a tick every second): long enough that a loaded machine's late timer cannot cost a node its lease
  // (with 400 ms terms a survivor's renewal could come late and a second survivor adopt the same node).
  const config = (nodeId: string) => ({ nodeId, leaseMs: 3000, takeover: true, timeoutMs: 1000 });
  const lost: string[] = [];
  const join = (nodeId: string, keys: string[], boot = `${nodeId}-${Math.random()}`) =>
    Membership.join({ db: pool, config: config(nodeId), boot, leases: keys.map(relayerLease), log, onLost: (why) => lost.push(`${nodeId}: ${why}`) });
  const keyA = '0x00000000000000000000000000000000000000a1';
  const a = await join('m-a', [keyA], 'm-a-boot');
  await t.rejects(join('m-b', [keyA]), /relayer:0x0+a1 is held by node m-a .*another live node uses it/, 'a second node on the same key is refused, the holder named');
  t.equal(await leases('probe').read('node:m-b'), undefined, 'the refused node left no lease of its own behind');
  const adopted: string[][] = [[], []];
  const survivors = [await join('m-s1', []), await join('m-s2', [])];
  for (const [i, s] of survivors.entries()) s.takeOverWith(async (node) => void adopted[i]?.push(node));
  t.teardown(() => Promise.all(survivors.map((s) => s.stop())));
  t.equal(await survivors[0]?.live('m-a-boot'), true, "m-a's run is live to the others");
  t.equal(await survivors[0]?.live('some-dead-boot'), false, 'a run no lease names is not');
  // m-a stops: its key lease is given back, its node lease expired for another node to finish its records.
  await a.stop();
  const until = performance.now() + 15_000;
  while (adopted.flat().length === 0 && performance.now() < until) await sleep(50);
  // Longer than a tick: the other survivor has looked at least once since.
  await sleep(1500);
  t.same(adopted.flat(), ['m-a'], "exactly one survivor took m-a's records over");
  t.equal(await survivors[1]?.live('m-a-boot'), false, "m-a's run is no longer live");
  const b = await join('m-b', [keyA]);
  t.ok(b.held.has(relayerLease(keyA)), "m-a's key is free for another node");
  await b.stop();
  t.same(lost, [], 'no node lost a lease of its own');
});
