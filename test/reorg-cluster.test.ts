// The chain's own faults on two nodes: two `gate402 gateway` nodes on one embedded PostgreSQL, with the stock desk on
// both (one holds its lease), on chains of this file's own (a reorg takes back every other file's transactions too).
// Paid requests at both nodes meet in settlement batches; a reorg drops the batches' blocks; each node's reorg guard
// sends its own batch again, the very same signed bytes: every payment ends settled once (the ledger check: one
// transfer per 200, upstream calls equal served answers) and nothing is served twice. A buy at the standby node is
// run by the desk node; a reorg drops its swap; the desk sends the same signed swap again: delivered once, paid once,
// swapped once.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import { parseUnits, type Address, type Hex, type LocalAccount } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { CAIP2 } from '../src/chain/canonical.ts';
import type { NetworkEntry } from '../src/chain/network-types.ts';
import { rpcCall } from '../src/chain/rpc.ts';
import { startCluster } from './helpers/cluster.ts';
import { clientsFor, tester } from './helpers/devnet.ts';
import { ledger, type Purchase } from './helpers/ledger.ts';
import { relayerTxCount, until, x402Credential, type PaidGateway } from './helpers/paid-gateway.ts';
import { fundedPayer, stableBalance } from './helpers/payments.ts';
import { scrape, valueOf as metricValue } from './helpers/prometheus.ts';
import { spawnOwnDevnet } from './helpers/spawn-devnet.ts';
import { gassedKey, officialBuyer, tokenBalance } from './helpers/stock.ts';
import { reorgAbove } from './helpers/reorg.ts';

const devnet = await spawnOwnDevnet('reorg-cluster');
t.teardown(() => devnet.stop());
const caip2 = CAIP2.stockChain;
const n = devnet.manifest.networks[caip2] as NetworkEntry;
const tsla = n.stocks?.find((s) => s.symbol === 'TSLA');
if (!tsla) throw new Error('no TSLA on the stock chain');
const funder = tester('stock');
const { pub } = clientsFor(n, funder);

const deskKey = await gassedKey(n);
const desk = privateKeyToAccount(deskKey).address;
const { fixtures, node } = await startCluster(t, {
  devnet,
  env: {
    GATE402_STOCK_ENABLED: 'true',
    GATE402_STOCK_DESK_KEY: deskKey,
    GATE402_STOCK_ORDER_WAIT_MS: '120000',
    // Requests sent together meet in one batch at each node however the machine schedules them.
    GATE402_BATCH_WINDOW_MS: '1500',
    GATE402_BATCH_EAGER: 'false',
    GATE402_SETTLE_QUEUE_WAIT_MS: '60000',
    GATE402_CONFIRM_DEADLINE_MS: '30000',
    GATE402_RECEIPT_POLL_MS: '50',
    GATE402_REORG_CHECK_MS: '100',
    GATE402_REORG_DEPTH_BLOCKS: '32',
  },
});
// The first to start takes the desk lease; the second stands by.
const a = await node('r1');
const b = await node('r2');

const price = 10_000n; // catjoke's joke: $0.01
const joke = (at: PaidGateway) => `${at.gw.url}/m/catjoke/joke`;
/** The lines of `at`'s log that match `pattern` (for a failing assertion's output). */
const logOf = (at: PaidGateway, pattern: RegExp) =>
  readFileSync(at.gw.logPath, 'utf8')
    .split('\n')
    .filter((l) => pattern.test(l))
    .map((l) => l.slice(0, 300));
const head = async () => BigInt(await rpcCall<string>(n.rpcUrl, 'eth_blockNumber', []));
const deskNonce = () => pub.getTransactionCount({ address: desk, blockTag: 'pending' });
/** Each payer buys a joke at the node `at` picks for it, all at once: what each was answered. */
const buyAtOnce = (payers: LocalAccount[], at: (i: number) => PaidGateway): Promise<Purchase[]> =>
  Promise.all(
    payers.map(async (payer, i) => {
      const node = at(i);
      const res = await fetch(joke(node), { headers: { 'payment-signature': await x402Credential(joke(node), payer, caip2) } });
      await res.arrayBuffer();
      return { payer: payer.address, status: res.status };
    }),
  );
