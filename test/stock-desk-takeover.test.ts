/**
 * The stock desk in a cluster: three `gate402 gateway` nodes on one embedded PostgreSQL, all with the desk key, one
 * holding the desk lease. A buy sent to a node that does not run the desk is run by the one that does. The desk node
 * is SIGKILLed with swaps, refunds and a gas sponsorship signed and recorded but never sent (its node holds them):
 * one survivor takes the desk lease over and finishes every one of them from the records, with the transactions the
 * dead node signed; every order is delivered or refunded exactly once (the buyers' balances and the desk's nonce
 * count it), none is lost, and buyers waiting at the survivors get their answers.
 */
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { parseTransaction, parseUnits, type Address, type Hex, type LocalAccount } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { CAIP2 } from '../src/chain/canonical.ts';
import { writeManifest } from '../src/devnet/manifest.ts';
import { startFixtureUpstreams } from '../src/devnet/fixtures/server.ts';
import { decodePaymentRequiredHeader, encodePaymentSignatureHeader } from '../src/protocol/x402/headers.ts';
import { clientsFor, tester } from './helpers/devnet.ts';
import { spawnPaidGateway, until, type PaidGateway } from './helpers/paid-gateway.ts';
import { fundedPayer, officialPayment, stableBalance } from './helpers/payments.ts';
import { startPostgres } from './helpers/postgres.ts';
import { startRpcGate } from './helpers/rpc-gate.ts';
import { spawnOwnDevnet } from './helpers/spawn-devnet.ts';
import { buyInPool, gassedKey, tokenBalance } from './helpers/stock.ts';

// A trader moves TSLA's price here: on chains of this file's own, so no other test's quote meets it.
const devnet = await spawnOwnDevnet('desk-takeover');
t.teardown(() => devnet.stop());
const n = devnet.manifest.networks[CAIP2.stockChain];
const tsla = n?.stocks?.find((s) => s.symbol === 'TSLA');
if (!n || !tsla || !n.uniswap) throw new Error('no stock chain with TSLA');
const router = n.uniswap.router.toLowerCase();
const stable = n.stablecoin.address.toLowerCase();
const funder = tester('stock');
const { pub } = clientsFor(n, funder);

const db = await startPostgres();
t.teardown(() => db.stop());
const fixtures = await startFixtureUpstreams({ host: '127.0.0.1', port: 0 });
t.teardown(() => fixtures.close());
const upstream = new URL(fixtures.baseUrlFor('catjoke')).origin;

// The first node reaches the stock chain through a gate that can hold what the desk sends.
const gate = await startRpcGate(n.rpcUrl);
t.teardown(() => gate.close());
const gatedDir = mkdtempSync(join(devnet.manifestPath, '..', 'gated-'));
t.teardown(() => rmSync(gatedDir, { recursive: true, force: true }));
const gatedManifest = join(gatedDir, 'manifest.json');
writeManifest(gatedManifest, { ...devnet.manifest, networks: { ...devnet.manifest.networks, [CAIP2.stockChain]: { ...n, rpcUrl: gate.url } } });

const deskKey = await gassedKey(n);
const desk = privateKeyToAccount(deskKey).address;
const node = (id: string, manifestPath: string) =>
  spawnPaidGateway(
    devnet.manifest,
    upstream,
    {
      GATE402_STORE_URL: db.url,
      GATE402_NODE_ID: id,
      GATE402_LEASE_MS: '2000',
      GATE402_STOCK_ENABLED: 'true',
      GATE402_STOCK_DESK_KEY: deskKey,
      GATE402_RECEIPT_POLL_MS: '100',
      GATE402_CONFIRM_DEADLINE_MS: '500',
      // A held send must stay held until the kill, not time out into a refund.
      GATE402_RPC_TIMEOUT_MS: '120000',
      // Four buys at once on a loaded machine: no payment is turned away for a slow queue.
      GATE402_SETTLE_QUEUE_WAIT_MS: '60000',
    },
    { manifestPath },
  );
// The first to start takes the desk lease; the others stand by.
const a = await node('d1', gatedManifest);
t.teardown(() => a.gw.stop('SIGKILL'));
const b = await node('d2', devnet.manifestPath);
t.teardown(() => b.gw.stop());
const c = await node('d3', devnet.manifestPath);
t.teardown(() => c.gw.stop());
const names = new Map([
  ['d1', a],
  ['d2', b],
  ['d3', c],
]);

const leases = new pg.Client({ connectionString: db.url });
await leases.connect();
t.teardown(() => leases.end());
/** The node holding the desk lease now, by the database's clock. */
async function deskHolder(): Promise<string | undefined> {
  const rows = await leases.query<{ node: string }>('SELECT node FROM gate402_leases WHERE name = $1 AND expires_at > clock_timestamp()', [`desk:${desk.toLowerCase()}`]);
  return rows.rows[0]?.node;
}

