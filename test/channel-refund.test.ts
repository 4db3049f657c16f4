// A payment channel's whole life at the real `gate402 gateway`, on chains of this file's own (balances move only with
// its payments), paid by the official `@x402/fetch` with the official `batch-settlement` client, unchanged: a deposit
// on first use, N requests paid by vouchers on one channel, then the client's cooperative refund. One refund
// transaction claims what was charged, sweeps it to the merchant and returns the rest to the payer: to the wei, the
// merchant receives price x served, the payer gets the deposit less what it spent, the channel keeps nothing
// unclaimed, the upstream was called once per paid request. Then what an attacker or a confused client sends: the
// refund again (replayed and freshly signed), twenty at once, a stale voucher, an amount above what is left or below
// the smallest partial refund: each a 402 with the spec's reason, and no transaction.
import t from 'tap';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from '@x402/core/http';
import { signVoucher } from '@x402/evm/batch-settlement/client';
import { readFileSync } from 'node:fs';
import { erc20Abi, parseEventLogs, parseUnits, type Address, type Hex, type LocalAccount } from 'viem';
import { BATCH_SETTLEMENT_ADDRESS, CAIP2 } from '../src/chain/canonical.ts';
import { rpcCall } from '../src/chain/rpc.ts';
import { batchSettlementAbi } from '../src/schemes/batch-settlement/abi.ts';
import { readManifest } from '../src/devnet/manifest.ts';
import { processCpuSeconds } from '../bench/cpu.ts';
import { channelBuyer, countingUpstream, decodedCredential, encodedCredential, recordingFetch, type ChannelBuyer } from './helpers/channel-buyer.ts';
import { channelOnChain } from './helpers/channels.ts';
import { clientsFor, freshAccount, network, tester } from './helpers/devnet.ts';
import { relayerTxCount, spawnPaidGateway, until } from './helpers/paid-gateway.ts';
import { fundedPayer, stableBalance } from './helpers/payments.ts';
import { spawnOwnDevnet } from './helpers/spawn-devnet.ts';
import { tempDir } from './helpers/temp-dir.ts';

const PRICE = 10_000n; // catjoke/joke: 0.01 USD
/** Paid requests on the channel; the timed suite's figure (see docs/gateway.md for its cost). */
const N = Number(process.env.GATE402_REFUND_TEST_REQUESTS ?? 1000);
const MIN_REFUND = 50_000n;

const devnet = await spawnOwnDevnet('channel-refund');
t.teardown(() => devnet.stop());
const manifest = readManifest(devnet.manifestPath);
const n = network(manifest, CAIP2.base);
const upstream = await countingUpstream();
t.teardown(() => upstream.close());
// The claimer waits (a threshold and caps above anything charged here): the refund's own transaction claims.
const env = {
  GATE402_CHANNEL_CLAIM_EXPOSURE: '1000000000000',
  GATE402_CHANNEL_MAX_EXPOSURE: '1000000000000',
  GATE402_CHANNEL_MAX_NETWORK_EXPOSURE: '1000000000000',
  GATE402_CHANNEL_MIN_REFUND: String(MIN_REFUND),
};
const dataDir = tempDir('channel-refund');
const first = await spawnPaidGateway(manifest, upstream.origin, env, { dataDir, manifestPath: devnet.manifestPath });
const { relayers } = first;
let gw = first.gw;
t.teardown(() => gw.stop('SIGKILL'));
const url = `${gw.url}/m/catjoke/joke`;
const required = decodePaymentRequiredHeader((await fetch(url)).headers.get('payment-required') as string);
const merchant = required.accepts.find((a) => a.scheme === 'batch-settlement' && a.network === CAIP2.base)?.payTo as Address;
// The official client's refund probes the route and refunds on the FIRST batch-settlement offer's network (it cannot
// name its own): its whole life is played there (the stock chain, Permit2 deposits, as gate402 lists it first).
const firstChannelOffer = required.accepts.find((a) => a.scheme === 'batch-settlement');
const home = network(manifest, firstChannelOffer?.network as string);
const homePub = clientsFor(home, freshAccount()).pub;
const { pub } = clientsFor(n, freshAccount());
const homeCaip2 = `eip155:${home.chainId}`;

const contractTokens = () => homePub.readContract({ address: home.stablecoin.address, abi: erc20Abi, functionName: 'balanceOf', args: [BATCH_SETTLEMENT_ADDRESS] });
const channelIdOf = (b: ChannelBuyer) => (decodedCredential(b.sent[0] as string).payload.voucher as { channelId: Hex }).channelId;

