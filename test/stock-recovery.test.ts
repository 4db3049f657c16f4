/**
 * A gateway killed (SIGKILL) at each step of a stock order where money has moved or a transaction is signed; the
 * restarted gateway finishes the order exactly once. The kill waits for the step it is meant to hit, by polling the
 * order and the chain, never by sleeping.
 */
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { parseUnits, type Address } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { CAIP2 } from '../src/chain/canonical.ts';
import { writeManifest } from '../src/devnet/manifest.ts';
import { rpcCall } from '../src/chain/rpc.ts';
import { decodePaymentRequiredHeader, encodePaymentSignatureHeader } from '../src/protocol/x402/headers.ts';
import { clientsFor, tester } from './helpers/devnet.ts';
import { fundedPayer, officialPayment, stableBalance } from './helpers/payments.ts';
import { startRpcGate } from './helpers/rpc-gate.ts';
import { spawnOwnDevnet } from './helpers/spawn-devnet.ts';
import { spawnFacilitator } from './helpers/spawn-facilitator.ts';
import { buyInPool, gassedKey, tokenBalance } from './helpers/stock.ts';
import { tempDir } from './helpers/temp-dir.ts';

// Pausing mining would stall every other test, so this file runs its own chains, in a directory of its own.
const devnet = await spawnOwnDevnet('stock-recovery');
t.teardown(() => devnet.stop());
const n = devnet.manifest.networks[CAIP2.stockChain];
const tsla = n?.stocks?.find((s) => s.symbol === 'TSLA');
if (!n || !tsla || !n.uniswap) throw new Error('no stock chain with TSLA');
const quoter = n.uniswap.quoter.toLowerCase();
const funder = tester('stock');
const { pub } = clientsFor(n, funder);
const setMining = (on: boolean) => rpcCall(n.rpcUrl, 'evm_setAutomine', [on]);
const mine = () => rpcCall(n.rpcUrl, 'evm_mine', []);

// The gateway reaches the stock chain through a relay that can stall chosen calls (a slow node, on purpose).
const gate = await startRpcGate(n.rpcUrl);
t.teardown(() => gate.close());
const gatedManifest = join(mkdtempSync(join(devnet.manifestPath, '..', 'gated-')), 'manifest.json');
writeManifest(gatedManifest, { ...devnet.manifest, networks: { ...devnet.manifest.networks, [CAIP2.stockChain]: { ...n, rpcUrl: gate.url } } });

const deskKey = await gassedKey(n);
const desk = privateKeyToAccount(deskKey).address;
const relayerKey = await gassedKey(n);
const relayer = privateKeyToAccount(relayerKey).address;
const dataDir = tempDir('stock-recovery');
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const startGateway = () =>
  spawnFacilitator({
    part: 'gateway',
    manifestPath: gatedManifest,
    dataDir,
    env: {
      GATE402_STOCK_ENABLED: 'true',
      GATE402_STOCK_DESK_KEY: deskKey,
      GATE402_RELAYER_KEYS: relayerKey,
      GATE402_CONFIRM_DEADLINE_MS: '500',
      GATE402_RECEIPT_POLL_MS: '100',
      GATE402_STOCK_ORDER_WAIT_MS: '1500',
    },
  });

// One gateway at a time, shared by the tests: each kills it at its step and starts the next one.
let gw = await startGateway();
t.teardown(() => gw.stop());

type Order = { orderId: string; status: string; deliveredAtomic?: string; swapTx?: string; refundTx?: string; settlementTx?: string; failure?: { reason: string } };

/** A signed buy of TSLA for `amount`, made by the official client scheme against the gateway's own 402 terms. */
async function signedBuy(amount: string) {
  const buyer = await fundedPayer(n!, CAIP2.stockChain, funder, parseUnits('20', 6));
  const path = `/api/stock/buy?symbol=TSLA&stable_amount=${amount}`;
  const challenge = await fetch(`${gw.url}${path}`, { method: 'POST' });
  await challenge.arrayBuffer();
  const terms = decodePaymentRequiredHeader(challenge.headers.get('payment-required') ?? '');
  if (!terms.ok) throw new Error('no payment terms');
  const header = encodePaymentSignatureHeader(await officialPayment(buyer, terms.value.accepts[0]!));
  return { buyer, path, header };
}

