// `gate402 gateway` with GATE402_STORE_URL: a buyer pays with @x402/fetch, and what a gateway must remember of that
// payment (its settlement, its nonce, that it was served, the paid request) is in PostgreSQL, none of it in the data
// directory. A second gateway on the same database, with a data directory of its own, refuses the spent credential.
import t from 'tap';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { x402Client } from '@x402/core/client';
import { decodePaymentResponseHeader } from '@x402/core/http';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import pg from 'pg';
import { parseUnits } from 'viem';
import { CAIP2 } from '../src/chain/canonical.ts';
import { startFixtureUpstreams } from '../src/devnet/fixtures/server.ts';
import { network, tester, testDevnet } from './helpers/devnet.ts';
import { spawnPaidGateway } from './helpers/paid-gateway.ts';
import { fundedPayer, stableBalance } from './helpers/payments.ts';
import { startPostgres } from './helpers/postgres.ts';

const manifest = testDevnet();
const db = await startPostgres();
t.teardown(() => db.stop());
const fixtures = await startFixtureUpstreams({ host: '127.0.0.1', port: 0 });
t.teardown(() => fixtures.close());
const upstreamOrigin = new URL(fixtures.baseUrlFor('catjoke')).origin;
const env = { GATE402_STORE_URL: db.url };
const first = await spawnPaidGateway(manifest, upstreamOrigin, env);
t.teardown(() => first.gw.stop());
const sql = new pg.Client({ connectionString: db.url });
await sql.connect();
t.teardown(() => sql.end());

t.test('a payment made with @x402/fetch is recorded in PostgreSQL, and spent for every gateway sharing it', async (t) => {
  const n = network(manifest, CAIP2.stockChain);
  const payer = await fundedPayer(n, CAIP2.stockChain, tester('storePostgres'), parseUnits('1', 6));
  let credential: string | undefined;
  const client = registerExactEvmScheme(
    x402Client.fromConfig({
      schemes: [],
      spendControls: false,
      paymentRequirementsSelector: (_v, offers) => offers.find((o) => o.network === CAIP2.stockChain) ?? (offers[0] as (typeof offers)[number]),
    }),
    { signer: payer },
  );
  const pay = wrapFetchWithPayment(async (input, init) => {
    const req = new Request(input as Parameters<typeof fetch>[0], init);
    credential ??= req.headers.get('payment-signature') ?? undefined;
    return fetch(req);
  }, client);
  const url = `${first.gw.url}/m/catjoke/joke`;
  const res = await pay(url);
  t.equal(res.status, 200, await res.clone().text());
  const settlement = decodePaymentResponseHeader(res.headers.get('payment-response') as string);
  t.equal(settlement.success, true);
  t.equal(await stableBalance(n, payer.address), 990_000n, 'the price left the buyer');

  const payments = await sql.query<{ key: string; state: string; tx: string }>(
    "SELECT key, value->>'state' AS state, value->'result'->>'transaction' AS tx FROM records WHERE collection = 'payments'",
  );
  t.equal(payments.rows.length, 1, 'one payment record, in PostgreSQL');
  t.match(payments.rows[0], { state: 'settled', tx: settlement.transaction }, 'settled, naming the transaction the buyer was told of');
  const key = payments.rows[0]?.key;
  const claims = await sql.query<{ space: string }>('SELECT space FROM claims WHERE key = $1 ORDER BY space', [key]);
  t.same(
    claims.rows.map((r) => r.space),
    ['claims:served', 'nonces'],
    'its nonce claimed, and its serving',
  );
  const served = await sql.query("SELECT 1 FROM records WHERE collection = 'paid-requests' AND value->>'transaction' = $1", [settlement.transaction]);
  t.equal(served.rowCount, 1, 'the paid request recorded');
  t.notOk(existsSync(join(first.gw.dataDir, 'data.mdb')), 'and no LMDB environment in the data directory');

  const second = await spawnPaidGateway(manifest, upstreamOrigin, env);
  t.teardown(() => second.gw.stop());
  const calls = fixtures.calls;
  const replay = await fetch(`${second.gw.url}/m/catjoke/joke`, { headers: { 'payment-signature': credential as string } });
  t.equal(replay.status, 402, 'another gateway on the same database refuses the spent credential');
  t.equal(fixtures.calls, calls, 'without calling the upstream');
  t.equal(await stableBalance(n, payer.address), 990_000n, 'and without charging again');
});