type Order = { orderId: string; status: string; deliveredAtomic?: string; swapTx?: string; refundTx?: string; amountAtomic: string; failure?: { reason: string } };
const isOver = (o: Order | undefined) => o !== undefined && ['delivered', 'refunded', 'rejected'].includes(o.status);
const deskNonce = () => pub.getTransactionCount({ address: desk, blockTag: 'pending' });

/** A buyer's paid buy of TSLA, signed against the 402 terms `at` quotes now. */
async function signedBuy(at: PaidGateway, amount: string): Promise<{ buyer: LocalAccount; path: string; header: string }> {
  const buyer = await fundedPayer(n!, CAIP2.stockChain, funder, parseUnits('20', 6));
  const path = `/api/stock/buy?symbol=TSLA&stable_amount=${amount}`;
  const challenge = await fetch(`${at.gw.url}${path}`, { method: 'POST' });
  if (challenge.status !== 402) throw new Error(`${at.gw.url} answered the unpaid buy ${challenge.status}: ${await challenge.text()}`);
  const terms = decodePaymentRequiredHeader(challenge.headers.get('payment-required') ?? '');
  if (!terms.ok) throw new Error('no payment terms');
  return { buyer, path, header: encodePaymentSignatureHeader(await officialPayment(buyer, terms.value.accepts[0]!)) };
}

const pay = (at: PaidGateway, buy: { path: string; header: string }) => fetch(`${at.gw.url}${buy.path}`, { method: 'POST', headers: { 'payment-signature': buy.header } });

/** The one order of `payer`, as `at` reads it from the shared store. */
async function orderOf(at: PaidGateway, payer: Address): Promise<Order | undefined> {
  const res = await fetch(`${at.gw.url}/api/stock/orders?payer=${payer}`);
  return ((await res.json()) as { orders: Order[] }).orders[0];
}

t.test('the first node holds the desk lease; the others stand by and still quote', async (t) => {
  t.equal(await deskHolder(), 'd1', 'the desk lease is the first node’s');
  const quote = await fetch(`${c.gw.url}/api/stock/quote?symbol=TSLA&stable_amount=2`);
  t.equal(quote.status, 200, 'a standby node quotes');
});

t.test('a buy sent to a node that does not run the desk is run by the one that does', async (t) => {
  const buy = await signedBuy(b, '2');
  const before = await stableBalance(n, buy.buyer.address);
  const nonce = await deskNonce();
  const res = await pay(b, buy);
  const order = (await res.json()) as Order;
  t.equal(res.status, 200, `the standby node answers with the delivered order: ${JSON.stringify(order)}`);
  t.equal(order.status, 'delivered');
  t.ok(res.headers.get('payment-response'), 'with the settlement it paid');
  t.equal(await tokenBalance(n, tsla.address, buy.buyer.address), BigInt(order.deliveredAtomic ?? -1), 'the buyer holds the delivered shares');
  t.equal(before - (await stableBalance(n, buy.buyer.address)), 2_000_000n, 'paid once');
  t.equal(await deskNonce(), nonce + 1, 'the desk swapped once');
  t.equal(await deskHolder(), 'd1', 'the desk did not move');
});