async function orderOf(id: string): Promise<Order> {
  return (await (await fetch(`${gw.url}/api/stock/order/${id}`)).json()) as Order;
}

/** Polls until `done` holds; the bound only keeps a broken run from hanging. */
async function until<T>(read: () => Promise<T>, done: (v: T) => boolean, ms = 120_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await read();
    if (done(v) || Date.now() > deadline) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
}

const pendingNonce = (address: Address) => pub.getTransactionCount({ address, blockTag: 'pending' });
const isOver = (o: Order) => o.status === 'delivered' || o.status === 'refunded' || o.status === 'rejected';

t.test('killed while its settlement is broadcast but not mined: the restarted gateway completes the order exactly once', async (t) => {
  const { buyer, path, header } = await signedBuy('5');
  const stableBefore = await stableBalance(n, buyer.address);
  const relayerNonce = await pendingNonce(relayer);
  await setMining(false);
  t.teardown(() => setMining(true));
  const res = await fetch(`${gw.url}${path}`, { method: 'POST', headers: { 'payment-signature': header } });
  const pending = (await res.json()) as Order;
  t.equal(res.status, 202, 'the order is still running when the buy answers');
  t.equal(pending.status, 'settling', 'waiting on its settlement');
  t.equal(
    await until(
      () => pendingNonce(relayer),
      (v) => v > relayerNonce,
    ),
    relayerNonce + 1,
    'the settlement is broadcast',
  );
  const deskNonce = await pub.getTransactionCount({ address: desk });
  await gw.stop('SIGKILL');
  await setMining(true);
  await mine(); // the settlement, broadcast before the kill, mines now
  gw = await startGateway();
  const done = await until(() => orderOf(pending.orderId), isOver);
  t.equal(done.status, 'delivered', 'the order completes after the restart');
  t.equal(await tokenBalance(n, tsla.address, buyer.address), BigInt(done.deliveredAtomic ?? -1), 'the buyer holds exactly the delivered shares');
  t.equal(stableBefore - (await stableBalance(n, buyer.address)), 5_000_000n, 'paid once');
  t.equal(await pub.getTransactionCount({ address: desk }), deskNonce + 1, 'one swap, no refund');
  t.equal(await pub.getTransactionCount({ address: relayer }), relayerNonce + 1, 'one settlement');

  const again = await fetch(`${gw.url}${path}`, { method: 'POST', headers: { 'payment-signature': header } });
  const replay = (await again.json()) as Order;
  t.same([again.status, replay.orderId, replay.swapTx], [200, pending.orderId, done.swapTx], 'the same payment sent again answers with the same order');
  t.equal(await pub.getTransactionCount({ address: desk }), deskNonce + 1, 'and swaps nothing more');
});

t.test('killed after settlement, before the swap is signed: the restart swaps once', async (t) => {
  const { buyer, path, header } = await signedBuy('4');
  const stableBefore = await stableBalance(n, buyer.address);
  const deskNonce = await pub.getTransactionCount({ address: desk });
  // The re-quote right before the swap stalls at the node: the order stops after its settlement, with nothing signed.
  gate.hold((call) => call.method === 'eth_call' && String((call.params?.[0] as { to?: string } | undefined)?.to).toLowerCase() === quoter);
  t.teardown(() => gate.release());
  const res = await fetch(`${gw.url}${path}`, { method: 'POST', headers: { 'payment-signature': header } });
  const pending = (await res.json()) as Order;
  t.equal(res.status, 202, 'the order is still running');
  const quoting = await until(
    () => orderOf(pending.orderId),
    (o) => o.status === 'quoting' && gate.held > 0,
  );
  t.equal(quoting.status, 'quoting', 'settled, and re-quoting before the swap');
  t.match(quoting.settlementTx, /^0x[0-9a-f]{64}$/, 'the settlement is on chain');
  t.equal(stableBefore - (await stableBalance(n, buyer.address)), 4_000_000n, 'the buyer has paid');
  t.equal(quoting.swapTx, undefined, 'no swap signed yet');
  await gw.stop('SIGKILL');
  gate.release();
  t.equal(await pub.getTransactionCount({ address: desk, blockTag: 'pending' }), deskNonce, 'the desk sent nothing before the kill');

  gw = await startGateway();
  const done = await until(() => orderOf(pending.orderId), isOver);
  t.equal(done.status, 'delivered', 'the restarted gateway delivers');
  t.equal(await tokenBalance(n, tsla.address, buyer.address), BigInt(done.deliveredAtomic ?? -1), 'the buyer holds exactly the delivered shares');
  t.equal(stableBefore - (await stableBalance(n, buyer.address)), 4_000_000n, 'paid once');
  t.equal(await pub.getTransactionCount({ address: desk }), deskNonce + 1, 'one swap in all');
});

