/**
 * A gateway killed (SIGKILL) after it settled a payment and claimed it for service, while the upstream call is still
 * open: the buyer paid and got nothing, so after a restart on the same data directory the same credential must buy
 * the resource, once, without a second charge.
 */
import t from 'tap';
import { rmSync } from 'node:fs';
import { parseUnits } from 'viem';
import { CAIP2 } from '../../src/chain/canonical.ts';
import { network, tester, testDevnet } from '../helpers/devnet.ts';
import { startHostileUpstream } from '../helpers/hostile-upstream.ts';
import { registerOwnMerchant, relayerTxCount, spawnPaidGateway, until, x402Credential } from '../helpers/paid-gateway.ts';
import { fundedPayer, stableBalance } from '../helpers/payments.ts';
import { rawRequest } from '../helpers/raw-http.ts';
import { tempDir } from '../helpers/temp-dir.ts';

const manifest = testDevnet();
const funder = tester('attackPaid');
const base = network(manifest, CAIP2.base);
const upstream = await startHostileUpstream();
t.teardown(() => upstream.close());
const dataDir = tempDir('paid-crash');
// Runs once the test below has stopped both gateways (its own teardowns run when it ends).
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));

t.test('SIGKILL while the upstream call is open: after a restart the same credential is served once, charged once', async (t) => {
  const first = await spawnPaidGateway(manifest, upstream.origin, {}, { dataDir });
  t.teardown(() => first.gw.stop('SIGKILL'));
  // A merchant of this test's own (a fresh payee), registered in the data directory that survives the kill.
  const { slug, payTo: merchant } = await registerOwnMerchant(first.gw.url, upstream.origin, { slug: `crashed-${Date.now().toString(36)}`, priceUsd: '0.005000', networks: [CAIP2.base] });
  const M = `/m/${slug}/data`;
  const U = `/${slug}/data`;
  const payer = await fundedPayer(base, CAIP2.base, funder, parseUnits('1', 6));
  const credential = { 'payment-signature': await x402Credential(`${first.gw.url}${M}`, payer, CAIP2.base) };
  const before = { payer: await stableBalance(base, payer.address), merchant: await stableBalance(base, merchant), relayerTxs: await relayerTxCount(base, first.relayers) };

  upstream.behave(`${U}/crash`, () => new Promise<void>(() => {})); // the call stays open
  const inFlight = rawRequest(first.gw.url, 'GET', `${M}/crash`, { headers: credential }).catch((err: unknown) => err);
  await until(() => upstream.callsTo(`${U}/crash`) === 1, 'the paid call to reach the upstream');
  await first.gw.stop('SIGKILL');
  const lost = await inFlight;
  t.ok(lost instanceof Error || (lost as { status: number }).status === 0, 'the buyer got no answer');
  t.equal(await stableBalance(base, payer.address), before.payer - 5_000n, 'the payment had settled before the kill');

  upstream.behave(`${U}/crash`, undefined);
  const second = await spawnPaidGateway(manifest, upstream.origin, {}, { relayerKeys: first.relayerKeys, relayers: first.relayers, dataDir });
  t.teardown(() => second.gw.stop());
  const served = await rawRequest(second.gw.url, 'GET', `${M}/crash`, { headers: credential });
  t.equal(served.status, 200, `the same credential is redeemable after the restart (${served.body.slice(0, 200)})`);
  const replays = await Promise.all(Array.from({ length: 5 }, () => rawRequest(second.gw.url, 'GET', `${M}/crash`, { headers: credential })));
  t.same(
    replays.map((r) => r.status),
    [402, 402, 402, 402, 402],
    'and then spent',
  );
  t.equal(upstream.callsTo(`${U}/crash`), 2, 'the killed call and the one served');
  t.same(
    [before.payer - (await stableBalance(base, payer.address)), (await stableBalance(base, merchant)) - before.merchant, (await relayerTxCount(base, first.relayers)) - before.relayerTxs],
    [5_000n, 5_000n, 1],
    'buyer charged once, merchant paid once, one transaction',
  );
});
