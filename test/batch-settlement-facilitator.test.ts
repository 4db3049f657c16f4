// gate402's facilitator serving x402 `batch-settlement` channels to the official clients: /supported lists the scheme
// where its contracts stand, a deposit made by the official client (EIP-3009 on Base, Permit2 on the stock chain) is
// verified and settled by gate402's relayers through the engine (balances moved exactly, relayers paid the gas),
// settled once however often it is asked, a voucher on the channel verifies, and a facilitator killed after the
// deposit was broadcast finishes it from its record with one transaction; so does one killed after broadcasting a
// receiver's claim (as the official server's channel manager sends it). On chains of this file's own (it pauses
// mining).
import t, { type Test } from 'tap';
import { rmSync } from 'node:fs';
import { HTTPFacilitatorClient } from '@x402/core/http';
import { parseEther, parseUnits, toHex, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { BATCH_SETTLEMENT_ADDRESS, CAIP2, ERC3009_DEPOSIT_COLLECTOR_ADDRESS } from '../src/chain/canonical.ts';
import { rpcCall } from '../src/chain/rpc.ts';
import { clientsFor, tester } from './helpers/devnet.ts';
import { claimBatchTypedData } from '../src/schemes/batch-settlement/claim-batch.ts';
import { channelOnChain, newMerchant, offerOn, officialChannelClient, officialChannelPayment } from './helpers/channels.ts';
import { fundedPayer, postJson, stableBalance } from './helpers/payments.ts';
import { spawnOwnDevnet } from './helpers/spawn-devnet.ts';
import { spawnFacilitator, type SpawnedFacilitator } from './helpers/spawn-facilitator.ts';
import { tempDir } from './helpers/temp-dir.ts';

const devnet = await spawnOwnDevnet('channels-facilitator');
t.teardown(() => devnet.stop());
const net = (caip2: string) => {
  const n = devnet.manifest.networks[caip2];
  if (!n) throw new Error(`no ${caip2}`);
  return n;
};
const base = net(CAIP2.base);
const stock = net(CAIP2.stockChain);
// Fresh relayer keys, used by nothing else: their nonces count exactly the facilitator's transactions.
const relayerKeys = [generatePrivateKey(), generatePrivateKey()];
const relayers = relayerKeys.map((k) => privateKeyToAccount(k).address.toLowerCase());
for (const n of [base, stock]) for (const r of relayers) await rpcCall(n.rpcUrl, 'anvil_setBalance', [r, toHex(parseEther('10'))]);
const env = {
  GATE402_RELAYER_KEYS: relayerKeys.join(','),
  GATE402_CONFIRM_DEADLINE_MS: '1500',
  GATE402_RECEIPT_POLL_MS: '100',
  GATE402_FACILITATOR_PAYER_RATE_CAPACITY: '1000',
  GATE402_FACILITATOR_PAYER_RATE_PER_SECOND: '1000',
};
const funder = tester('channelsFacilitator');
const PRICE = 1000n;
const DEPOSIT = 100_000n;

const relayerTxCount = async (n: typeof base) => {
  const { pub } = clientsFor(n, funder);
  const counts = await Promise.all(relayers.map((r) => pub.getTransactionCount({ address: r as Hex, blockTag: 'latest' })));
  return counts.reduce((a, b) => a + b, 0);
};
const resumeMining = async (n: typeof base) => {
  await rpcCall(n.rpcUrl, 'evm_setAutomine', [true]);
  await rpcCall(n.rpcUrl, 'evm_mine', []);
};
const pauseMining = async (t: Test, n: typeof base) => {
  await rpcCall(n.rpcUrl, 'evm_setAutomine', [false]);
  t.teardown(() => resumeMining(n));
};
type Settle = { success: boolean; transaction: string; status?: string; errorReason?: string; payer?: string; amount?: string; extra?: { channelState?: Record<string, unknown> } };
const settleUntilFinal = async (fac: SpawnedFacilitator, body: unknown): Promise<Settle> => {
  for (;;) {
    const r = (await postJson(`${fac.url}/settle`, body)).json as Settle;
    if (r.status !== 'pending') return r;
    await new Promise((res) => setTimeout(res, 100));
  }
};

/**
 * `body` sent at /settle to `first` while mining is paused (answered pending, with the broadcast hash), `first` killed,
 * another started on the records in `dir`, and mining resumed.
 */
const broadcastThenKill = async (t: Test, first: SpawnedFacilitator, body: unknown, dir: string) => {
  const txsBefore = await relayerTxCount(base);
  await pauseMining(t, base);
  const pending = (await postJson(`${first.url}/settle`, body)).json as Settle;
  t.equal(pending.status, 'pending', JSON.stringify(pending));
  t.match(pending.transaction, /^0x[0-9a-f]{64}$/, 'with the broadcast hash');
  await first.stop('SIGKILL');
  const second = await spawnFacilitator({ manifestPath: devnet.manifestPath, env, dataDir: dir });
  t.teardown(() => second.stop());
  await resumeMining(base);
  return { pending, second, txsBefore };
};

// Its records in a directory of this file's: the last test kills it and starts another on the same records.
const dataDir = tempDir('channels-facilitator');
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const fac = await spawnFacilitator({ manifestPath: devnet.manifestPath, env, dataDir });
t.teardown(() => fac.stop('SIGKILL'));
const official = new HTTPFacilitatorClient({ url: fac.url });

t.test('/supported lists batch-settlement on every devnet chain, where its contracts stand', async (t) => {
  const supported = await official.getSupported();
  const channels = supported.kinds.filter((k) => k.scheme === 'batch-settlement').map((k) => k.network);
  t.same(channels.sort(), Object.keys(devnet.manifest.networks).sort());
  t.ok(
    supported.kinds.some((k) => k.scheme === 'exact'),
    'exact is still listed',
  );
});

for (const [caip2, method] of [
  [CAIP2.base, 'eip3009'],
  [CAIP2.stockChain, 'permit2'],
] as const) {
  t.test(`the official client's ${method} deposit on ${caip2}: verified, settled once by a relayer, balances moved exactly`, async (t) => {
    const n = net(caip2);
    const payer = await fundedPayer(n, caip2, funder, parseUnits('1', 6));
    const merchant = newMerchant();
    const offer = offerOn(n, merchant, { price: PRICE, deposit: DEPOSIT, method });
    const payment = await officialChannelPayment(officialChannelClient(n, payer), offer);
    t.equal(payment.payload.type, 'deposit');
    const channelId = (payment.payload.voucher as { channelId: Hex }).channelId;
    const verified = await official.verify(payment as never, offer as never);
    t.same({ isValid: verified.isValid, payer: verified.payer?.toLowerCase() }, { isValid: true, payer: payer.address.toLowerCase() }, JSON.stringify(verified));
    t.same((verified as { extra?: unknown }).extra, { channelId, balance: '0', totalClaimed: '0', withdrawRequestedAt: 0, refundNonce: '0' }, "verify answers the channel's state before the deposit");

    const payerBefore = await stableBalance(n, payer.address);
    const contractBefore = await stableBalance(n, BATCH_SETTLEMENT_ADDRESS);
    const txsBefore = await relayerTxCount(n);
    const settled = (await official.settle(payment as never, offer as never)) as Settle;
    t.equal(settled.success, true, JSON.stringify(settled));
    t.equal(settled.payer?.toLowerCase(), payer.address.toLowerCase());
    t.equal(settled.amount, DEPOSIT.toString(), 'the amount deposited');
    t.same(settled.extra?.channelState, { channelId, balance: DEPOSIT.toString(), totalClaimed: '0', withdrawRequestedAt: 0, refundNonce: '0' }, "the channel's state after the deposit");
    const receipt = await clientsFor(n, funder).pub.getTransactionReceipt({ hash: settled.transaction as Hex });
    t.equal(receipt.status, 'success');
    t.ok(relayers.includes(receipt.from.toLowerCase()), 'a relayer of this facilitator sent it, paying the gas');
    t.equal(await relayerTxCount(n), txsBefore + 1, 'one transaction');
    t.equal(payerBefore - (await stableBalance(n, payer.address)), DEPOSIT, 'the payer paid exactly the deposit');
    t.equal((await stableBalance(n, BATCH_SETTLEMENT_ADDRESS)) - contractBefore, DEPOSIT, 'the settlement contract holds it');
    t.equal(await stableBalance(n, merchant.receiver), 0n, 'nothing reached the receiver yet (claims do that)');
    t.equal(await stableBalance(n, ERC3009_DEPOSIT_COLLECTOR_ADDRESS), 0n, 'nothing stays with the collector');
    for (const r of relayers) t.equal(await stableBalance(n, r as Hex), 0n, 'nothing to gate402');
    t.same(await channelOnChain(n, channelId), { balance: DEPOSIT, totalClaimed: 0n });

    const again = (await official.settle(payment as never, offer as never)) as Settle;
    t.same(again, settled, 'the same deposit asked again answers the recorded settlement');
    t.equal(await relayerTxCount(n), txsBefore + 1, 'and sends nothing');
    const replay = await official.verify(payment as never, offer as never);
    t.same([replay.isValid, replay.invalidReason], [false, 'invalid_batch_settlement_evm_deposit_simulation_failed'], 'a spent deposit no longer verifies (as the official facilitator says)');

    // The next request's voucher, as the official client makes it on the funded channel.
    const client = officialChannelClient(n, payer, (payment.payload.channelConfig as { salt: Hex }).salt);
    const voucher = await officialChannelPayment(client, offer);
    t.equal(voucher.payload.type, 'voucher', 'the client pays the next request by voucher');
    const v = await official.verify(voucher as never, offer as never);
    t.equal(v.isValid, true, JSON.stringify(v));
    const vs = (await official.settle(voucher as never, offer as never)) as Settle;
    t.same([vs.success, vs.errorReason], [false, 'invalid_batch_settlement_evm_payload_type'], 'a voucher is not settled on its own');
  });
}

t.test('a malformed batch-settlement body is a clear 200 refusal, never a 5xx', async (t) => {
  const offer = offerOn(base, newMerchant(), { price: PRICE, deposit: DEPOSIT, method: 'eip3009' });
  const bodies: Array<[string, unknown, string]> = [
    ['no payload type', { x402Version: 2, paymentPayload: { x402Version: 2, accepted: offer, payload: {} }, paymentRequirements: offer }, 'invalid_batch_settlement_evm_payload_type'],
    [
      'a deposit with nothing in it',
      { x402Version: 2, paymentPayload: { x402Version: 2, accepted: offer, payload: { type: 'deposit' } }, paymentRequirements: offer },
      'invalid_batch_settlement_evm_deposit_payload',
    ],
    [
      'requirements without an amount',
      { x402Version: 2, paymentPayload: { x402Version: 2, accepted: offer, payload: {} }, paymentRequirements: { ...offer, amount: 5 } },
      'invalid_payment_requirements',
    ],
    [
      'another network accepted',
      { x402Version: 2, paymentPayload: { x402Version: 2, accepted: { ...offer, network: 'eip155:1' }, payload: {} }, paymentRequirements: offer },
      'invalid_batch_settlement_evm_network_mismatch',
    ],
  ];
  for (const [what, body, reason] of bodies) {
    for (const route of ['verify', 'settle']) {
      const r = await postJson(`${fac.url}/${route}`, body);
      t.equal(r.status, 200, `${what}: ${route} answers 200`);
      const json = r.json as { invalidReason?: string; errorReason?: string };
      t.equal(json.invalidReason ?? json.errorReason, reason, `${what}: ${route} names ${reason}`);
    }
  }
});

t.test('a facilitator killed after broadcasting a deposit finishes it from its record: one deposit, one transaction', async (t) => {
  const first = fac;
  const payer = await fundedPayer(base, CAIP2.base, funder, parseUnits('1', 6));
  const offer = offerOn(base, newMerchant(), { price: PRICE, deposit: DEPOSIT, method: 'eip3009' });
  const payment = await officialChannelPayment(officialChannelClient(base, payer), offer);
  const channelId = (payment.payload.voucher as { channelId: Hex }).channelId;
  const body = { x402Version: 2, paymentPayload: payment, paymentRequirements: offer };
  const { pending, second, txsBefore } = await broadcastThenKill(t, first, body, dataDir);
  const done = await settleUntilFinal(second, body);
  t.equal(done.success, true, JSON.stringify(done));
  t.equal(done.transaction, pending.transaction, 'completed by the transaction sent before the kill');
  t.equal((await relayerTxCount(base)) - txsBefore, 1, 'one transaction on chain');
  t.same(await channelOnChain(base, channelId), { balance: DEPOSIT, totalClaimed: 0n }, 'deposited once');
  t.equal(await stableBalance(base, payer.address), parseUnits('1', 6) - DEPOSIT, 'the payer paid once');
});

t.test("a facilitator killed after broadcasting a receiver's claim finishes it from its record: one claim, one transaction", async (t) => {
  const payer = await fundedPayer(base, CAIP2.base, funder, parseUnits('1', 6));
  const merchant = newMerchant();
  const offer = offerOn(base, merchant, { price: PRICE, deposit: DEPOSIT, method: 'eip3009' });
  const payment = await officialChannelPayment(officialChannelClient(base, payer), offer);
  const claimDir = tempDir('channels-facilitator-claim');
  t.teardown(() => rmSync(claimDir, { recursive: true, force: true }));
  const first = await spawnFacilitator({ manifestPath: devnet.manifestPath, env, dataDir: claimDir });
  const deposited = await settleUntilFinal(first, { x402Version: 2, paymentPayload: payment, paymentRequirements: offer });
  t.equal(deposited.success, true, JSON.stringify(deposited));
  // The deposit's voucher (its ceiling is the price), claimed as the official server's channel manager claims it.
  const config = payment.payload.channelConfig as Parameters<typeof claimBatchTypedData>[0][number]['config'];
  const voucher = payment.payload.voucher as { channelId: Hex; maxClaimableAmount: string; signature: Hex };
  const row = { config, maxClaimableAmount: PRICE, signature: voucher.signature, totalClaimed: PRICE };
  const claimAuthorizerSignature = await merchant.authorizer.signTypedData(claimBatchTypedData([row], base.chainId));
  const manager = { scheme: 'batch-settlement', network: CAIP2.base, asset: base.stablecoin.address, amount: '0', payTo: merchant.receiver, maxTimeoutSeconds: 0, extra: {} };
  const claim = {
    type: 'claim',
    claims: [{ voucher: { channel: config, maxClaimableAmount: PRICE.toString() }, signature: voucher.signature, totalClaimed: PRICE.toString() }],
    claimAuthorizerSignature,
  };
  const body = { x402Version: 2, paymentPayload: { x402Version: 2, accepted: manager, payload: claim }, paymentRequirements: manager };
  const { pending, second, txsBefore } = await broadcastThenKill(t, first, body, claimDir);
  const done = await settleUntilFinal(second, body);
  t.equal(done.success, true, JSON.stringify(done));
  t.equal(done.transaction, pending.transaction, 'completed by the transaction sent before the kill');
  t.equal((await relayerTxCount(base)) - txsBefore, 1, 'one transaction on chain');
  t.same(await channelOnChain(base, voucher.channelId), { balance: DEPOSIT, totalClaimed: PRICE }, 'claimed once');
  const again = (await postJson(`${second.url}/settle`, body)).json as Settle;
  t.same([again.success, again.transaction], [true, pending.transaction], 'asked again: the recorded answer');
  t.equal((await relayerTxCount(base)) - txsBefore, 1, 'and nothing more sent');
});
