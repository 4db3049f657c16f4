// Three `gate402 gateway` nodes on one embedded PostgreSQL, each with relayer keys of its own, paid by the official
// client: a payment answered 202 by one node is served by another once mined, charged once; a credential sent to
// every node at once is served once; a merchant deleted at one node is gone at every node within seconds; a node on
// another node's relayer keys refuses to start; a node killed with its settlement signed but not yet sent is
// finished by exactly one of the two survivors, with the transaction it signed.
import t from 'tap';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseUnits, type Address } from 'viem';
import { CAIP2 } from '../src/chain/canonical.ts';
import { startFixtureUpstreams } from '../src/devnet/fixtures/server.ts';
import { freshAccount, network, tester, testDevnet, TEST_MANIFEST_PATH } from './helpers/devnet.ts';
import { generatePaymentId } from '@x402/extensions/payment-identifier';
import { startHostileUpstream } from './helpers/hostile-upstream.ts';
import { registerOwnMerchant, relayerTxCount, spawnPaidGateway, until, x402Credential, type PaidGateway } from './helpers/paid-gateway.ts';
import { fundedPayer, stableBalance } from './helpers/payments.ts';
import { startPostgres } from './helpers/postgres.ts';
import { startRpcGate } from './helpers/rpc-gate.ts';
import { spawnFacilitator } from './helpers/spawn-facilitator.ts';
import { tempDir } from './helpers/temp-dir.ts';

const manifest = testDevnet();
const caip2 = CAIP2.stockChain;
const n = network(manifest, caip2);
const db = await startPostgres();
t.teardown(() => db.stop());
const fixtures = await startFixtureUpstreams({ host: '127.0.0.1', port: 0 });
t.teardown(() => fixtures.close());
const hostile = await startHostileUpstream();
t.teardown(() => hostile.close());
const upstream = new URL(fixtures.baseUrlFor('catjoke')).origin;
const cluster = (node: string) => ({ GATE402_STORE_URL: db.url, GATE402_NODE_ID: node, GATE402_LEASE_MS: '3000', GATE402_CONFIRM_DEADLINE_MS: '100', GATE402_STORE_CONNECT_TIMEOUT_MS: '30000' });
// Node 1 reaches the stock chain through a gate, which can keep receipts from it (so that it answers 202).
const receiptGate = await startRpcGate(n.rpcUrl);
t.teardown(() => receiptGate.close());
const gatedDir = tempDir('cluster-manifest-n1');
const gatedManifest = JSON.parse(readFileSync(TEST_MANIFEST_PATH, 'utf8'));
gatedManifest.networks[caip2].rpcUrl = receiptGate.url;
writeFileSync(join(gatedDir, 'manifest.json'), JSON.stringify(gatedManifest));
const nodes: PaidGateway[] = [];
for (const id of ['n1', 'n2']) {
  const node = await spawnPaidGateway(manifest, upstream, cluster(id), id === 'n1' ? { manifestPath: join(gatedDir, 'manifest.json') } : {});
  t.teardown(() => node.gw.stop());
  nodes.push(node);
}
const [a, b] = nodes as [PaidGateway, PaidGateway];
const joke = (node: PaidGateway) => `${node.gw.url}/m/catjoke/joke`;
const price = 10_000n; // catjoke's joke: $0.01
const payer = await fundedPayer(n, caip2, tester('cluster'), parseUnits('1', 6));
const paid = (node: PaidGateway, credential: string) => fetch(joke(node), { headers: { 'payment-signature': credential } });

t.test('a payment one node answered 202 is served by the other once mined, and charged once', async (t) => {
  const before = await stableBalance(n, payer.address);
  const calls = fixtures.calls;
  const credential = await x402Credential(joke(a), payer, caip2);
  // Node 1 sees no receipt until it has answered: its confirm deadline (100 ms) passes, whatever the machine's speed.
  receiptGate.hold((call) => call.method === 'eth_getBlockReceipts' || call.method === 'eth_getTransactionReceipt');
  const first = await paid(a, credential);
  receiptGate.release();
  t.equal(first.status, 202, `node 1 answers pending: ${await first.clone().text()}`);
  let second: Response | undefined;
  await until(async () => {
    second = await paid(b, credential);
    return second.status !== 202;
  }, 'node 2 to serve it');
  t.equal(second?.status, 200, 'node 2 serves it once mined');
  t.equal(fixtures.calls, calls + 1, 'the upstream was called once');
  t.equal(await stableBalance(n, payer.address), before - price, 'the buyer paid once');
  t.equal((await paid(a, credential)).status, 402, 'and node 1 now refuses it as spent');
});