const resent = async (at: PaidGateway) => metricValue(await scrape(`${at.gw.url}/metrics`), 'gate402_reorged_transactions_total', { network: caip2, outcome: 'resent' }) ?? 0;
const moved = async (at: PaidGateway) => metricValue(await scrape(`${at.gw.url}/metrics`), 'gate402_reorged_transactions_total', { network: caip2, outcome: 'moved' }) ?? 0;
const lost = async (at: PaidGateway) => metricValue(await scrape(`${at.gw.url}/metrics`), 'gate402_reorged_transactions_total', { network: caip2, outcome: 'lost' }) ?? 0;

t.test('a reorg drops the settlement batches both nodes mined: each sends its own again; every payment settled once, nothing served twice', async (t) => {
  const offer = decodePaymentRequiredHeader(String((await fetch(joke(a))).headers.get('payment-required'))).accepts.find((o) => o.network === caip2);
  const merchant = offer?.payTo as Address;
  const payers: LocalAccount[] = [];
  for (let i = 0; i < 8; i++) payers.push(await fundedPayer(n, caip2, funder, parseUnits('1', 6)));
  const merchantBefore = await stableBalance(n, merchant);
  const callsBefore = fixtures.calls;
  const relayers = [...a.relayers, ...b.relayers];
  const txsBefore = await relayerTxCount(n, relayers);
  const blockBefore = await head();

  // Four buyers at each node, at once: each node settles its four in one batch (or a few).
  const purchases = await buyAtOnce(payers, (i) => (i % 2 === 0 ? a : b));
  t.same(
    purchases.map((p) => p.status),
    payers.map(() => 200),
    'every buyer served',
  );
  const batches = (await relayerTxCount(n, relayers)) - txsBefore;
  t.ok(batches >= 2 && batches < payers.length, `eight payments in ${batches} transactions (one or more per node)`);
  t.equal(await stableBalance(n, merchant), merchantBefore + 8n * price, 'eight settlements mined');
  t.equal(fixtures.calls, callsBefore + 8, 'eight upstream calls');

  const resentBefore = (await resent(a)) + (await resent(b));
  const reorg = await reorgAbove(n.rpcUrl, blockBefore);
  t.ok(reorg.replaced, `the reorg replaced every block the batches were mined in (${reorg.top - blockBefore})`);

  await until(async () => (await stableBalance(n, merchant)) === merchantBefore + 8n * price, 'the settlements mined again', 60_000);
  // Counted once a re-sent transaction's watch is written again, which may come after its block is mined.
  await until(async () => (await resent(a)) + (await resent(b)) - resentBefore >= batches, 'both nodes to count what they sent again', 30_000);
  t.equal((await resent(a)) + (await resent(b)) - resentBefore, batches, 'each batch counted as sent again once');
  t.equal(await relayerTxCount(n, relayers), txsBefore + batches, 'the same transactions mined again: nothing signed anew');
  const report = await ledger({ n, merchant, fromBlock: blockBefore + 1n, price, purchases, upstreamCalls: fixtures.calls - callsBefore });
  t.same(report.faults, [], `the ledger adds up: ${report.served} served, ${report.transfers} transfers`);
  for (const payer of payers) t.equal(await stableBalance(n, payer.address), parseUnits('1', 6) - price, 'each payer paid once');
  t.equal((await lost(a)) + (await lost(b)), 0, 'nothing lost');

  // Both nodes' relayers go on from the re-sent nonces: a payment at each settles at once.
  for (const at of [a, b]) {
    const next = await fundedPayer(n, caip2, funder, parseUnits('1', 6));
    const res = await fetch(joke(at), { headers: { 'payment-signature': await x402Credential(joke(at), next, caip2) } });
    t.equal(res.status, 200, `a payment after the reorg is served: ${await res.text()}`);
  }
  t.equal(await stableBalance(n, merchant), merchantBefore + 10n * price, 'and paid');
});

