// Two `gate402 gateway` nodes over one embedded PostgreSQL on the devnet, each starting its own fixture upstreams
// (no GATE402_CATALOG_UPSTREAM_BASE) and allowlisting nothing of the other's: the built-in catalog is seeded once,
// identically (the second node writes nothing), and a paid request to /m/catjoke/joke answers 200 at either node
// (each answers it from its own fixture server). A merchant whose upstream one node's guard refuses is refused at
// that node before anyone pays: no 402, a credential presented anyway is not settled, the upstream never called.
import t from 'tap';
import { parseUnits } from 'viem';
import { CAIP2 } from '../src/chain/canonical.ts';
import { startFixtureUpstreams } from '../src/devnet/fixtures/server.ts';
import { MERCHANT_VERSION_CLAIMS } from '../src/gateway/merchants/merchant-records.ts';
import { network, tester, testDevnet } from './helpers/devnet.ts';
import { registerOwnMerchant, spawnPaidGateway, x402Credential, type PaidGateway } from './helpers/paid-gateway.ts';
import { fundedPayer, stableBalance } from './helpers/payments.ts';
import { startPostgres, testPool } from './helpers/postgres.ts';

const manifest = testDevnet();
const caip2 = CAIP2.stockChain;
const n = network(manifest, caip2);
const db = await startPostgres();
t.teardown(() => db.stop());
const sql = testPool(db.url, 2);
t.teardown(() => sql.end());
// Each node's own fixture upstreams, and an allowlist that differs: node 1 allows the loopback, node 2 nothing.
const node = (id: string, allowlist: string) => ({
  GATE402_STORE_URL: db.url,
  GATE402_NODE_ID: id,
  GATE402_CATALOG_UPSTREAM_BASE: '',
  GATE402_UPSTREAM_ALLOWLIST: allowlist,
});
const nodes: PaidGateway[] = [];
for (const [id, allowlist] of [
  ['c1', '127.0.0.1'],
  ['c2', ''],
] as const) {
  const gw = await spawnPaidGateway(manifest, 'http://unused.invalid', node(id, allowlist));
  t.teardown(() => gw.gw.stop());
  nodes.push(gw);
}
const [a, b] = nodes as [PaidGateway, PaidGateway];
const payer = await fundedPayer(n, caip2, tester('clusterCatalog'), parseUnits('1', 6));

t.test('the built-in catalog is seeded once, identically: the second node writes nothing', async (t) => {
  const rows = await sql.query<{ key: string; upstream: { kind: string; name?: string } }>(
    "SELECT key, value->'merchant'->'upstream' AS upstream FROM records WHERE collection = 'merchants' AND key IN ('catjoke', 'chain-stocks') ORDER BY key",
  );
  t.same(
    rows.rows.map((r) => [r.key, r.upstream]),
    [
      ['catjoke', { kind: 'internal', name: 'fixtures/catjoke' }],
      ['chain-stocks', { kind: 'internal', name: 'stock-data' }],
    ],
    'the records name no node’s address, and chain-stocks does not depend on who started first',
  );
  const written = await sql.query<{ n: string }>("SELECT count(*) AS n FROM claims WHERE space = $1 AND key LIKE '%#2'", [`claims:${MERCHANT_VERSION_CLAIMS}`]);
  t.equal(Number(written.rows[0]?.n), 0, 'no built-in merchant was written twice');
  const firsts = await sql.query<{ n: string }>("SELECT count(*) AS n FROM claims WHERE space = $1 AND key LIKE '%#1'", [`claims:${MERCHANT_VERSION_CLAIMS}`]);
  t.ok(Number(firsts.rows[0]?.n) >= 2, 'each was written once');
});

t.test('a paid request to /m/catjoke/joke answers 200 through either node', async (t) => {
  const before = await stableBalance(n, payer.address);
  for (const gw of [a, b]) {
    const url = `${gw.gw.url}/m/catjoke/joke`;
    const credential = await x402Credential(url, payer, caip2);
    const res = await fetch(url, { headers: { 'payment-signature': credential } });
    t.equal(res.status, 200, `${gw.gw.url}: ${(await res.clone().text()).slice(0, 200)}`);
  }
  t.equal(await stableBalance(n, payer.address), before - 2n * 10_000n, 'two answers, two charges');
});

t.test('an upstream a node’s guard refuses is refused there before anyone pays', async (t) => {
  const own = await startFixtureUpstreams({ host: '127.0.0.1', port: 0 });
  t.teardown(() => own.close());
  // Registered at node 1, which allows the loopback; node 2 does not.
  const { slug } = await registerOwnMerchant(a.gw.url, new URL(own.baseUrlFor('x')).origin, { slug: 'guarded-shop', priceUsd: '0.010000', networks: [caip2] });
  const url = (gw: PaidGateway) => `${gw.gw.url}/m/${slug}/data`;
  const unpaid = await fetch(url(b));
  t.equal(unpaid.status, 503, 'node 2 offers no 402 for it');
  t.match(await unpaid.json(), { error: /unavailable: its upstream is not reachable from this gateway; nothing was charged/ });
  const before = await stableBalance(n, payer.address);
  const calls = own.calls;
  const credential = await x402Credential(url(a), payer, caip2).catch(() => undefined);
  t.ok(credential, 'a credential made against node 1’s 402');
  const paid = await fetch(url(b), { headers: { 'payment-signature': credential as string } });
  t.equal(paid.status, 503, 'presented at node 2: refused');
  t.equal(own.calls, calls, 'the upstream was never called');
  t.equal(await stableBalance(n, payer.address), before, 'and nothing was charged');
});