async function pay(b: ChannelBuyer, times: number): Promise<void> {
  for (let i = 0; i < times; i++) {
    const res = await b.pay(url);
    if (res.status !== 200) throw new Error(`payment ${i + 1}: ${res.status} ${await res.text()}`);
    await res.arrayBuffer();
  }
}

/** A refund credential as the official client makes it: the channel's config, a zero-charge voucher at `charged`. */
async function refundCredential(b: ChannelBuyer, payer: LocalAccount, charged: bigint, amount?: bigint): Promise<string> {
  const first = decodedCredential(b.sent[0] as string);
  const voucher = await signVoucher(payer as never, channelIdOf(b), charged.toString(), first.accepted.network as `${string}:${string}`);
  return encodedCredential({
    x402Version: 2,
    accepted: first.accepted,
    payload: { type: 'refund', channelConfig: first.payload.channelConfig, voucher, ...(amount !== undefined ? { amount: amount.toString() } : {}) },
  });
}

async function refundAsked(credential: string): Promise<{ status: number; error: string | undefined; body: string }> {
  const res = await fetch(url, { headers: { 'payment-signature': credential } });
  const body = await res.text();
  const header = res.headers.get('payment-required');
  return { status: res.status, error: header ? decodePaymentRequiredHeader(header).error : undefined, body };
}

t.test(`a deposit, ${N} vouchers, the client's refund: every wei where it belongs`, async (t) => {
  const deposit = BigInt(N + 50) * PRICE;
  const payer = await fundedPayer(home, homeCaip2, tester('channelsHostile'), deposit + parseUnits('1', 6));
  const buyer = channelBuyer(home, payer, { depositMultiplier: N + 50 });
  const payerBefore = await stableBalance(home, payer.address);
  const merchantBefore = await stableBalance(home, merchant);
  const contractBefore = await contractTokens();
  const calls = upstream.calls;
  const cpuBefore = processCpuSeconds(gw.child.pid);
  const started = process.hrtime.bigint();
  const buyerCpuBefore = process.cpuUsage();
  await pay(buyer, N);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const buyerUsage = process.cpuUsage(buyerCpuBefore);
  const buyerCpu = (buyerUsage.user + buyerUsage.system) / 1e6;
  const cpu = (processCpuSeconds(gw.child.pid) ?? 0) - (cpuBefore ?? 0);
  t.comment(
    `${N} paid requests (1 deposit + ${N - 1} vouchers): ${seconds.toFixed(1)} s wall; CPU ${cpu.toFixed(2)} s in the gateway (${((cpu * 1000) / N).toFixed(2)} ms each), ${buyerCpu.toFixed(2)} s in the official client (${((buyerCpu * 1000) / N).toFixed(2)} ms each)`,
  );
  t.equal(upstream.calls - calls, N, 'the upstream called exactly once per paid request');
  t.equal(buyer.sent.length, N, 'one credential per request: no corrective round trip');
  const charged = BigInt(N) * PRICE;
  const channelId = channelIdOf(buyer);
  t.same(await channelOnChain(home, channelId), { balance: deposit, totalClaimed: 0n }, 'the channel holds the deposit, nothing claimed yet');

  const relayerTxs = await relayerTxCount(home, relayers);
  const refundSent: string[] = [];
  const settled = await buyer.scheme.refund(url, { fetch: recordingFetch(refundSent) });
  t.match(
    settled,
    { success: true, amount: String(deposit - charged), extra: { channelState: { balance: String(charged), totalClaimed: String(charged), refundNonce: '1' } } },
    'the client reads the refund: the rest of the deposit back',
  );
  t.match(settled.transaction, /^0x[0-9a-f]{64}$/, 'with its transaction');
  t.equal(await relayerTxCount(home, relayers), relayerTxs + 1, 'one transaction: claim, sweep and refund together');
  const receipt = await homePub.getTransactionReceipt({ hash: settled.transaction as Hex });
  t.comment(`the refund transaction (claim + sweep + refund of one channel): ${receipt.gasUsed} gas, paid by the gateway's relayer`);

  t.equal((await stableBalance(home, merchant)) - merchantBefore, charged, 'the merchant received exactly price x served');
  t.equal(payerBefore - (await stableBalance(home, payer.address)), charged, 'the payer got the deposit back less exactly what it spent');
  t.equal(await contractTokens(), contractBefore, 'the channel contract keeps nothing of it');
  const onChain = await channelOnChain(home, channelId);
  t.same(onChain, { balance: charged, totalClaimed: charged }, 'the channel: all claimed, nothing unclaimed left');
  const view = (await (await fetch(`${gw.url}/api/channels/${channelId}`)).json()) as { channel: Record<string, string> };
  t.match(
    view.channel,
    { balance: String(charged), spent: String(charged), remaining: '0', claimed: String(charged) },
    "the payer's view after the refund: the balance is what was spent, nothing remains",
  );
  t.equal(upstream.calls - calls, N, 'the refund called no upstream');

  // The same refund again, replayed as sent, and signed afresh: nothing left, no transaction.
  const replayed = await refundAsked(refundSent.at(-1) as string);
  t.match(replayed, { status: 402, error: 'invalid_batch_settlement_evm_refund_no_balance' }, 'the replayed refund: refund_no_balance');
  const again = await refundAsked(await refundCredential(buyer, payer, charged));
  t.match(again, { status: 402, error: 'invalid_batch_settlement_evm_refund_no_balance' }, 'a fresh second refund: refund_no_balance');
  await t.rejects(buyer.scheme.refund(url), /no remaining balance|refund_no_balance|existing channel/, "the official client's second refund is refused");
  t.equal(await relayerTxCount(home, relayers), relayerTxs + 1, 'no transaction for any of them');
  const metrics = await (await fetch(`${gw.url}/metrics`)).text();
  t.match(metrics, new RegExp(`gate402_channel_refunds_total\\{network="${homeCaip2}",outcome="refunded"\\} 1`), 'one refund counted');
  t.match(metrics, new RegExp(`gate402_channel_refunded_total\\{network="${homeCaip2}"\\} ${deposit - charged}`), 'and what it returned');
});