t.test('killed with the swap signed and sent but not mined: the restart confirms that swap, never a second one', async (t) => {
  const { buyer, path, header } = await signedBuy('3');
  const deskNonce = await pub.getTransactionCount({ address: desk });
  const relayerNonce = await pendingNonce(relayer);
  await setMining(false);
  t.teardown(() => setMining(true));
  const res = await fetch(`${gw.url}${path}`, { method: 'POST', headers: { 'payment-signature': header } });
  const pending = (await res.json()) as Order;
  t.equal(res.status, 202, 'the order is still running');
  await until(
    () => pendingNonce(relayer),
    (v) => v > relayerNonce,
  );
  await mine(); // the settlement only: the swap is not sent yet
  const swapping = await until(
    () => orderOf(pending.orderId),
    (o) => o.status === 'confirmingSwap',
  );
  t.equal(swapping.status, 'confirmingSwap', 'the swap is signed, stored and sent');
  t.match(swapping.swapTx, /^0x[0-9a-f]{64}$/);
  await gw.stop('SIGKILL');
  await setMining(true);
  await mine();
  gw = await startGateway();
  const done = await until(() => orderOf(pending.orderId), isOver);
  t.equal(done.status, 'delivered', 'delivered');
  t.equal(done.swapTx, swapping.swapTx, 'by the swap signed before the kill');
  t.equal(await tokenBalance(n, tsla.address, buyer.address), BigInt(done.deliveredAtomic ?? -1), 'the buyer holds exactly the delivered shares');
  t.equal(await pub.getTransactionCount({ address: desk }), deskNonce + 1, 'one swap in all');
});

t.test('killed with the refund signed and sent but not mined: the restart confirms that refund, never a second one', async (t) => {
  const { buyer, path, header } = await signedBuy('4');
  const before = await stableBalance(n, buyer.address);
  // After the 402: a trader moves TSLA far above the floor, so the order will be refunded.
  t.equal((await buyInPool(n, funder, tsla, parseUnits('400000', 6))).status, 'success', 'a trader buys TSLA in size');
  const deskNonce = await pub.getTransactionCount({ address: desk });
  const relayerNonce = await pendingNonce(relayer);
  await setMining(false);
  t.teardown(() => setMining(true));
  const res = await fetch(`${gw.url}${path}`, { method: 'POST', headers: { 'payment-signature': header } });
  const pending = (await res.json()) as Order;
  t.equal(res.status, 202, 'the order is still running');
  await until(
    () => pendingNonce(relayer),
    (v) => v > relayerNonce,
  );
  await mine(); // the settlement only
  const refunding = await until(
    () => orderOf(pending.orderId),
    (o) => o.status === 'confirmingRefund',
  );
  t.equal(refunding.status, 'confirmingRefund', 'the refund is signed, stored and sent');
  t.equal(refunding.failure?.reason, 'below_slippage_floor', 'because the price moved below the floor');
  t.match(refunding.refundTx, /^0x[0-9a-f]{64}$/);
  t.equal(await pub.getTransactionCount({ address: desk }), deskNonce, 'not mined yet');
  await gw.stop('SIGKILL');
  await setMining(true);
  await mine();
  gw = await startGateway();
  const done = await until(() => orderOf(pending.orderId), isOver);
  t.equal(done.status, 'refunded', 'refunded');
  t.equal(done.refundTx, refunding.refundTx, 'by the refund signed before the kill');
  t.equal(await stableBalance(n, buyer.address), before, "the buyer's stablecoin B is back, once");
  t.equal(await tokenBalance(n, tsla.address, buyer.address), 0n, 'no stock delivered');
  t.equal(await pub.getTransactionCount({ address: desk }), deskNonce + 1, 'one refund in all, no swap');
});