t.test('the desk node SIGKILLed with swaps, refunds and a sponsorship signed but unsent: one survivor finishes each exactly once', async (t) => {
  // Two buys quoted before a trader moves the price far up (they will be refunded), two after (they will swap).
  const refundBuys = [await signedBuy(a, '4'), await signedBuy(c, '3')];
  t.equal((await buyInPool(n, funder, tsla, parseUnits('400000', 6))).status, 'success', 'a trader buys TSLA in size');
  const swapBuys = [await signedBuy(a, '5'), await signedBuy(b, '2')];
  const stableBefore = new Map<Address, bigint>();
  for (const buy of [...refundBuys, ...swapBuys]) stableBefore.set(buy.buyer.address, await stableBalance(n, buy.buyer.address));
  // A wallet with stablecoin B and no gas: it asks the desk node for its approval's gas.
  const sponsored = await fundedPayer(n, CAIP2.stockChain, funder, parseUnits('5', 6), { approvePermit2: false });
  const nonce = await deskNonce();

  // From now on the desk node's swaps, refunds and gas transfers reach no chain: only a survivor's re-send can.
  const held = new Set([router, stable, sponsored.address.toLowerCase()]);
  gate.hold((call) => {
    if (call.method !== 'eth_sendRawTransaction') return false;
    const to = parseTransaction(call.params?.[0] as Hex).to?.toLowerCase();
    return to !== undefined && held.has(to);
  });
  // Sent to the desk node and to both others: those waiting at a survivor are answered after the takeover.
  const answers = [pay(a, refundBuys[0]!), pay(c, refundBuys[1]!), pay(a, swapBuys[0]!), pay(b, swapBuys[1]!)].map((p) => p.catch(() => undefined));
  void fetch(`${a.gw.url}/api/gas/sponsor`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ address: sponsored.address }) }).catch(() => {});

  const stuck = async () => {
    const orders = await Promise.all([...refundBuys, ...swapBuys].map((buy) => orderOf(b, buy.buyer.address)));
    return orders;
  };
  let before: Array<Order | undefined> = [];
  await until(
    async () => {
      before = await stuck();
      if (before.some((o) => o?.status === 'rejected')) throw new Error(`an order was rejected: ${JSON.stringify(before)}`);
      const [r1, r2, s1, s2] = before;
      return [r1, r2].every((o) => o?.status === 'refunding' && o.refundTx) && [s1, s2].every((o) => o?.status === 'swapping' && o.swapTx) && gate.held >= 5;
    },
    'every order to have its swap or refund signed, and the desk node to be sending them',
    90_000,
  );
  t.equal(await deskNonce(), nonce, 'nothing the desk signed reached the chain');
  await a.gw.stop('SIGKILL');

  // A survivor takes the desk lease once it expires, and finishes the dead desk's orders.
  await until(async () => ['d2', 'd3'].includes((await deskHolder()) ?? ''), 'a survivor to take the desk lease', 60_000);
  const holder = (await deskHolder()) as string;
  t.ok(holder === 'd2' || holder === 'd3', `the desk lease is a survivor's: ${holder}`);
  let after: Array<Order | undefined> = [];
  await until(
    async () => {
      after = await stuck();
      return after.every(isOver);
    },
    'every order to finish on the survivor',
    90_000,
  );
  const [r1, r2, s1, s2] = after as Order[];
  const [br1, br2, bs1, bs2] = before as Order[];
  t.same(
    [r1, r2].map((o) => [o?.status, o?.failure?.reason]),
    [
      ['refunded', 'below_slippage_floor'],
      ['refunded', 'below_slippage_floor'],
    ],
    'both price-moved orders are refunded',
  );
  t.same(
    [s1, s2].map((o) => o?.status),
    ['delivered', 'delivered'],
    'both others are delivered',
  );
  t.same([r1?.refundTx, r2?.refundTx, s1?.swapTx, s2?.swapTx], [br1?.refundTx, br2?.refundTx, bs1?.swapTx, bs2?.swapTx], 'each by the transaction the dead desk signed, none signed anew');
  for (const [i, buy] of refundBuys.entries()) {
    t.equal(await stableBalance(n, buy.buyer.address), stableBefore.get(buy.buyer.address), `refund buyer ${i + 1}: stablecoin B back, once`);
    t.equal(await tokenBalance(n, tsla.address, buy.buyer.address), 0n, `refund buyer ${i + 1}: no stock`);
  }
  for (const [i, buy] of swapBuys.entries()) {
    const order = [s1, s2][i] as Order;
    t.equal((stableBefore.get(buy.buyer.address) ?? 0n) - (await stableBalance(n, buy.buyer.address)), BigInt(order.amountAtomic), `swap buyer ${i + 1}: paid once`);
    t.equal(await tokenBalance(n, tsla.address, buy.buyer.address), BigInt(order.deliveredAtomic ?? -1), `swap buyer ${i + 1}: holds exactly the delivered shares`);
  }
  // The sponsorship: its one transfer of gas, re-sent by the survivor.
  await until(async () => (await pub.getBalance({ address: sponsored.address })) > 0n, 'the sponsored gas to arrive', 60_000);
  t.equal(await deskNonce(), nonce + 5, 'the desk sent five transactions in all: two refunds, two swaps, one gas transfer');

  // Those who waited at a survivor are answered there: refunded (502) and delivered (200).
  const [, atC, , atB] = await Promise.all(answers);
  t.equal(atC?.status, 502, 'the refunded buyer waiting at a survivor is told of the refund');
  t.equal(atB?.status, 200, 'the delivered buyer waiting at a survivor gets the order');

  const standby = names.get(holder === 'd2' ? 'd3' : 'd2') as PaidGateway;
  const buy = await signedBuy(standby, '2');
  const res = await pay(standby, buy);
  const order = (await res.json()) as Order;
  t.equal(res.status, 200, `after the takeover, a buy at the node not running the desk is delivered: ${JSON.stringify(order)}`);
  t.equal(await tokenBalance(n, tsla.address, buy.buyer.address), BigInt(order.deliveredAtomic ?? -1), 'the buyer holds the delivered shares');
  t.equal(await deskNonce(), nonce + 6, 'one more swap, nothing else');
});
