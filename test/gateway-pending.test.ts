import t, { type Test } from 'tap';
import { gatewayOnOwnDevnet } from './helpers/paid-gateway.ts';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import { Mppx, evm } from 'mppx/client';
import { parseUnits, type Address, type Hex } from 'viem';
import { CAIP2 } from '../src/chain/canonical.ts';
import type { NetworkEntry } from '../src/chain/network-types.ts';
import { rpcCall } from '../src/chain/rpc.ts';
import { DEVNET_UPSTREAM_SECRET } from '../src/cli/service.ts';
import { verifyReceipt } from '../src/protocol/mpp/receipt.ts';
import type { PaymentRequirements } from '../src/protocol/x402/types.ts';
import { clientsFor, freshAccount, tester } from './helpers/devnet.ts';
import { fundedPayer, officialPayment, stableBalance } from './helpers/payments.ts';

// Pausing mining would stall every other test on the shared devnet, so this file runs its own chains.
const { devnet, fixtures, gw } = await gatewayOnOwnDevnet(t, 'pending', {
  GATE402_CONFIRM_DEADLINE_MS: '800',
  GATE402_RECEIPT_POLL_MS: '50',
});

const query = 'params%5Btopic%5D=naps&lang=en';
const url = `${gw.url}/m/catjoke/joke?${query}`;
const price = 10_000n;
const funder = tester('gateway');

function chain(caip2: string): NetworkEntry {
  const n = devnet.manifest.networks[caip2];
  if (!n) throw new Error(`the devnet has no ${caip2}`);
  return n;
}

async function directUpstreamBody(): Promise<string> {
  const res = await fetch(`${fixtures.baseUrlFor('catjoke')}/joke?${query}`, { headers: { 'x-api-key': DEVNET_UPSTREAM_SECRET } });
  return res.text();
}

/**
 * With mining paused on the chain paid on: the paid request answers 202 naming the broadcast transaction, and
 * nothing has moved or been served; once a block is mined, the same credential gets the resource, charged once.
 * Returns the headers of the 202 and of the 200 for protocol-specific checks.
 */
async function pendingThenServed(t: Test, opts: { caip2: string; n: NetworkEntry; payer: Address; merchant: Address; credential: Record<string, string> }) {
  const { caip2, n, payer, merchant, credential } = opts;
  const { pub } = clientsFor(n, freshAccount());
  const merchantBefore = await stableBalance(n, merchant);
  const payerBefore = await stableBalance(n, payer);
  const send = () => fetch(url, { headers: credential });

  await rpcCall(n.rpcUrl, 'evm_setAutomine', [false]);
  t.teardown(() => rpcCall(n.rpcUrl, 'evm_setAutomine', [true]));
  const callsBefore = fixtures.calls;
  const res = await send();
  const text = await res.text();
  t.equal(res.status, 202, `202 Accepted: ${text}`);
  t.match(res.headers.get('content-type'), /application\/json/, 'a JSON body');
  t.equal(res.headers.get('cache-control'), 'no-store', 'that no cache keeps');
  const body = JSON.parse(text) as { status: string; transaction: Hex; network: string; detail: string };
  t.equal(body.status, 'pending', 'status: pending');
  t.equal(body.network, caip2, 'on the chain paid on');
  t.match(body.transaction, /^0x[0-9a-f]{64}$/, 'the body names the transaction hash');
  t.match(body.detail, /same credential/, 'and says how to fetch the result');
  const sent = await pub.getTransaction({ hash: body.transaction });
  t.equal(sent.blockNumber, null, 'that transaction is broadcast, waiting in the pool');
  t.equal(await stableBalance(n, payer), payerBefore, 'the buyer has not paid yet');
  t.equal(await stableBalance(n, merchant), merchantBefore, 'nor the merchant been paid');
  t.equal(fixtures.calls, callsBefore, 'and the upstream has not been called');

  const stillPending = await send();
  const still = (await stillPending.json()) as { status: string; transaction: string };
  t.equal(stillPending.status, 202, 'asking again before it confirms: still pending');
  t.equal(still.transaction, body.transaction, 'with the same transaction, not a second one');
  const pool = await rpcCall<{ pending: Record<string, Record<string, unknown>> }>(n.rpcUrl, 'txpool_content', []);
  t.equal(
    Object.values(pool.pending).reduce((k, byNonce) => k + Object.keys(byNonce).length, 0),
    1,
    'one transaction in the pool',
  );
  t.equal(fixtures.calls, callsBefore, 'the upstream still has not been called');

  await rpcCall(n.rpcUrl, 'evm_mine', []);
  const mined = await pub.getTransactionReceipt({ hash: body.transaction });
  t.equal(mined.status, 'success', 'the named transaction is mined');

  // The gateway learns of the block by polling; on a busy machine the first ask after mining may still be pending.
  let served = await send();
  for (let i = 0; i < 60 && served.status === 202; i++) {
    const again = (await served.json()) as { transaction: string };
    t.equal(again.transaction, body.transaction, 'still pending: the same transaction');
    served = await send();
  }
  const servedText = await served.text();
  t.equal(served.status, 200, 'the same credential, once mined: 200');
  t.equal(fixtures.calls - callsBefore, 1, 'exactly one upstream call');
  t.equal(servedText, await directUpstreamBody(), "the upstream's body, verbatim");
  t.equal(await stableBalance(n, payer), payerBefore - price, 'the buyer paid the price, once');
  t.equal((await stableBalance(n, merchant)) - merchantBefore, price, 'the merchant received it, once');

  const callsServed = fixtures.calls;
  const replays = await Promise.all(Array.from({ length: 5 }, send));
  t.ok(
    replays.every((r) => r.status === 402),
    `further replays are refused (${replays.map((r) => r.status).join(',')})`,
  );
  await Promise.all(replays.map((r) => r.arrayBuffer()));
  await rpcCall(n.rpcUrl, 'evm_mine', []);
  t.equal(fixtures.calls, callsServed, 'no second upstream call');
  t.equal(await stableBalance(n, payer), payerBefore - price, 'no second transfer');
  t.equal((await stableBalance(n, merchant)) - merchantBefore, price, 'the merchant still has it once');
  return { pending: res.headers, served: served.headers, transaction: body.transaction };
}

