// Fencing on an embedded PostgreSQL. A write carrying a lease epoch that was taken over is refused in its own
// statement (`fenced`), and a take waits for the writes that passed the fence. Then two `gate402 gateway` nodes: one
// is SIGSTOPped with its settlements signed and stored but not yet sent, for more than two lease terms; the survivor
// adopts them and settles each once; the paused node, resumed, sends nothing more and logs that it was fenced.
import t from 'tap';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseUnits } from 'viem';
import { CAIP2 } from '../src/chain/canonical.ts';
import { startFixtureUpstreams } from '../src/devnet/fixtures/server.ts';
import { type FenceSource, isFenced, type LeaseToken } from '../src/store/fence.ts';
import { openLmdbStore } from '../src/store/lmdb/open-lmdb-store.ts';
import { openStore } from '../src/store/open-store.ts';
import { Leases, LEASES_TABLE, nodeLease } from '../src/store/postgres/leases.ts';
import { fenceCte } from '../src/store/postgres/record-writes.ts';
import { network, tester, testDevnet, TEST_MANIFEST_PATH } from './helpers/devnet.ts';
import { relayerTxCount, spawnPaidGateway, until, x402Credential } from './helpers/paid-gateway.ts';
import { fundedPayer, stableBalance } from './helpers/payments.ts';
import { startPostgres, testPool } from './helpers/postgres.ts';
import { startRpcGate } from './helpers/rpc-gate.ts';
import { tempDir } from './helpers/temp-dir.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test('a write whose lease epoch was taken over is refused in its own statement, as fenced', async (t) => {
  const db = await startPostgres();
  t.teardown(() => db.stop());
  let lease: LeaseToken | undefined;
  const fence: FenceSource = () => lease;
  const store = await openStore({ dataDir: '/nonexistent', url: db.url }, { poolSize: 4 });
  t.teardown(() => store.close());
  store.fence(fence);
  const pool = testPool(db.url, 4);
  t.teardown(() => pool.end());
  const name = nodeLease('fa');
  const a = new Leases(pool, { node: 'fa', boot: 'fa-boot' }, { leaseMs: 60_000, timeoutMs: 5000 });
  const b = new Leases(pool, { node: 'fb', boot: 'fb-boot' }, { leaseMs: 60_000, timeoutMs: 5000 });
  const takenA = await a.take(name);
  if (!takenA.ok) throw new Error('a could not take its lease');
  t.same(await a.take(name), takenA, "taking its own lease again keeps a's epoch");
  lease = { name, epoch: takenA.value.epoch };
  const payments = store.collection<{ state: string }>('payments');
  await payments.put('p', { state: 'inFlight' });
  t.same((await store.nonces.claim('n1', 'x')).claimed, true, 'while the lease is live at its epoch, writes and claims pass');

  // A pauses: its lease expires by the database's clock, and B takes it (a new epoch).
  await pool.query(`UPDATE ${LEASES_TABLE} SET expires_at = clock_timestamp() - interval '1 millisecond' WHERE name = $1`, [name]);
  await t.rejects(payments.put('p', { state: 'settled' }), { code: 'fenced' }, 'expired (not yet taken): the write is refused');
  const takenB = await b.take(name);
  t.ok(takenB.ok && takenB.value.epoch > takenA.value.epoch, 'B takes it at a higher epoch');
  if (!takenB.ok) return;
  // A, resumed, still believes it holds the lease: every kind of write fails, naming the lease, and nothing lands.
  const refused = await Promise.allSettled([
    payments.put('p', { state: 'settled' }),
    payments.putIfNewer('p', { state: 'settled' }),
    payments.remove('p'),
    store.nonces.claim('n2', 'x'),
    store.nonces.claim('n3', 'x', () => payments.putWithin('q', { state: 'claiming' })),
    store.nonces.release('n1', 'x'),
    store.nonces.takeover('n1', 'x', 'y'),
    store.atomically(() => payments.putWithin('r', { state: 'sent' })),
  ]);
  t.same(
    refused.map((r) => r.status === 'rejected' && isFenced(r.reason)),
    refused.map(() => true),
    'put, putIfNewer, remove, claim (with and without its writes), release, takeover and atomically: each fails as fenced',
  );
  t.match((refused[0] as PromiseRejectedResult).reason.message, /fenced: the lease node:fa/, 'the error names the lease');
  t.same(await payments.get('p'), { state: 'inFlight' }, "the record stays as A's last live write left it");
  t.same(
    [await payments.get('q'), await payments.get('r'), await store.nonces.holder('n2'), await store.nonces.holder('n1')],
    [undefined, undefined, undefined, 'x'],
    'no claim or record of the fenced writes',
  );
  // B, with its own grant, writes.
  lease = { name, epoch: takenB.value.epoch };
  await payments.put('p', { state: 'settled' });
  t.same(await payments.get('p'), { state: 'settled' }, "the new holder's write passes");

  // A take waits for a write that passed the fence: it holds the lease row until it commits.
  const writer = await pool.connect();
  try {
    await writer.query('BEGIN');
    t.equal((await writer.query(`WITH ${fenceCte(1)} SELECT count(*)::int AS n FROM fence`, [name, takenB.value.epoch])).rows[0]?.n, 1, "a write passes B's fence");
    await pool.query(`UPDATE ${LEASES_TABLE} SET expires_at = clock_timestamp() - interval '1 millisecond' WHERE name = $1`, [name]);
    let tookAt: number | undefined;
    const take = a.take(name).then((r) => {
      tookAt = performance.now();
      return r;
    });
    await sleep(300);
    t.equal(tookAt, undefined, 'the expired lease is not taken while that write is under way');
    await writer.query('COMMIT');
    t.ok((await take).ok, 'and is taken once it committed');
  } finally {
    writer.release();
  }
});

