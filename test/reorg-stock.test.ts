// A reorg of a stock swap, end to end: one gateway with the stock desk on chains of this file's own (a reorg takes back
// every other file's transactions too). A buyer's paid buy of TSLA is delivered; a reorg drops the block of its swap;
// the desk's reorg guard sends the very same signed swap again. The order ends delivered once: the buyer holds the
// delivered shares, paid once, and the desk swapped once (its nonce count).
import t from 'tap';
import { parseUnits, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { CAIP2 } from '../src/chain/canonical.ts';
import type { NetworkEntry } from '../src/chain/network-types.ts';
import { rpcCall } from '../src/chain/rpc.ts';
import { clientsFor, tester } from './helpers/devnet.ts';
import { until } from './helpers/paid-gateway.ts';
import { fundedPayer, stableBalance } from './helpers/payments.ts';
import { scrape, valueOf as metricValue } from './helpers/prometheus.ts';
import { spawnFacilitator } from './helpers/spawn-facilitator.ts';
import { spawnOwnDevnet } from './helpers/spawn-devnet.ts';
import { gassedKey, officialBuyer, tokenBalance } from './helpers/stock.ts';
import { reorgAbove } from './helpers/reorg.ts';

const devnet = await spawnOwnDevnet('reorg-stock');
t.teardown(() => devnet.stop());
const caip2 = CAIP2.stockChain;
const n = devnet.manifest.networks[caip2] as NetworkEntry;
const tsla = n.stocks?.find((s) => s.symbol === 'TSLA');
if (!tsla) throw new Error('no TSLA on the stock chain');
const funder = tester('stock');
const { pub } = clientsFor(n, funder);

const deskKey = await gassedKey(n);
const desk = privateKeyToAccount(deskKey).address;
const gw = await spawnFacilitator({
  part: 'gateway',
  manifestPath: devnet.manifestPath,
  env: {
    GATE402_STOCK_ENABLED: 'true',
    GATE402_STOCK_DESK_KEY: deskKey,
    GATE402_RELAYER_KEYS: await gassedKey(n),
    GATE402_CONFIRM_DEADLINE_MS: '30000',
    GATE402_STOCK_ORDER_WAIT_MS: '120000',
    GATE402_RECEIPT_POLL_MS: '50',
    GATE402_REORG_CHECK_MS: '100',
    GATE402_REORG_DEPTH_BLOCKS: '32',
  },
});
t.teardown(() => gw.stop());

type Order = { orderId: string; status: string; deliveredAtomic?: string; swapTx?: Hex; settlementTx?: Hex; refundTx?: Hex };
const deskNonce = () => pub.getTransactionCount({ address: desk, blockTag: 'pending' });

async function orderOf(payer: Address): Promise<Order | undefined> {
  const res = await fetch(`${gw.url}/api/stock/orders?payer=${payer}`);
  return ((await res.json()) as { orders: Order[] }).orders[0];
}

t.test('a reorg drops a delivered swap: the desk sends the same signed swap again; delivered once, paid once, swapped once', async (t) => {
  const buyer = await fundedPayer(n, caip2, funder, parseUnits('20', 6));
  const stableBefore = await stableBalance(n, buyer.address);
  const nonceBefore = await deskNonce();

  const res = await officialBuyer(buyer)(`${gw.url}/api/stock/buy?symbol=TSLA&stable_amount=2`, { method: 'POST' });
  const order = (await res.json()) as Order;
  t.equal(res.status, 200, `delivered: ${JSON.stringify(order)}`);
  t.equal(order.status, 'delivered');
  const delivered = BigInt(order.deliveredAtomic ?? -1);
  t.ok(delivered > 0n, 'shares delivered');
  t.equal(await tokenBalance(n, tsla.address, buyer.address), delivered, 'the buyer holds them');
  t.equal(await deskNonce(), nonceBefore + 1, 'the desk swapped once');
  const swap = await pub.getTransactionReceipt({ hash: order.swapTx as Hex });
  const settlement = await pub.getTransactionReceipt({ hash: order.settlementTx as Hex });
  t.ok(swap.blockNumber > settlement.blockNumber, 'the swap is mined after the payment that funds it');

  // The reorg takes back the swap's block (and anything after it), not the payment's.
  t.ok((await reorgAbove(n.rpcUrl, swap.blockNumber - 1n)).replaced, "the reorg replaced the swap's block and those after it");
  t.ok(await pub.getTransactionReceipt({ hash: settlement.transactionHash }), 'the payment stays mined');

  await until(async () => (await tokenBalance(n, tsla.address, buyer.address)) === delivered, 'the swap to be mined again', 60_000);
  const again = await pub.getTransactionReceipt({ hash: order.swapTx as Hex });
  t.equal(again.status, 'success', 'the very same signed swap (same hash) is mined again');
  t.ok(again.blockHash !== swap.blockHash, 'in a block of the new chain');
  t.equal(await deskNonce(), nonceBefore + 1, 'the desk swapped once: nothing signed anew');
  t.equal(stableBefore - (await stableBalance(n, buyer.address)), 2_000_000n, 'the buyer paid once');
  const after = await orderOf(buyer.address);
  t.equal(after?.status, 'delivered', 'the order stays delivered');
  t.equal(after?.swapTx, order.swapTx, 'with its swap');
  t.notOk(after?.refundTx, 'and no refund');
  // Counted once the re-sent swap's watch is written again, which may come after its block is mined.
  const resent = async () => metricValue(await scrape(`${gw.url}/metrics`), 'gate402_reorged_transactions_total', { network: caip2, outcome: 'resent' }) ?? 0;
  await until(async () => (await resent()) >= 1, 'the desk to count what it sent again', 30_000);
  t.equal(await resent(), 1, 'the metric counts one transaction sent again');

  // Still delivered once, later: no second swap, no refund, the shares where they are.
  await rpcCall(n.rpcUrl, 'evm_mine', []);
  const next = await fundedPayer(n, caip2, funder, parseUnits('20', 6));
  const res2 = await officialBuyer(next)(`${gw.url}/api/stock/buy?symbol=TSLA&stable_amount=2`, { method: 'POST' });
  t.equal(res2.status, 200, 'a buy after the reorg is delivered');
  t.equal(await deskNonce(), nonceBefore + 2, "the desk's next nonce follows the re-sent swap");
  t.equal(await tokenBalance(n, tsla.address, buyer.address), delivered, "the first buyer's shares are exactly the delivered ones");
});