t.test('a credential sent to both nodes at once is served once, charged once', async (t) => {
  const before = await stableBalance(n, payer.address);
  const calls = fixtures.calls;
  const credential = await x402Credential(joke(a), payer, caip2);
  // Each node retries a pending answer as a buyer would, until the payment's fate is known.
  const settle = async (node: PaidGateway) => {
    for (;;) {
      const res = await paid(node, credential);
      if (res.status !== 202) return res.status;
    }
  };
  const statuses = await Promise.all([settle(a), settle(b), settle(a), settle(b)]);
  t.equal(statuses.filter((s) => s === 200).length, 1, `served once: ${statuses.join(', ')}`);
  t.equal(fixtures.calls, calls + 1, 'the upstream was called once');
  t.equal(await stableBalance(n, payer.address), before - price, 'the buyer paid once');
});

t.test('one idempotency key at two nodes at once: one charge, one upstream call, one answer; another payer or a forged signature never gets that answer', async (t) => {
  const slug = `idem-${Date.now().toString(36)}`;
  const shop = await registerOwnMerchant(a.gw.url, hostile.origin, { slug, priceUsd: '0.010000', networks: [caip2] });
  await until(async () => (await fetch(`${b.gw.url}/m/${slug}/data`)).status === 402, 'node 2 to offer the new merchant');
  let answers = 0;
  // A slow upstream whose every answer differs: a second call, or a replay of another payer's answer, would show.
  hostile.behave(`/${slug}/data`, (_req, res) => {
    setTimeout(() => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ answer: ++answers, random: Math.random() }));
    }, 300);
  });
  const id = generatePaymentId();
  const at = (node: PaidGateway) => `${node.gw.url}/m/${slug}/data`;
  const merchantBefore = await stableBalance(n, shop.payTo);
  const payerBefore = await stableBalance(n, payer.address);
  // Each request carries a payment of its own (the official client signs anew), all with the same identifier. A
  // pending answer (202), or a turn another request holds (409 with Retry-After), is asked again with the same
  // credential, as a buyer would.
  const buy = async (node: PaidGateway, who = payer) => {
    const credential = await x402Credential(at(node), who, caip2, id);
    for (;;) {
      const res = await fetch(at(node), { headers: { 'payment-signature': credential } });
      const text = await res.text();
      if (res.status === 202 || (res.status === 409 && text.includes('payment_identifier_in_progress'))) {
        await new Promise((r) => setTimeout(r, 100));
        continue;
      }
      return { status: res.status, text };
    }
  };
  const results = await Promise.all([buy(a), buy(b), buy(a), buy(b)]);
  t.same(
    results.map((r) => r.status),
    [200, 200, 200, 200],
    results.map((r) => r.text).join('\n'),
  );
  t.equal(new Set(results.map((r) => r.text)).size, 1, 'one answer, recorded and replayed at both nodes');
  t.equal(hostile.callsTo(`/${slug}/data`), 1, 'the upstream was called once');
  t.equal(await stableBalance(n, shop.payTo), merchantBefore + price, 'the merchant was paid once');
  t.equal(await stableBalance(n, payer.address), payerBefore - price, 'the buyer paid once');
  const recorded = results[0]?.text;

  // Another payer with the same identifier buys its own answer: identifiers are the payer's.
  const other = await fundedPayer(n, caip2, tester('cluster'), parseUnits('1', 6));
  const theirs = await buy(b, other);
  const theirText = theirs.text;
  t.equal(theirs.status, 200, theirText);
  t.not(theirText, recorded, "another payer never gets the first payer's answer");
  t.equal(hostile.callsTo(`/${slug}/data`), 2, 'it was a call of its own');

  // A forged credential: the other payer's signed payment, rewritten to name the first payer.
  const header = await x402Credential(at(a), other, caip2, id);
  const decoded = JSON.parse(Buffer.from(header, 'base64').toString('utf8')) as { payload: { authorization?: { from: string }; permit2Authorization?: { from: string } } };
  const auth = decoded.payload.authorization ?? decoded.payload.permit2Authorization;
  if (auth) auth.from = payer.address;
  const forged = await fetch(at(b), { headers: { 'payment-signature': Buffer.from(JSON.stringify(decoded)).toString('base64') } });
  const forgedText = await forged.text();
  t.equal(forged.status, 402, `a forged signature naming the payer is refused: ${forgedText}`);
  t.not(forgedText, recorded, 'and never gets the recorded answer');
  t.equal(hostile.callsTo(`/${slug}/data`), 2, 'nor reaches the upstream');
  t.equal(await stableBalance(n, payer.address), payerBefore - price, 'nor charges anyone');
});

