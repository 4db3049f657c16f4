// A gateway settling one network through two real gate402 facilitators (GATE402_FACILITATORS), the first of which is
// killed in the middle of a settlement: every paid request is answered, each payment moves the money once on chain,
// the second facilitator takes only what the first provably did not settle, and with both down a buyer gets a 503
// that charged nothing. The first facilitator's RPC goes through a relay that can hold its calls, to stop it at a
// chosen step (the shared devnet keeps mining for everyone else).
import t from 'tap';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { x402Client } from '@x402/core/client';
import { decodePaymentResponseHeader, decodePaymentSignatureHeader } from '@x402/core/http';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import { parseEther, parseUnits, toHex, type Address, type Hex, type LocalAccount } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { CAIP2 } from '../src/chain/canonical.ts';
import { rpcCall } from '../src/chain/rpc.ts';
import { authorizationUsedEvent } from '../src/schemes/eip3009/abi.ts';
import { parseFacilitators } from '../src/settlement/remote/facilitators-config.ts';
import { clientsFor, freePort, network, tester, testDevnet, TEST_MANIFEST_PATH } from './helpers/devnet.ts';
import { until } from './helpers/paid-gateway.ts';
import { fundedPayer, postJson, stableBalance } from './helpers/payments.ts';
import { scrape, valueOf as metricValue } from './helpers/prometheus.ts';
import { startRpcRelay, type RpcCall } from './helpers/rpc-relay.ts';
import { spawnFacilitator, type SpawnedFacilitator } from './helpers/spawn-facilitator.ts';
import { tempDir } from './helpers/temp-dir.ts';

const NET = CAIP2.base;
const PRICE = 10_000n; // catjoke/joke: 0.01 USD
const manifest = testDevnet();
const n = network(manifest, NET);
const funder = tester('failover');
const { pub } = clientsFor(n, funder);

/**
 * The first facilitator's relay to the chain. `stallAfterSend`: a transaction goes through, then every later call
 * waits (the facilitator never learns its receipt); `dropSends`: transactions wait and, once let go, never reach the
 * node. `letGo` ends the waiting.
 */
let mode: 'pass' | 'stallAfterSend' | 'dropSends' = 'pass';
let sent = 0;
const waiting: Array<(forward: boolean) => void> = [];
const isSend = (c: RpcCall) => c.method === 'eth_sendRawTransaction';
const relay = await startRpcRelay(() => n.rpcUrl, {
  async beforeForward(calls) {
    const sends = calls?.some(isSend) ?? false;
    const wait = (mode === 'stallAfterSend' && sent > 0) || (mode === 'dropSends' && sends);
    if (wait && !(await new Promise<boolean>((resolve) => waiting.push(resolve)))) throw new Error('dropped');
    if (sends) sent++;
  },
});
const letGo = (forward: boolean) => {
  mode = 'pass';
  for (const resolve of waiting.splice(0)) resolve(forward);
};
t.teardown(async () => {
  letGo(false);
  await relay.close();
});
const dir = tempDir('failover');
const relayedManifest = join(dir, 'manifest.json');
writeFileSync(relayedManifest, JSON.stringify({ ...manifest, networks: { ...manifest.networks, [NET]: { ...n, rpcUrl: relay.origin } } }));