t.test('a buy at the standby node, run by the desk node: a reorg drops its swap; the desk sends the same swap again; delivered once, paid once, swapped once', async (t) => {
  type Order = { orderId: string; status: string; deliveredAtomic?: string; swapTx?: Hex; settlementTx?: Hex; refundTx?: Hex };
  const buyer = await fundedPayer(n, caip2, funder, parseUnits('20', 6));
  const stableBefore = await stableBalance(n, buyer.address);
  const nonceBefore = await deskNonce();
  const res = await officialBuyer(buyer)(`${b.gw.url}/api/stock/buy?symbol=TSLA&stable_amount=2`, { method: 'POST' });
  const order = (await res.json()) as Order;
  t.equal(res.status, 200, `delivered: ${JSON.stringify(order)}`);
  const delivered = BigInt(order.deliveredAtomic ?? -1);
  t.ok(delivered > 0n, 'shares delivered');
  t.equal(await deskNonce(), nonceBefore + 1, 'the desk swapped once');
  const swap = await pub.getTransactionReceipt({ hash: order.swapTx as Hex });

  t.ok((await reorgAbove(n.rpcUrl, swap.blockNumber - 1n)).replaced, "the reorg replaced the swap's block and those after it");

  await until(async () => (await tokenBalance(n, tsla.address, buyer.address)) === delivered, 'the swap to be mined again', 60_000);
  const again = await pub.getTransactionReceipt({ hash: order.swapTx as Hex });
  t.equal(again.status, 'success', 'the very same signed swap (same hash) is mined again');
  t.not(again.blockHash, swap.blockHash, 'in a block of the new chain');
  t.equal(await deskNonce(), nonceBefore + 1, 'the desk swapped once: nothing signed anew');
  t.equal(stableBefore - (await stableBalance(n, buyer.address)), 2_000_000n, 'the buyer paid once');
  for (const at of [a, b]) {
    const orders = ((await (await fetch(`${at.gw.url}/api/stock/orders?payer=${buyer.address}`)).json()) as { orders: Order[] }).orders;
    t.same(
      orders.map((o) => [o.orderId, o.status, o.swapTx, o.refundTx]),
      [[order.orderId, 'delivered', order.swapTx, undefined]],
      `node ${at === a ? 'r1' : 'r2'} shows one order, delivered with its swap, no refund`,
    );
  }
});

t.test("a node killed after its batch mined, then a reorg drops the batch: the survivor takes over the dead node's watch and sends its batch again; settled once", async (t) => {
  const offer = decodePaymentRequiredHeader(String((await fetch(joke(b))).headers.get('payment-required'))).accepts.find((o) => o.network === caip2);
  const merchant = offer?.payTo as Address;
  const payers: LocalAccount[] = [];
  for (let i = 0; i < 4; i++) payers.push(await fundedPayer(n, caip2, funder, parseUnits('1', 6)));
  const merchantBefore = await stableBalance(n, merchant);
  const callsBefore = fixtures.calls;
  const txsBefore = await relayerTxCount(n, b.relayers);
  const blockBefore = await head();
  const purchases = await buyAtOnce(payers, () => b);
  t.same(
    purchases.map((p) => p.status),
    payers.map(() => 200),
    'every buyer served by the second node',
  );
  const batches = (await relayerTxCount(n, b.relayers)) - txsBefore;
  t.ok(batches >= 1 && batches < payers.length, `four payments in ${batches} transaction(s)`);
  t.equal(await stableBalance(n, merchant), merchantBefore + 4n * price, 'settled');

  // The node dies with its batch mined but not yet final; the reorg comes before its lease runs out (3 s), while no
  // node watches that batch.
  await b.gw.stop('SIGKILL');
  const before = { resent: await resent(a), moved: await moved(a) };
  t.ok((await reorgAbove(n.rpcUrl, blockBefore)).replaced, "the reorg replaced the dead node's batch's block");

  await until(async () => (await stableBalance(n, merchant)) === merchantBefore + 4n * price, "the dead node's batch mined again", 60_000);
  t.equal(await relayerTxCount(n, b.relayers), txsBefore + batches, 'the same transactions: nothing signed anew');
  // Sent again by the survivor's reorg guard (resent), or, when the dead node's payments were not yet final, by their
  // recovery first, which the guard then finds mined in a new block (moved): once either way. Counted once the
  // transaction's watch is written again, which may come after its block is mined.
  const taken = { resent: 0, moved: 0 };
  await until(
    async () => {
      Object.assign(taken, { resent: (await resent(a)) - before.resent, moved: (await moved(a)) - before.moved });
      return taken.resent + taken.moved >= batches;
    },
    'the survivor to count what it sent again',
    30_000,
  );
  t.equal(taken.resent + taken.moved, batches, `the survivor accounts for the dead node's batch once: ${JSON.stringify(taken)}`, { log: logOf(a, /reorg|dead node|resum|sent again/) });
  const report = await ledger({ n, merchant, fromBlock: blockBefore + 1n, price, purchases, upstreamCalls: fixtures.calls - callsBefore });
  t.same(report.faults, [], `the ledger adds up: ${report.served} served, ${report.transfers} transfers`);
  for (const payer of payers) t.equal(await stableBalance(n, payer.address), parseUnits('1', 6) - price, 'each payer paid once');
});