t.test('a merchant deleted at one node is gone at the other within seconds', async (t) => {
  const { registrationTypedData } = await import('../src/gateway/merchants/signature.ts');
  const owner = freshAccount();
  const slug = `cluster-${Date.now().toString(36)}`;
  const signed = async (action: 'register' | 'delete') => {
    const common = { action, slug, payTo: owner.address, nonce: `n-${Math.random()}`, issuedAt: Math.floor(Date.now() / 1000) };
    const registration =
      action === 'delete'
        ? common
        : {
            ...common,
            name: 'Cluster shop',
            description: 'A merchant the cluster test registers',
            networks: [caip2],
            upstream: { kind: 'url' as const, baseUrl: `${upstream}/${slug}`, secretHeaders: {} },
            routes: [{ route: 'data', methods: ['GET' as const], priceUsd: '0.010000', summary: 'Data', description: 'Paid data', input: 'anything' }],
          };
    const signature = await owner.signTypedData(registrationTypedData(registration as never));
    return fetch(`${a.gw.url}/api/merchants`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ registration, signature }) });
  };
  const registered = await signed('register');
  t.ok(registered.status < 300, `registered at node 1: ${registered.status} ${await registered.clone().text()}`);
  const seen = performance.now();
  // Heard at once (NOTIFY in the writing transaction); the bound is the revalidation's, with room for a loaded machine.
  await until(async () => (await fetch(`${b.gw.url}/m/${slug}/data`)).status === 402, 'node 2 to offer it', 10_000);
  t.ok(performance.now() - seen < 10_000, 'node 2 offers it within seconds');
  // Node 2 now holds the merchant in memory; node 1 deletes it.
  t.equal((await signed('delete')).status, 200, 'deleted at node 1');
  const deleted = performance.now();
  await until(async () => (await fetch(`${b.gw.url}/m/${slug}/data`)).status === 404, 'node 2 to drop it', 10_000);
  t.ok(performance.now() - deleted < 10_000, 'node 2 no longer offers it, within seconds');
});

t.test("a node on another live node's relayer keys refuses to start, naming the holder", async (t) => {
  await t.rejects(spawnPaidGateway(manifest, upstream, cluster('n3'), { relayerKeys: a.relayerKeys, relayers: a.relayers }), /exited 1[\s\S]*held by node n1[\s\S]*another live node uses it/);
});

t.test('a node killed with its settlement signed but unsent is finished once, by one of two survivors, with that transaction', async (t) => {
  // Node 3 reaches the stock chain through a gate that holds every transaction it sends.
  const gate = await startRpcGate(n.rpcUrl);
  t.teardown(() => gate.close());
  const dir = tempDir('cluster-manifest');
  const gated = JSON.parse(readFileSync(TEST_MANIFEST_PATH, 'utf8'));
  gated.networks[caip2].rpcUrl = gate.url;
  const manifestPath = join(dir, 'manifest.json');
  writeFileSync(manifestPath, JSON.stringify(gated));
  const own = await spawnPaidGateway(manifest, upstream, cluster('n3'));
  await own.gw.stop(); // only its funded keys are wanted: it runs again below, through the gate
  const victim = await spawnFacilitator({
    part: 'gateway',
    manifestPath,
    env: { GATE402_RELAYER_KEYS: own.relayerKeys, GATE402_CATALOG_UPSTREAM_BASE: upstream, GATE402_UPSTREAM_ALLOWLIST: '127.0.0.1', GATE402_BREAKER_THRESHOLD: '1000', ...cluster('n3') },
  });
  t.teardown(() => victim.stop('SIGKILL'));
  const before = await stableBalance(n, payer.address);
  const survivorsSent = await relayerTxCount(n, [...a.relayers, ...b.relayers]);
  const credential = await x402Credential(joke(a), payer, caip2);
  gate.hold((call) => call.method === 'eth_sendRawTransaction');
  void fetch(`${victim.url}/m/catjoke/joke`, { headers: { 'payment-signature': credential } }).catch(() => {});
  await until(() => gate.held > 0, 'node 3 to send its signed settlement', 30_000);
  await victim.stop('SIGKILL');
  // The held send never reaches the chain: only a survivor's re-send of the stored transaction can.
  let served: Response | undefined;
  await until(
    async () => {
      served = await paid(b, credential);
      return served.status === 200;
    },
    'a survivor to finish the payment',
    30_000,
  );
  t.equal(served?.status, 200, 'the buyer is served at a survivor');
  t.equal(await stableBalance(n, payer.address), before - price, 'charged exactly once');
  t.equal(await relayerTxCount(n, own.relayers as Address[]), 1, "node 3's relayers sent one transaction: the one it signed, re-sent as it was");
  t.equal(await relayerTxCount(n, [...a.relayers, ...b.relayers]), survivorsSent, 'the survivors signed nothing for it');
});