/** Fresh relayer keys per facilitator, with gas: their nonces count exactly the transactions each one sent. */
async function relayerKey(): Promise<{ key: Hex; address: Address }> {
  const key = generatePrivateKey();
  const address = privateKeyToAccount(key).address;
  await rpcCall(n.rpcUrl, 'anvil_setBalance', [address, toHex(parseEther('10'))]);
  return { key, address };
}
const relayerA = await relayerKey();
const relayerB = await relayerKey();
// The second network, settled by a facilitator that always answers 500, then by B.
const NET2 = CAIP2.baseSepolia;
const n2 = network(manifest, NET2);
await rpcCall(n2.rpcUrl, 'anvil_setBalance', [relayerB.address, toHex(parseEther('10'))]);
const brokenSettles: string[] = [];
const broken = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    if (req.url === '/settle') brokenSettles.push(Buffer.concat(chunks).toString('utf8'));
    res.writeHead(500, { 'content-type': 'text/plain' }).end('internal error');
  });
});
await new Promise<void>((resolve) => broken.listen(0, '127.0.0.1', resolve));
t.teardown(() => new Promise<void>((resolve) => broken.close(() => resolve())));
const nameC = `127.0.0.1:${(broken.address() as AddressInfo).port}`;
const sentBy = (r: { address: Address }) => pub.getTransactionCount({ address: r.address, blockTag: 'latest' });
const [portA, portB] = [await freePort(), await freePort()];
const startA = () => spawnFacilitator({ manifestPath: relayedManifest, port: portA, env: { GATE402_RELAYER_KEYS: relayerA.key, GATE402_CONFIRM_DEADLINE_MS: '2000', GATE402_RECEIPT_POLL_MS: '50' } });
const nameA = `127.0.0.1:${portA}`;
const nameB = `127.0.0.1:${portB}`;
const gatewayEnv = (facilitators: string) => ({ GATE402_FACILITATORS: facilitators, GATE402_FACILITATORS_TIMEOUT_MS: '15000', GATE402_RELAYER_KEYS: generatePrivateKey() });
// A gateway given a malformed GATE402_FACILITATORS, started beside the others: it must refuse to start.
const refusedStart = spawnFacilitator({ part: 'gateway', manifestPath: TEST_MANIFEST_PATH, env: gatewayEnv(`${NET}=not a url`) }).then(
  (started) => started.stop().then(() => 'started'),
  (err: Error) => err.message,
);
// All three start at once; the gateway's own relayer key holds no gas: on this network it never sends anything itself.
const [firstA, b, gw] = await Promise.all([
  startA(),
  spawnFacilitator({ manifestPath: TEST_MANIFEST_PATH, port: portB, env: { GATE402_RELAYER_KEYS: relayerB.key, GATE402_RECEIPT_POLL_MS: '50' } }),
  spawnFacilitator({ part: 'gateway', manifestPath: TEST_MANIFEST_PATH, env: gatewayEnv(`${NET}=http://${nameA},http://${nameB}; ${NET2}=http://${nameC},http://${nameB}`) }),
]);
let a: SpawnedFacilitator = firstA;
t.teardown(() => a.stop('SIGKILL'));
t.teardown(() => b.stop('SIGKILL'));
t.teardown(() => gw.stop());
const url = `${gw.url}/m/catjoke/joke`;

/** A buyer paying with the official x402 client on `net`; `credentials` collects the PAYMENT-SIGNATURE headers it sent. */
function buyer(payer: LocalAccount, credentials: string[] = [], net: string = NET) {
  const client = registerExactEvmScheme(
    x402Client.fromConfig({ schemes: [], spendControls: false, paymentRequirementsSelector: (_v, offers) => offers.find((o) => o.network === net) ?? (offers[0] as (typeof offers)[number]) }),
    { signer: payer },
  );
  return wrapFetchWithPayment(async (input, init) => {
    const req = new Request(input as Parameters<typeof fetch>[0], init);
    const credential = req.headers.get('payment-signature');
    if (credential) credentials.push(credential);
    return fetch(req);
  }, client);
}
const FUNDED = parseUnits('1', 6);
const newPayer = () => fundedPayer(n, NET, funder, FUNDED);
/** The AuthorizationUsed logs of the payer's authorizations: one per nonce spent. */
const authorizationsUsed = async (payer: Address) => (await pub.getLogs({ address: n.stablecoin.address, event: authorizationUsedEvent, args: { authorizer: payer }, fromBlock: 0n })).length;
const settledBy = async (tx: string) => (await pub.getTransactionReceipt({ hash: tx as Hex })).from.toLowerCase();
const metric = async (name: string, labels: Record<string, string>) => metricValue(await scrape(`${gw.url}/metrics`), name, labels) ?? 0;