t.test('LMDB: one node alone; its fence is no fence, every write passes', async (t) => {
  const store = openLmdbStore(tempDir('fence-lmdb'));
  t.teardown(() => store.close());
  store.fence(() => ({ name: 'node:gone', epoch: 1 }));
  await store.collection('payments').put('p', { state: 'settled' });
  t.same(await store.nonces.claim('n', 'x'), { claimed: true });
  t.same(await store.collection('payments').get('p'), { state: 'settled' });
});

t.test('a node paused past its lease mid-settlement: the survivor settles its payments once; resumed, it sends nothing and says it was fenced', async (t) => {
  const manifest = testDevnet();
  const caip2 = CAIP2.stockChain;
  const n = network(manifest, caip2);
  const db = await startPostgres();
  t.teardown(() => db.stop());
  const fixtures = await startFixtureUpstreams({ host: '127.0.0.1', port: 0 });
  t.teardown(() => fixtures.close());
  const upstream = new URL(fixtures.baseUrlFor('catjoke')).origin;
  const leaseMs = 2000;
  const cluster = (node: string) => ({ GATE402_STORE_URL: db.url, GATE402_NODE_ID: node, GATE402_LEASE_MS: String(leaseMs), GATE402_CONFIRM_DEADLINE_MS: '100' });
  // The paused node reaches the chain through a gate that holds what it sends: its settlements are signed and stored,
  // not yet on chain, when it stops.
  const gate = await startRpcGate(n.rpcUrl);
  t.teardown(() => gate.close());
  const dir = tempDir('fencing-manifest');
  const gated = JSON.parse(readFileSync(TEST_MANIFEST_PATH, 'utf8'));
  gated.networks[caip2].rpcUrl = gate.url;
  writeFileSync(join(dir, 'manifest.json'), JSON.stringify(gated));
  const survivor = await spawnPaidGateway(manifest, upstream, cluster('fs'));
  t.teardown(() => survivor.gw.stop());
  const paused = await spawnPaidGateway(manifest, upstream, cluster('fp'), { manifestPath: join(dir, 'manifest.json') });
  t.teardown(async () => {
    paused.gw.child.kill('SIGCONT');
    await paused.gw.stop('SIGKILL');
  });
  const joke = (url: string) => `${url}/m/catjoke/joke`;
  const price = 10_000n;
  const payers = [];
  for (let i = 0; i < 3; i++) payers.push(await fundedPayer(n, caip2, tester('clusterFencing'), parseUnits('1', 6)));
  const before = await Promise.all(payers.map((p) => stableBalance(n, p.address)));
  const credentials = await Promise.all(payers.map((p) => x402Credential(joke(paused.gw.url), p, caip2)));
  const calls = fixtures.calls;
  const pausedSentBefore = await relayerTxCount(n, paused.relayers);

  gate.hold((call) => call.method === 'eth_sendRawTransaction');
  for (const c of credentials) void fetch(joke(paused.gw.url), { headers: { 'payment-signature': c } }).catch(() => {});
  await until(() => gate.held > 0, 'the node to send a signed settlement', 30_000);
  await sleep(500); // the others sign too, or wait their turn in a batch: every stage is somewhere in flight
  paused.gw.child.kill('SIGSTOP');
  const stoppedAt = performance.now();
  t.teardown(() => void paused.gw.child.kill('SIGCONT'));

  // The survivor takes the paused node's lease once it expires, re-sends what it signed, finishes the rest.
  const served: number[] = [];
  for (const c of credentials) {
    let status = 0;
    await until(
      async () => {
        status = (await fetch(joke(survivor.gw.url), { headers: { 'payment-signature': c } })).status;
        return status === 200;
      },
      'the survivor to settle and serve a payment of the paused node',
      90_000,
    );
    served.push(status);
  }
  t.same(served, [200, 200, 200], 'the survivor serves every payment the paused node had in flight');
  t.same(
    await Promise.all(payers.map((p) => stableBalance(n, p.address))),
    before.map((b) => b - price),
    'each payer charged exactly once',
  );
  t.equal(fixtures.calls, calls + 3, 'the upstream called once per payment');
  await sleep(Math.max(0, 2 * leaseMs - (performance.now() - stoppedAt)) + 200); // paused for more than two terms
  const pausedSent = await relayerTxCount(n, paused.relayers);
  t.ok(pausedSent > pausedSentBefore, `what the paused node signed went out, re-sent by the survivor (${pausedSent - pausedSentBefore} transaction(s))`);

  // Resumed, with its sends no longer held: whatever it still had in flight meets a taken lease.
  gate.release();
  paused.gw.child.kill('SIGCONT');
  // A new payment offered to it now must not be signed for either.
  const late = await fundedPayer(n, caip2, tester('clusterFencing'), parseUnits('1', 6));
  const lateBefore = await stableBalance(n, late.address);
  const lateCredential = await x402Credential(joke(survivor.gw.url), late, caip2).catch(() => undefined);
  if (lateCredential) await fetch(joke(paused.gw.url), { headers: { 'payment-signature': lateCredential } }).catch(() => undefined);
  await until(() => /fenced/.test(readFileSync(paused.gw.logPath, 'utf8')), 'the resumed node to log that it was fenced', 30_000);
  await sleep(3 * leaseMs); // several renewal ticks and receipt polls of the resumed node
  const log = readFileSync(paused.gw.logPath, 'utf8');
  for (const line of log
    .split('\n')
    .filter((l) => /fenced/.test(l))
    .slice(0, 6))
    t.comment(line.slice(0, 300));
  t.ok(
    log.split('\n').some((line) => /fenced/.test(line) && line.includes('node:fp')),
    'its log says it was fenced, naming its lease',
  );
  t.equal(await relayerTxCount(n, paused.relayers), pausedSent, 'its relayers sent nothing after it resumed');
  t.equal(await stableBalance(n, late.address), lateBefore, 'a payment offered to it after it resumed was not settled by it');
  t.same(
    await Promise.all(payers.map((p) => stableBalance(n, p.address))),
    before.map((b) => b - price),
    'and no payment was charged twice',
  );
  t.equal(fixtures.calls, calls + 3, 'nor served twice');
});
