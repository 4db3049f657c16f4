// The official `batch-settlement` SERVER with gate402's facilitator as its facilitator: a merchant made only of the
// official pieces (`@x402/core`'s resource server and HTTP facilitator client, `@x402/express`'s middleware, the
// official `@x402/evm/batch-settlement/server` scheme and its channel manager) whose facilitator URL is a spawned
// `gate402 facilitator`, paid by the official `@x402/fetch` with the official batch-settlement client. What the merchant
// notices: its handler runs once per paid request, the payer's tokens move once (the deposit, settled by gate402's
// relayers), and after the channel manager's claim and settle, both sent to gate402's /settle, the receiver holds
// exactly price x requests and the channel's totalClaimed says the same; the manager's refund returns the rest to the
// payer (alone, or with the claim of unclaimed charges in one transaction). What an attacker sends to /settle with the
// same payloads (again, unsigned, signed by a stranger, with nothing to do) costs no gas. On the shared devnet.
import t from 'tap';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { x402Client } from '@x402/core/client';
import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';
import { HTTPFacilitatorClient, x402ResourceServer } from '@x402/core/server';
import { BatchSettlementEvmScheme as OfficialClientScheme } from '@x402/evm/batch-settlement/client';
import { BatchSettlementChannelManager, BatchSettlementEvmScheme as OfficialServerScheme } from '@x402/evm/batch-settlement/server';
import { paymentMiddleware } from '@x402/express';
import { wrapFetchWithPayment } from '@x402/fetch';
import { parseEther, parseUnits, toHex, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { CAIP2 } from '../src/chain/canonical.ts';
import { rpcCall } from '../src/chain/rpc.ts';
import { channelOnChain, newMerchant, randomSalt } from './helpers/channels.ts';
import { clientsFor, network, tester, testDevnet, TEST_MANIFEST_PATH } from './helpers/devnet.ts';
import { fundedPayer, postJson, stableBalance } from './helpers/payments.ts';
import { spawnFacilitator } from './helpers/spawn-facilitator.ts';

const manifest = testDevnet();
const base = network(manifest, CAIP2.base);
const funder = tester('officialServer');
const PRICE = 1000n;
const DEPOSIT = 50_000n;
const VOUCHERS = 12;

// Fresh relayer keys, used by nothing else: their nonces count exactly the facilitator's transactions.
const relayerKeys = [generatePrivateKey(), generatePrivateKey()];
const relayers = relayerKeys.map((k) => privateKeyToAccount(k).address.toLowerCase());
for (const r of relayers) await rpcCall(base.rpcUrl, 'anvil_setBalance', [r, toHex(parseEther('10'))]);
const relayerTxCount = async () => {
  const { pub } = clientsFor(base, funder);
  const counts = await Promise.all(relayers.map((r) => pub.getTransactionCount({ address: r as Hex, blockTag: 'latest' })));
  return counts.reduce((a, b) => a + b, 0);
};

const fac = await spawnFacilitator({
  manifestPath: TEST_MANIFEST_PATH,
  env: {
    GATE402_RELAYER_KEYS: relayerKeys.join(','),
    GATE402_FACILITATOR_PAYER_RATE_CAPACITY: '1000',
    GATE402_FACILITATOR_PAYER_RATE_PER_SECOND: '1000',
    GATE402_FACILITATOR_RATE_CAPACITY: '1000',
    GATE402_FACILITATOR_RATE_PER_SECOND: '1000',
  },
});
t.teardown(() => fac.stop());

type Sent = { payload: PaymentPayload; requirements: PaymentRequirements };
/** The official HTTP facilitator client, keeping what it sent to /settle (to be sent again by an attacker). */
class RecordingFacilitator extends HTTPFacilitatorClient {
  readonly sent: Sent[] = [];
  override settle(payload: PaymentPayload, requirements: PaymentRequirements) {
    this.sent.push({ payload, requirements });
    return super.settle(payload, requirements);
  }
}

/** A merchant made of the official server pieces only, its facilitator gate402's. */
async function officialMerchant(merchant: ReturnType<typeof newMerchant>) {
  const facilitator = new RecordingFacilitator({ url: fac.url });
  const scheme = new OfficialServerScheme(merchant.receiver, { receiverAuthorizerSigner: merchant.authorizer, withdrawDelay: 900 });
  const resourceServer = new x402ResourceServer(facilitator).register(CAIP2.base, scheme);
  const served = { count: 0 };
  const app = express();
  app.use(
    paymentMiddleware(
      {
        'GET /report': {
          accepts: {
            scheme: 'batch-settlement',
            network: CAIP2.base,
            payTo: merchant.receiver,
            price: { amount: PRICE.toString(), asset: base.stablecoin.address, extra: { name: base.stablecoin.name, version: base.stablecoin.version, minDeposit: DEPOSIT.toString() } },
            maxTimeoutSeconds: 300,
          },
          description: 'a paid report',
          mimeType: 'application/json',
        },
      },
      resourceServer,
    ),
  );
  app.get('/report', (_req, res) => {
    served.count += 1;
    res.json({ report: served.count });
  });
  const listener = await new Promise<ReturnType<typeof app.listen>>((resolve) => {
    const l = app.listen(0, '127.0.0.1', () => resolve(l));
  });
  t.teardown(() => new Promise<void>((r) => listener.close(() => r())));
  const url = `http://127.0.0.1:${(listener.address() as AddressInfo).port}/report`;
  const manager = new BatchSettlementChannelManager({ scheme, facilitator, receiver: merchant.receiver, token: base.stablecoin.address, network: CAIP2.base });
  return { url, served, manager, scheme, facilitator };
}

function officialBuyer(payer: Awaited<ReturnType<typeof fundedPayer>>) {
  const { pub } = clientsFor(base, payer);
  const signer = {
    address: payer.address,
    signTypedData: (m: Parameters<typeof payer.signTypedData>[0]) => payer.signTypedData(m),
    readContract: (args: Parameters<typeof pub.readContract>[0]) => pub.readContract(args),
  };
  const scheme = new OfficialClientScheme(signer as never, { salt: randomSalt() });
  // The devnet's stablecoin is no default asset of the client's spend controls.
  return wrapFetchWithPayment(fetch, x402Client.fromConfig({ schemes: [], spendControls: false }).register(CAIP2.base, scheme));
}

/** A fresh official merchant and a funded buyer paying through the official client, with the balances before. */
async function openShop() {
  const merchant = newMerchant();
  const shop = await officialMerchant(merchant);
  const payer = await fundedPayer(base, CAIP2.base, funder, parseUnits('1', 6));
  return { merchant, shop, payer, pay: officialBuyer(payer), payerBefore: await stableBalance(base, payer.address), txsBefore: await relayerTxCount() };
}

t.test('the official server, gate402 facilitating: deposit settled once, vouchers served, claim and settle pay the receiver exactly', async (t) => {
  const { merchant, shop, payer, pay, payerBefore, txsBefore } = await openShop();

  const requests = 1 + VOUCHERS;
  for (let i = 0; i < requests; i++) {
    const res = await pay(shop.url);
    t.equal(res.status, 200, `request ${i + 1} served`);
    t.same(await res.json(), { report: i + 1 });
  }
  t.equal(shop.served.count, requests, 'the handler ran once per paid request');
  t.equal(payerBefore - (await stableBalance(base, payer.address)), DEPOSIT, 'the payer paid once: the deposit');
  t.equal(await relayerTxCount(), txsBefore + 1, "one transaction so far, gate402's deposit");
  const channels = await shop.scheme.getStorage().list();
  t.equal(channels.length, 1, 'the official server holds one channel');
  const channelId = channels[0]?.channelId as Hex;
  t.equal(channels[0]?.chargedCumulativeAmount, (PRICE * BigInt(requests)).toString(), 'and charged price x requests on it');
  t.same(await channelOnChain(base, channelId), { balance: DEPOSIT, totalClaimed: 0n }, 'the channel on chain: the deposit, nothing claimed');
  t.equal(await stableBalance(base, merchant.receiver), 0n, 'nothing reached the receiver before the claim');

  const done = await shop.manager.claimAndSettle();
  t.equal(done.claims.length, 1, 'one claim batch');
  t.equal(done.claims[0]?.vouchers, 1, 'of one voucher');
  t.match(done.settle?.transaction, /^0x[0-9a-f]{64}$/, 'and a settle transaction');
  t.same(await channelOnChain(base, channelId), { balance: DEPOSIT, totalClaimed: PRICE * BigInt(requests) }, "the channel's totalClaimed is price x requests");
  t.equal(await stableBalance(base, merchant.receiver), PRICE * BigInt(requests), 'the receiver holds exactly price x requests');
  t.equal(await relayerTxCount(), txsBefore + 3, "three transactions in all, each sent by gate402's relayers: deposit, claim, settle");

  // What an attacker can make of the claim and the sweep at our open /settle: nothing that costs a relayer gas.
  const ofType = (type: string) => shop.facilitator.sent.find((s) => (s.payload.payload as { type?: string }).type === type) as Sent;
  const claim = ofType('claim');
  const sweep = ofType('settle');
  const settleBody = (payload: PaymentPayload['payload'], requirements = claim.requirements) => ({ x402Version: 2, paymentPayload: { ...claim.payload, payload }, paymentRequirements: requirements });
  const answer = async (body: unknown) => {
    const r = await postJson(`${fac.url}/settle`, body);
    t.equal(r.status, 200, 'answered 200');
    return r.json as { success: boolean; transaction: string; errorReason?: string };
  };
  const txsAfter = await relayerTxCount();
  const again = await answer({ x402Version: 2, paymentPayload: claim.payload, paymentRequirements: claim.requirements });
  t.same([again.success, again.transaction], [true, done.claims[0]?.transaction], 'the same claim asked again: its recorded answer');
  const claimed = claim.payload.payload as { claims: Array<{ totalClaimed: string }>; claimAuthorizerSignature: Hex };
  const { claimAuthorizerSignature: _signature, ...unsigned } = claimed;
  t.equal((await answer(settleBody(unsigned))).errorReason, 'invalid_batch_settlement_evm_claim_payload', 'a claim not signed by the receiver authorizer is refused');
  const stranger = privateKeyToAccount(generatePrivateKey());
  const strangerSigned = { ...claimed, claimAuthorizerSignature: await stranger.signMessage({ message: 'not the claim batch' }) };
  t.equal((await answer(settleBody(strangerSigned))).errorReason, 'invalid_batch_settlement_evm_receiver_authorizer_mismatch', 'a claim signed by anyone else is refused');
  t.equal((await answer(settleBody({ type: 'claim', claims: [] }))).errorReason, 'invalid_batch_settlement_evm_claim_payload', 'an empty claim is refused');
  const sweepAgain = await answer({ x402Version: 2, paymentPayload: sweep.payload, paymentRequirements: sweep.requirements });
  t.same([sweepAgain.success, sweepAgain.transaction], [true, done.settle?.transaction], 'the same sweep asked again: its recorded answer');
  const otherReceiver = { type: 'settle', receiver: stranger.address, token: base.stablecoin.address };
  t.equal((await answer(settleBody(otherReceiver))).errorReason, 'invalid_batch_settlement_evm_nothing_to_settle', 'a sweep of a receiver with nothing claimed is refused');
  t.equal(await relayerTxCount(), txsAfter, 'none of these sent a transaction');
  t.equal(await stableBalance(base, merchant.receiver), PRICE * BigInt(requests), "and the receiver's balance is as it was");

  // The merchant refunds the rest cooperatively: the manager's refund, sent by gate402's relayers.
  const charged = PRICE * BigInt(requests);
  const refunded = await shop.manager.refund([channelId]);
  t.equal(refunded.length, 1, 'the channel is refunded');
  t.match(refunded[0]?.transaction, /^0x[0-9a-f]{64}$/);
  t.equal(payerBefore - (await stableBalance(base, payer.address)), charged, 'the payer got the rest back: it paid exactly price x requests');
  t.same(await channelOnChain(base, channelId), { balance: charged, totalClaimed: charged }, 'the channel keeps only what was claimed');
  t.equal(await stableBalance(base, merchant.receiver), charged, 'the receiver keeps what it was paid');
  t.equal(await relayerTxCount(), txsAfter + 1, 'one transaction: the refund');
  const refund = ofType('refund');
  const refundAgain = await answer({ x402Version: 2, paymentPayload: refund.payload, paymentRequirements: refund.requirements });
  t.same([refundAgain.success, refundAgain.transaction], [true, refunded[0]?.transaction], 'the same refund asked again: its recorded answer');
  const forged = { ...(refund.payload.payload as Record<string, unknown>), refundNonce: '1', refundAuthorizerSignature: await stranger.signMessage({ message: 'a refund' }) };
  t.equal((await answer(settleBody(forged))).errorReason, 'invalid_batch_settlement_evm_receiver_authorizer_mismatch', 'a refund not signed by the receiver authorizer is refused');
  t.equal(await relayerTxCount(), txsAfter + 1, 'and sends nothing');
});

t.test('a refund of a channel with unclaimed charges: claimed and refunded in one transaction, then swept', async (t) => {
  const { merchant, shop, payer, pay, payerBefore, txsBefore } = await openShop();
  const requests = 3;
  for (let i = 0; i < requests; i++) t.equal((await pay(shop.url)).status, 200, `request ${i + 1} served`);
  t.equal(shop.served.count, requests, 'the handler ran once per paid request');
  const channelId = (await shop.scheme.getStorage().list())[0]?.channelId as Hex;
  const charged = PRICE * BigInt(requests);

  const refunded = await shop.manager.refund([channelId]);
  t.equal(refunded.length, 1, 'refunded');
  const sent = shop.facilitator.sent.find((s) => (s.payload.payload as { type?: string }).type === 'refund');
  t.equal((sent?.payload.payload as { claims?: unknown[] } | undefined)?.claims?.length, 1, 'the refund carried the claim of the unclaimed charges');
  t.same(await channelOnChain(base, channelId), { balance: charged, totalClaimed: charged }, 'claimed and refunded at once: the channel keeps exactly the charges');
  t.equal(payerBefore - (await stableBalance(base, payer.address)), charged, 'the payer paid exactly price x requests');
  t.equal(await relayerTxCount(), txsBefore + 2, 'two transactions: the deposit, then the claim and refund together');

  const swept = await shop.manager.settle();
  t.match(swept.transaction, /^0x[0-9a-f]{64}$/, 'the sweep');
  t.equal(await stableBalance(base, merchant.receiver), charged, 'the receiver holds exactly price x requests');
  t.equal(await relayerTxCount(), txsBefore + 3, 'and one transaction more');
});