t.test('GATE402_FACILITATORS is checked at start: a mistake stops the gateway with its reason', async (t) => {
  const networks = Object.keys(manifest.networks);
  const parsed = parseFacilitators(`${NET}=http://f1.example/x402/, https://f2.example ; *=https://f3.example`, networks);
  t.same(
    parsed.get(NET)?.map((f) => f.url),
    ['http://f1.example/x402', 'https://f2.example'],
    'preferred first, without a trailing slash',
  );
  t.same(parsed.get(CAIP2.stockChain)?.[0]?.name, 'f3.example', '`*` stands for the other networks');
  for (const [bad, reason] of [
    ['eip155:1=https://f.example', /network 'eip155:1' is not configured/],
    [`${NET}`, /is not <network>=<url>/],
    [`${NET}=ftp://f.example`, /must be http or https/],
    [`${NET}=https://user:pw@f.example`, /credentials/],
    [`${NET}=https://f.example?key=1`, /no query or fragment/],
    [`${NET}=https://f.example,https://f.example/`, /twice/],
    [`${NET}=https://f.example; ${NET}=https://g.example`, /listed twice/],
  ] as const) {
    t.throws(() => parseFacilitators(bad, networks), reason, bad);
  }
  const refused = await refusedStart;
  t.match(refused, /gateway exited 1:[\s\S]*GATE402_FACILITATORS: 'not a url' is not an absolute URL/, 'one line naming the variable and the mistake');
});

