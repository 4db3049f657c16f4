// A gateway settling one network through a remote facilitator that hangs: it sheds on its own counts. Remote
// settlements in flight are bounded per network (GATE402_SETTLE_REMOTE_MAX) and per client
// (GATE402_SETTLE_REMOTE_CLIENT_MAX); a new payment past either bound is answered 503 with Retry-After before the
// facilitator is called, and once the facilitator answers again the places are free. The facilitator is a real HTTP
// server that holds every request it gets; clients are told apart by X-Forwarded-For (GATE402_TRUST_PROXY=1).
import t from 'tap';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { generatePrivateKey } from 'viem/accounts';
import { CAIP2 } from '../src/chain/canonical.ts';
import { freshAccount, TEST_MANIFEST_PATH } from './helpers/devnet.ts';
import { until, x402Credential } from './helpers/paid-gateway.ts';
import { scrape, valueOf as metricValue } from './helpers/prometheus.ts';
import { spawnFacilitator } from './helpers/spawn-facilitator.ts';

const NET = CAIP2.base;

/** The remote facilitator: holds every request until `answer` is set, then answers them (and later ones) with it. */
const settles: string[] = [];
const held: ServerResponse[] = [];
let answer: { status: number; body: string } | undefined;
const facilitator = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    if (req.url === '/settle') settles.push(Buffer.concat(chunks).toString('utf8'));
    if (answer) res.writeHead(answer.status, { 'content-type': 'application/json' }).end(answer.body);
    else held.push(res);
  });
});
await new Promise<void>((resolve) => facilitator.listen(0, '127.0.0.1', resolve));
const release = (status: number, body: string) => {
  answer = { status, body };
  for (const res of held.splice(0)) res.writeHead(status, { 'content-type': 'application/json' }).end(body);
};
t.teardown(() => {
  release(400, '{"error":"stopping"}');
  facilitator.closeAllConnections();
  return new Promise<void>((resolve) => facilitator.close(() => resolve()));
});

const gw = await spawnFacilitator({
  part: 'gateway',
  manifestPath: TEST_MANIFEST_PATH,
  env: {
    GATE402_FACILITATORS: `${NET}=http://127.0.0.1:${(facilitator.address() as AddressInfo).port}`,
    GATE402_FACILITATORS_TIMEOUT_MS: '120000',
    GATE402_SETTLE_REMOTE_MAX: '3',
    GATE402_SETTLE_REMOTE_CLIENT_MAX: '2',
    GATE402_TRUST_PROXY: '1',
    GATE402_RELAYER_KEYS: generatePrivateKey(),
  },
});
t.teardown(() => gw.stop());
const url = `${gw.url}/m/catjoke/joke`;

/** A new payment (its own payer and nonce) for `url`, sent as `client`. */
async function pay(client: string): Promise<{ credential: string; response: Promise<Response> }> {
  const credential = await x402Credential(url, freshAccount(), NET);
  return { credential, response: fetch(url, { headers: { 'payment-signature': credential, 'x-forwarded-for': client } }) };
}
const shed = async (reason: string) => metricValue(await scrape(`${gw.url}/metrics`), 'gate402_payments_shed_total', { network: NET, reason }) ?? 0;

t.test('payments past the bounds are turned away with 503 and Retry-After, and never reach the facilitator', async (t) => {
  const shedBefore = { client: await shed('client_share'), queue: await shed('queue_full') };
  const a1 = await pay('10.0.0.1');
  const a2 = await pay('10.0.0.1');
  await until(() => settles.length === 2, 'both of client A’s payments at the facilitator, held');

  const a3 = await (await pay('10.0.0.1')).response;
  t.equal(a3.status, 503, 'client A holds its share: its next payment is turned away');
  t.ok(Number(a3.headers.get('retry-after')) >= 1, 'with Retry-After');
  t.match(await a3.text(), /nothing was charged/);
  t.equal(settles.length, 2, 'nothing sent to the facilitator for it');

  const b1 = await pay('10.0.0.2');
  await until(() => settles.length === 3, 'client B’s payment at the facilitator: the network has room for one more');
  const c1 = await pay('10.0.0.3');
  const turnedAway = await c1.response;
  t.equal(turnedAway.status, 503, 'the network is at its bound: client C, holding nothing, is turned away too');
  t.ok(Number(turnedAway.headers.get('retry-after')) >= 1, 'with Retry-After');
  t.equal(settles.length, 3, 'nothing sent to the facilitator for it');
  t.equal((await shed('client_share')) - shedBefore.client, 1, 'counted: one client_share');
  t.equal((await shed('queue_full')) - shedBefore.queue, 1, 'counted: one queue_full');

  // The facilitator answers again (it refuses each with a 4xx: nothing settled); the held payments end, the places free.
  release(400, '{"error":"not today"}');
  for (const p of [a1, a2, b1]) t.equal((await p.response).status, 503, 'a held payment ends: no facilitator took it, nothing charged');
  const again = await fetch(url, { headers: { 'payment-signature': c1.credential, 'x-forwarded-for': '10.0.0.3' } });
  await again.arrayBuffer();
  t.equal(settles.length, 4, 'the payment turned away, sent again, now reaches the facilitator');
  t.equal(
    settles.at(-1) === undefined ? undefined : JSON.parse(settles.at(-1) as string).paymentPayload.payload.authorization.nonce,
    JSON.parse(Buffer.from(c1.credential, 'base64').toString('utf8')).payload.authorization.nonce,
    'the very payment',
  );
});
