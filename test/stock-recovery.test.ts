import t from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseUnits } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { CAIP2 } from '../src/chain/canonical.ts';
import { rpcCall } from '../src/chain/rpc.ts';
import { decodePaymentRequiredHeader, encodePaymentSignatureHeader } from '../src/protocol/x402/headers.ts';
import { clientsFor, tester } from './helpers/devnet.ts';
import { fundedPayer, officialPayment, stableBalance } from './helpers/payments.ts';
import { spawnDevnet } from './helpers/spawn-devnet.ts';
import { spawnFacilitator, type SpawnedFacilitator } from './helpers/spawn-facilitator.ts';
import { gassedKey, tokenBalance } from './helpers/stock.ts';

// Pausing mining would stall every other test, so this file runs its own chains.
const devnet = await spawnDevnet(resolve('.tap/stock-recovery/manifest.json'));
t.teardown(async () => {
  devnet.child.kill('SIGTERM');
  await new Promise((r) => devnet.child.once('exit', r));
});
const n = devnet.manifest.networks[CAIP2.stockChain];
const tsla = n?.stocks?.find((s) => s.symbol === 'TSLA');
if (!n || !tsla) throw new Error('no stock chain with TSLA');
const funder = tester('stock');
const { pub } = clientsFor(n, funder);
const setMining = (on: boolean) => rpcCall(n.rpcUrl, 'evm_setAutomine', [on]);
const mine = () => rpcCall(n.rpcUrl, 'evm_mine', []);

const deskKey = await gassedKey(n);
const desk = privateKeyToAccount(deskKey).address;
const relayerKey = await gassedKey(n);
const dataDir = mkdtempSync(join(tmpdir(), 'gate402-stock-recovery-'));
const startGateway = () =>
  spawnFacilitator({
    part: 'gateway',
    manifestPath: devnet.manifestPath,
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

type Order = { orderId: string; status: string; deliveredAtomic?: string; swapTx?: string; refundTx?: string; settlementTx?: string };

/** A signed buy of TSLA for `amount`, made by the official client scheme against the gateway's own 402 terms. */
async function signedBuy(gw: SpawnedFacilitator, amount: string) {
  const buyer = await fundedPayer(n!, CAIP2.stockChain, funder, parseUnits('20', 6));
  const path = `/api/stock/buy?symbol=TSLA&stable_amount=${amount}`;
  const challenge = await fetch(`${gw.url}${path}`, { method: 'POST' });
  await challenge.arrayBuffer();
  const terms = decodePaymentRequiredHeader(challenge.headers.get('payment-required') ?? '');
  if (!terms.ok) throw new Error('no payment terms');
  const header = encodePaymentSignatureHeader(await officialPayment(buyer, terms.value.accepts[0]!));
  return { buyer, path, header };
}

async function orderOf(gw: SpawnedFacilitator, id: string): Promise<Order> {
  return (await (await fetch(`${gw.url}/api/stock/order/${id}`)).json()) as Order;
}

async function until(gw: SpawnedFacilitator, id: string, done: (o: Order) => boolean, ms = 30_000): Promise<Order> {
  const deadline = Date.now() + ms;
  for (;;) {
    const o = await orderOf(gw, id);
    if (done(o) || Date.now() > deadline) return o;
    await new Promise((r) => setTimeout(r, 100));
  }
}

t.test('killed between settlement and swap: the restarted gateway completes the order exactly once', async (t) => {
  let gw = await startGateway();
  const { buyer, path, header } = await signedBuy(gw, '5');
  const stableBefore = await stableBalance(n, buyer.address);
  await setMining(false);
  const res = await fetch(`${gw.url}${path}`, { method: 'POST', headers: { 'payment-signature': header } });
  const pending = (await res.json()) as Order;
  t.equal(res.status, 202, 'the order is still running when the buy answers');
  t.equal(pending.status, 'settling', 'waiting on its settlement');
  const deskNonce = await pub.getTransactionCount({ address: desk });
  await gw.stop('SIGKILL');
  await setMining(true);
  await mine(); // the settlement, broadcast before the kill, mines now
  gw = await startGateway();
  t.teardown(() => gw.stop());
  const done = await until(gw, pending.orderId, (o) => o.status === 'delivered' || o.status === 'refunded');
  t.equal(done.status, 'delivered', 'the order completes after the restart');
  t.equal(await tokenBalance(n, tsla.address, buyer.address), BigInt(done.deliveredAtomic ?? -1), 'the buyer holds exactly the delivered shares');
  t.equal(stableBefore - (await stableBalance(n, buyer.address)), 5_000_000n, 'paid once');
  t.equal(await pub.getTransactionCount({ address: desk }), deskNonce + 1, 'one swap, no refund');

  const again = await fetch(`${gw.url}${path}`, { method: 'POST', headers: { 'payment-signature': header } });
  const replay = (await again.json()) as Order;
  t.same([again.status, replay.orderId, replay.swapTx], [200, pending.orderId, done.swapTx], 'the same payment sent again answers with the same order');
  t.equal(await pub.getTransactionCount({ address: desk }), deskNonce + 1, 'and swaps nothing more');
});

t.test('killed with the swap signed and sent but not mined: the restart confirms that swap, never a second one', async (t) => {
  let gw = await startGateway();
  const { buyer, path, header } = await signedBuy(gw, '3');
  const deskNonce = await pub.getTransactionCount({ address: desk });
  await setMining(false);
  const res = await fetch(`${gw.url}${path}`, { method: 'POST', headers: { 'payment-signature': header } });
  const pending = (await res.json()) as Order;
  t.equal(res.status, 202, 'the order is still running');
  await mine(); // the settlement only: the swap is not sent yet
  const swapping = await until(gw, pending.orderId, (o) => o.status === 'confirmingSwap');
  t.equal(swapping.status, 'confirmingSwap', 'the swap is signed, stored and sent');
  t.match(swapping.swapTx, /^0x[0-9a-f]{64}$/);
  await gw.stop('SIGKILL');
  await setMining(true);
  await mine();
  gw = await startGateway();
  t.teardown(() => gw.stop());
  const done = await until(gw, pending.orderId, (o) => o.status === 'delivered' || o.status === 'refunded');
  t.equal(done.status, 'delivered', 'delivered');
  t.equal(done.swapTx, swapping.swapTx, 'by the swap signed before the kill');
  t.equal(await tokenBalance(n, tsla.address, buyer.address), BigInt(done.deliveredAtomic ?? -1), 'the buyer holds exactly the delivered shares');
  t.equal(await pub.getTransactionCount({ address: desk }), deskNonce + 1, 'one swap in all');
});