t.test('x402 on eip155:8453 (EIP-3009): 202 while unconfirmed, then the resource for the same credential, paid once', async (t) => {
  const n = chain(CAIP2.base);
  const payer = await fundedPayer(n, CAIP2.base, funder, parseUnits('1', 6));
  const unpaid = await fetch(url);
  t.equal(unpaid.status, 402, 'unpaid: 402');
  await unpaid.arrayBuffer();
  const offer = decodePaymentRequiredHeader(unpaid.headers.get('payment-required') as string).accepts.find((o) => o.network === CAIP2.base);
  if (!offer) throw new Error('no eip155:8453 offer');
  t.equal(offer.amount, String(price), 'priced 0.01 USD');
  const payment = await officialPayment(payer, offer as PaymentRequirements);
  const credential = { 'payment-signature': encodePaymentSignatureHeader(payment as Parameters<typeof encodePaymentSignatureHeader>[0]) };

  const seen = await pendingThenServed(t, { caip2: CAIP2.base, n, payer: payer.address, merchant: offer.payTo as Address, credential });
  const pending = decodePaymentResponseHeader(seen.pending.get('payment-response') as string);
  t.same([pending.success, pending.transaction, pending.network], [false, seen.transaction, CAIP2.base], 'the 202 carries a PAYMENT-RESPONSE naming the transaction');
  t.equal((pending as { status?: string }).status, 'pending', 'PAYMENT-RESPONSE status: pending');
  const settled = decodePaymentResponseHeader(seen.served.get('payment-response') as string);
  t.same([settled.success, settled.transaction, settled.payer?.toLowerCase()], [true, seen.transaction, payer.address.toLowerCase()], 'the 200 settles by that same transaction');
});

t.test('MPP on the stock chain: 202 while unconfirmed, then the resource with a receipt, paid once', async (t) => {
  const n = chain(CAIP2.stockChain);
  const payer = await fundedPayer(n, CAIP2.stockChain, funder, parseUnits('1', 6), { approvePermit2: false });
  const mppx = Mppx.create({ methods: [evm({ account: payer, authorization: { name: n.stablecoin.name, version: n.stablecoin.version } })], polyfill: false });
  const unpaid = await fetch(url);
  t.equal(unpaid.status, 402, 'unpaid: 402');
  const recipient = decodePaymentRequiredHeader(unpaid.headers.get('payment-required') as string).accepts.find((o) => o.network === CAIP2.stockChain)?.payTo;
  if (!recipient) throw new Error('no stock chain offer: the MPP charge pays the same merchant');
  const credential = { authorization: await mppx.createCredential(unpaid) };

  const seen = await pendingThenServed(t, { caip2: CAIP2.stockChain, n, payer: payer.address, merchant: recipient as Address, credential });
  t.equal(seen.pending.get('payment-receipt'), null, 'no receipt while the payment is unconfirmed');
  const receipt = seen.served.get('payment-receipt');
  t.ok(receipt, 'a Payment-Receipt once it is served');
  const signer = ((await (await fetch(`${gw.url}/.well-known/gate402`)).json()) as { receiptSigner: string }).receiptSigner;
  const verified = await verifyReceipt(receipt as string, signer);
  t.ok(verified.ok, `signed by the gateway (${JSON.stringify(verified)})`);
  if (verified.ok) t.same([verified.value.status, verified.value.reference], ['success', seen.transaction], 'naming the transaction the 202 named');
});