t.test('partial refunds, amounts not allowed, a stale voucher, twenty refunds at once', async (t) => {
  const payer = await fundedPayer(n, CAIP2.base, tester('channelsHostile'), parseUnits('2', 6));
  const buyer = channelBuyer(n, payer, { depositMultiplier: 100 });
  const deposit = 100n * PRICE;
  await pay(buyer, 5);
  const charged = 5n * PRICE;
  const left = deposit - charged;
  const relayerTxs = await relayerTxCount(n, relayers);
  const above = await refundAsked(await refundCredential(buyer, payer, charged, left + 1n));
  t.match(above, { status: 402, error: 'invalid_batch_settlement_evm_refund_amount_invalid' }, 'above what is left: refund_amount_invalid');
  t.match(JSON.parse(above.body), {}, 'a JSON body');
  const tiny = await refundAsked(await refundCredential(buyer, payer, charged, 1n));
  t.match(tiny, { status: 402, error: 'invalid_batch_settlement_evm_refund_amount_invalid' }, 'below the smallest partial refund: refund_amount_invalid');
  const stale = await refundAsked(await refundCredential(buyer, payer, charged - PRICE));
  t.match(stale, { status: 402, error: 'invalid_batch_settlement_evm_cumulative_amount_mismatch' }, 'a voucher below what was charged: the corrective 402');
  const stranger = await refundAsked(await refundCredential(buyer, freshAccount(), charged));
  t.match(stranger, { status: 402, error: 'invalid_batch_settlement_evm_voucher_signature' }, "a voucher not the payer's: voucher_signature");
  t.equal(await relayerTxCount(n, relayers), relayerTxs, 'none of them sent a transaction');

  // A partial refund; the channel then takes vouchers again.
  const payerBefore = await stableBalance(n, payer.address);
  const partial = await refundAsked(await refundCredential(buyer, payer, charged, MIN_REFUND));
  t.equal(partial.status, 200, partial.body);
  t.equal((await stableBalance(n, payer.address)) - payerBefore, MIN_REFUND, 'the partial refund returned exactly what was asked');
  t.same(await channelOnChain(n, channelIdOf(buyer)), { balance: deposit - MIN_REFUND, totalClaimed: charged }, 'what was charged is claimed; the rest stays');
  await pay(buyer, 3);
  const chargedNow = 8n * PRICE;

  // Twenty identical refunds at once: one goes through, the others are refused; one transaction.
  const txsBefore = await relayerTxCount(n, relayers);
  const credential = await refundCredential(buyer, payer, chargedNow);
  const answers = await Promise.all(Array.from({ length: 20 }, () => refundAsked(credential)));
  const ok = answers.filter((a) => a.status === 200);
  t.equal(ok.length, 1, 'exactly one refund went through');
  t.ok(
    answers.filter((a) => a.status !== 200).every((a) => a.status === 402 && ['invalid_batch_settlement_evm_channel_busy', 'invalid_batch_settlement_evm_refund_no_balance'].includes(a.error ?? '')),
    'the others: channel_busy or refund_no_balance',
  );
  t.equal(await relayerTxCount(n, relayers), txsBefore + 1, 'one transaction for the twenty');
  t.same(await channelOnChain(n, channelIdOf(buyer)), { balance: chargedNow, totalClaimed: chargedNow }, 'the channel: everything charged claimed, the rest returned');
  const decoded = decodePaymentResponseHeader((await fetch(url, { headers: { 'payment-signature': credential } })).headers.get('payment-response') as string);
  t.match(decoded, { success: false, errorReason: 'invalid_batch_settlement_evm_refund_no_balance' }, 'a refused refund says why in PAYMENT-RESPONSE too');
});