t.test('a pending answer of the remote facilitator is a 202; the same credential then gets the resource, paid once', async (t) => {
  const payer = await newPayer();
  const credentials: string[] = [];
  mode = 'stallAfterSend';
  sent = 0;
  const res = await buyer(payer, credentials)(url);
  t.equal(res.status, 202, 'pending: the facilitator did not see its receipt by its deadline');
  const pending = (await res.json()) as { status: string; transaction: string };
  t.equal(pending.status, 'pending');
  letGo(true);
  await until(async () => (await stableBalance(n, payer.address)) === FUNDED - PRICE, 'the pending transaction mined');
  let again: Response;
  for (;;) {
    again = await fetch(url, { headers: { 'payment-signature': credentials[0] as string } });
    if (again.status !== 202) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  t.equal(again.status, 200, await again.clone().text());
  t.equal(decodePaymentResponseHeader(again.headers.get('payment-response') as string).transaction, pending.transaction, 'settled by the transaction it was pending on');
  t.equal(await stableBalance(n, payer.address), FUNDED - PRICE, 'charged once');
  t.equal(await sentBy(relayerB), 0, 'the second facilitator was not asked');
});

t.test('the first facilitator killed after its transaction reached the chain: the chain answers, nothing goes to the second', async (t) => {
  const payer = await newPayer();
  const sentBefore = await sentBy(relayerA);
  mode = 'stallAfterSend';
  sent = 0;
  const paying = buyer(payer)(url);
  await until(async () => (await stableBalance(n, payer.address)) === FUNDED - PRICE && waiting.length > 0, 'the settlement mined, its facilitator waiting for the receipt');
  await a.stop('SIGKILL');
  const res = await paying;
  t.equal(res.status, 200, await res.clone().text());
  const settlement = decodePaymentResponseHeader(res.headers.get('payment-response') as string);
  t.equal(settlement.success, true);
  t.equal(await settledBy(settlement.transaction), relayerA.address.toLowerCase(), "the reported transaction is the dead facilitator's own");
  t.equal((await sentBy(relayerA)) - sentBefore, 1, 'one transaction');
  t.equal(await sentBy(relayerB), 0, 'the second facilitator sent nothing');
  t.equal(await authorizationsUsed(payer.address), 1, 'one authorization used');
  t.equal(await stableBalance(n, payer.address), FUNDED - PRICE, 'the buyer paid once');
  t.equal(await metric('gate402_facilitator_failovers_total', { facilitator: nameA, network: NET }), 0, 'no failover');
  t.ok((await metric('gate402_facilitator_errors_total', { facilitator: nameA, network: NET, kind: 'connection_lost' })) >= 1, 'the lost connection counted');
  letGo(true);
});

t.test('the first facilitator killed before its transaction reached the chain: proven unsettled, settled once by the second', async (t) => {
  a = await startA();
  const payer = await newPayer();
  const sentBeforeA = await sentBy(relayerA);
  mode = 'dropSends';
  const credentials: string[] = [];
  const paying = buyer(payer, credentials)(url);
  await until(() => waiting.length > 0, 'the first facilitator sending its transaction');
  await a.stop('SIGKILL');
  letGo(false);
  const res = await paying;
  t.equal(res.status, 200, await res.clone().text());
  const settlement = decodePaymentResponseHeader(res.headers.get('payment-response') as string);
  t.equal(await settledBy(settlement.transaction), relayerB.address.toLowerCase(), 'settled by the second facilitator');
  t.equal(await sentBy(relayerA), sentBeforeA, 'the first sent nothing that reached the chain');
  t.equal(await sentBy(relayerB), 1, 'the second sent one transaction');
  t.equal(await authorizationsUsed(payer.address), 1, 'one authorization used');
  t.equal(await stableBalance(n, payer.address), FUNDED - PRICE, 'the buyer paid once');
  t.equal(await metric('gate402_facilitator_failovers_total', { facilitator: nameA, network: NET }), 1, 'one failover from the first');
  t.equal(await metric('gate402_facilitator_failovers_total', { facilitator: nameB, network: NET }), 0);
  // What the failover relies on: asked again, a gate402 facilitator answers a settled payment from its record.
  const paid = decodePaymentSignatureHeader(credentials[0] as string);
  const again = await postJson(`${b.url}/settle`, { x402Version: 2, paymentPayload: paid, paymentRequirements: paid.accepted });
  t.match(again.json, { success: true, transaction: settlement.transaction }, 'the same payload settled again: the recorded answer');
  t.equal(await sentBy(relayerB), 1, 'and no second transaction');
});

t.test('a facilitator answering 500: asked again with the same payload, then the chain read, then the next; the credential serves once', async (t) => {
  const payer = await fundedPayer(n2, NET2, funder, FUNDED);
  const credentials: string[] = [];
  const res = await buyer(payer, credentials, NET2)(url);
  t.equal(res.status, 200, await res.clone().text());
  t.equal(brokenSettles.length, 2, 'the failing facilitator was asked twice');
  t.equal(brokenSettles[0], brokenSettles[1], 'with the same payload');
  const settlement = decodePaymentResponseHeader(res.headers.get('payment-response') as string);
  const { pub: pub2 } = clientsFor(n2, funder);
  t.equal((await pub2.getTransactionReceipt({ hash: settlement.transaction as Hex })).from.toLowerCase(), relayerB.address.toLowerCase(), 'settled by the next one');
  t.equal(await stableBalance(n2, payer.address), FUNDED - PRICE, 'the buyer paid once');
  t.equal(await metric('gate402_facilitator_failovers_total', { facilitator: nameC, network: NET2 }), 1);
  t.ok((await metric('gate402_facilitator_errors_total', { facilitator: nameC, network: NET2, kind: 'http_5xx' })) >= 1, 'the 5xx counted');
  const replay = await fetch(url, { headers: { 'payment-signature': credentials[0] as string } });
  t.equal(replay.status, 402, 'the served credential buys nothing more');
  t.equal(brokenSettles.length, 2, 'and reaches no facilitator');
});

t.test('both facilitators down: 503 with Retry-After, nothing charged; the dead first one is then passed over by its breaker', async (t) => {
  await b.stop('SIGKILL');
  const payer = await newPayer();
  for (let i = 0; i < 2; i++) {
    const res = await buyer(payer)(url);
    t.equal(res.status, 503, `request ${i + 1}`);
    t.match(res.headers.get('retry-after'), /^\d+$/);
    t.match(await res.json(), { code: 'settlement_unavailable', error: /nothing was charged/ });
  }
  t.equal(await stableBalance(n, payer.address), FUNDED, 'nothing moved');
  t.equal(await authorizationsUsed(payer.address), 0);
  t.equal(await metric('gate402_facilitator_circuit_state', { facilitator: nameA }), 2, "the first facilitator's breaker is open (3 failed payments)");
  t.ok((await metric('gate402_facilitator_errors_total', { facilitator: nameB, network: NET, kind: 'unreachable' })) >= 1, 'the second counted unreachable');
  t.equal((await fetch(url)).status, 402, 'unpaid requests still get their challenge');
});