t.test('SIGKILL after the refund is broadcast, the node losing it: the restart sends the same transaction, refunded once', async (t) => {
  const payer = await fundedPayer(n, CAIP2.base, tester('channelsHostile'), parseUnits('2', 6));
  const buyer = channelBuyer(n, payer, { depositMultiplier: 100 });
  await pay(buyer, 5);
  const charged = 5n * PRICE;
  const channelId = channelIdOf(buyer);
  const payerBefore = await stableBalance(n, payer.address);
  const relayerTxsBefore = await relayerTxCount(n, relayers);
  await rpcCall(n.rpcUrl, 'evm_setAutomine', [false]);
  t.teardown(() => rpcCall(n.rpcUrl, 'evm_setAutomine', [true]));
  const asked = fetch(url, { headers: { 'payment-signature': await refundCredential(buyer, payer, charged) } }).catch(() => undefined);
  await until(async () => (await relayerTxCount(n, relayers)) > relayerTxsBefore, 'the refund broadcast (pending at the node)');
  const pending = (await rpcCall<{ pending: Record<string, Record<string, { hash: Hex }>> }>(n.rpcUrl, 'txpool_content', [])).pending;
  const refundTx = Object.values(pending).flatMap((byNonce) => Object.values(byNonce).map((tx) => tx.hash))[0] as Hex;
  await gw.stop('SIGKILL');
  await asked;
  // The node loses it too (as a node restart would): only the refund's record can bring it back.
  await rpcCall(n.rpcUrl, 'anvil_dropTransaction', [refundTx]);
  gw = (await spawnPaidGateway(manifest, upstream.origin, env, { dataDir, manifestPath: devnet.manifestPath, relayerKeys: first.relayerKeys, relayers, port: gw.port })).gw;
  await rpcCall(n.rpcUrl, 'evm_setAutomine', [true]);
  await rpcCall(n.rpcUrl, 'evm_mine', []);
  const left = 100n * PRICE - charged;
  await until(async () => (await stableBalance(n, payer.address)) - payerBefore === left, 'the refund after the restart', 120_000);
  const logs = await pub.getLogs({ address: BATCH_SETTLEMENT_ADDRESS, fromBlock: 0n, toBlock: 'latest' });
  const refunds = parseEventLogs({ abi: batchSettlementAbi, logs, eventName: 'Refunded' }).filter((l) => l.args.channelId.toLowerCase() === channelId.toLowerCase());
  t.equal(refunds.length, 1, 'refunded once');
  t.equal(refunds[0]?.transactionHash, refundTx, 'by the transaction signed before the kill');
  t.equal((await relayerTxCount(n, relayers)) - relayerTxsBefore, 1, 'one transaction in all');
  t.same(await channelOnChain(n, channelId), { balance: charged, totalClaimed: charged }, 'what was charged claimed, the rest returned');
  t.match(readFileSync(gw.logPath, 'utf8'), /resuming a channel refund/, 'the restarted gateway resumed the refund from its record');
  // The refund's hold on the channel is released once recorded: a fresh refund is answered, not channel_busy.
  await until(async () => (await refundAsked(await refundCredential(buyer, payer, charged))).error === 'invalid_batch_settlement_evm_refund_no_balance', 'the channel released', 30_000);
  t.pass('the channel is released: nothing left to refund');
});
