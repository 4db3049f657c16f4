// Payment-channel claims across crashes, at the real `gate402 gateway` on chains of this file's own (it moves the
// chain's clock): a SIGKILL after the sweep's broadcast (the chain took it, the gateway never heard back): after the
// restart the sweep is carried to its receipt from its record, not sent twice, and the merchant's wallet holds the
// charges once; a payer's withdrawal initiated while the gateway is down: on restart the gateway reads the
// `WithdrawInitiated` it missed and claims every accepted voucher before the withdrawal can finalize; a deposit
// below the live price floor (gas spiked after the route was priced) refused with its reason, nothing deposited.
import t from 'tap';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import { decodeFunctionData, keccak256, parseEther, parseTransaction, toHex, type Address, type Hex } from 'viem';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BATCH_SETTLEMENT_ADDRESS, CAIP2 } from '../src/chain/canonical.ts';
import { rpcCall } from '../src/chain/rpc.ts';
import type { ClaimRecord } from '../src/channels/claim-machine.ts';
import { writeManifest } from '../src/devnet/manifest.ts';
import { batchSettlementAbi } from '../src/schemes/batch-settlement/abi.ts';
import { openStore } from '../src/store/open-store.ts';
import { ownChannelChains } from './helpers/channel-buyer.ts';
import { channelOf, newChannelPayer, payChannel, settlementEvents, type ChannelPayer } from './helpers/channel-payers.ts';
import { channelOnChain, officialChannelClient, officialChannelPayment } from './helpers/channels.ts';
import { encodePaymentSignatureHeader } from '../src/protocol/x402/headers.ts';
import { clientsFor } from './helpers/devnet.ts';
import { relayerTxCount, spawnPaidGateway, until } from './helpers/paid-gateway.ts';
import { stableBalance } from './helpers/payments.ts';
import { startRpcGate } from './helpers/rpc-gate.ts';
import { tempDir } from './helpers/temp-dir.ts';

const PRICE = 10_000n; // catjoke/joke: 0.01 USD
/** A claim is due once the accepted-but-unclaimed value reaches 30 prices. */
const THRESHOLD = 30n * PRICE;
const DELAY = 900; // the withdraw delay the gateway offers (the scheme's minimum)

const { devnet, manifest, n, pub, upstream } = await ownChannelChains(t, 'channel-crashes');
// The gateway's first run reaches the chain through a gate that can stop it between the chain's answer and its own.
const gate = await startRpcGate(n.rpcUrl);
t.teardown(() => gate.close());
const gatedManifest = join(tempDir('channel-crashes-gated'), 'manifest.json');
writeManifest(gatedManifest, { ...manifest, networks: { ...manifest.networks, [CAIP2.base]: { ...n, rpcUrl: gate.url } } });
const dataDir = tempDir('channel-crashes');
const env = {
  GATE402_CHANNEL_CLAIM_INTERVAL_MS: '250',
  GATE402_CHANNEL_CLAIM_EXPOSURE: String(THRESHOLD),
  GATE402_CHANNEL_WITHDRAW_DELAY_SECONDS: String(DELAY),
  GATE402_LOG_LEVEL: 'info',
};
const first = await spawnPaidGateway(manifest, upstream.origin, env, { dataDir, manifestPath: gatedManifest });
let gw = first.gw;
t.teardown(() => gw.stop('SIGKILL'));
/** The gateway again on the same data directory and relayers (straight to the chain). */
const restart = async () => {
  gw = (await spawnPaidGateway(manifest, upstream.origin, env, { dataDir, manifestPath: devnet.manifestPath, relayerKeys: first.relayerKeys, relayers: first.relayers, port: gw.port })).gw;
};

const merchant = decodePaymentRequiredHeader((await fetch(`${gw.url}/m/catjoke/joke`)).headers.get('payment-required') as string).accepts.find(
  (o) => o.scheme === 'batch-settlement' && o.network === CAIP2.base,
)?.payTo as Address;

type Payer = ChannelPayer;
const newPayer = (deposits: number) => newChannelPayer(n, deposits);
const pay = (p: Payer, times: number) => payChannel(p, `${gw.url}/m/catjoke/joke`, times, PRICE);
const eventsOf = (eventName: 'Claimed' | 'Settled', fromBlock: bigint) => settlementEvents(n, eventName, fromBlock);

/** Whether a raw transaction is a sweep: `settle` (or several in `multicall`) on the settlement contract. */
function isSweep(raw: Hex): boolean {
  const tx = parseTransaction(raw);
  if (tx.to?.toLowerCase() !== BATCH_SETTLEMENT_ADDRESS.toLowerCase() || !tx.data) return false;
  const call = decodeFunctionData({ abi: batchSettlementAbi, data: tx.data });
  return call.functionName === 'settle' || call.functionName === 'multicall';
}

t.test('SIGKILL after the sweep is broadcast, before the gateway hears back: the restart sends no second sweep', async (t) => {
  const payers = [await newPayer(20), await newPayer(20)];
  const from = await pub.getBlockNumber();
  await pay(payers[0] as Payer, 15);
  await pay(payers[1] as Payer, 14);
  const merchantBefore = await stableBalance(n, merchant);
  const relayerTxsBefore = await relayerTxCount(n, first.relayers);
  // The chain takes the sweep and answers; the gateway is killed before that answer reaches it.
  let sweepTx: Hex | undefined;
  const killed = new Promise<void>((resolve) => {
    gate.inspect(async (calls) => {
      const sent = calls?.find((c) => c.method === 'eth_sendRawTransaction' && isSweep(c.params?.[0] as Hex));
      if (!sent || sweepTx) return;
      sweepTx = keccak256(sent.params?.[0] as Hex);
      await gw.stop('SIGKILL');
      resolve();
    });
  });
  await pay(payers[1] as Payer, 1);
  await killed;
  gate.inspect(undefined);
  const charges = 30n * PRICE;
  t.equal((await stableBalance(n, merchant)) - merchantBefore, charges, 'the sweep the chain took moved the charges');

  // What the dead gateway recorded: the sweep signed and written ahead, its receipt not yet.
  const store = await openStore({ dataDir });
  const open: ClaimRecord[] = [];
  for await (const [, record] of store.collection<ClaimRecord>('channel-claims').entries('open/')) open.push(record);
  await store.close();
  t.equal(open.length, 1, 'one claim is open in the record');
  t.same([open[0]?.state, open[0]?.sweepTxs.length, open[0]?.sweepTx], ['sweeping', 1, undefined], 'at its sweep, written ahead, not recorded mined');

  await restart();
  await until(async () => (await fetch(`${gw.url}/metrics`).then((r) => r.text())).includes('outcome="swept"} 1'), 'the resumed claim to end swept', 120_000);
  const sweeps = (await eventsOf('Settled', from)).filter((e) => 'receiver' in e.args && e.args.receiver.toLowerCase() === merchant.toLowerCase());
  t.equal(sweeps.length, 1, 'one sweep on chain');
  t.equal(sweeps[0]?.transactionHash, sweepTx, 'the one sent before the kill');
  t.equal((await eventsOf('Claimed', from)).length, 2, 'the two channels claimed once each');
  for (const p of payers) t.equal((await channelOnChain(n, channelOf(p).channelId)).totalClaimed, BigInt(p.paid) * PRICE, `the channel of ${p.paid} payments claimed up to its charges`);
  t.equal((await relayerTxCount(n, first.relayers)) - relayerTxsBefore, 2, 'two relayer transactions in all: the claim and the sweep');
  t.equal((await stableBalance(n, merchant)) - merchantBefore, charges, "the merchant's wallet received the charges once");
});

t.test('a withdrawal initiated while the gateway is down: on restart every accepted voucher is claimed before it can finalize', async (t) => {
  const p = await newPayer(10);
  await pay(p, 4);
  const { config, channelId } = channelOf(p);
  const deposit = (await channelOnChain(n, channelId)).balance;
  const merchantBefore = await stableBalance(n, merchant);
  const payerBefore = await stableBalance(n, p.account.address);
  await gw.stop('SIGKILL');

  // While it is down, the payer asks for the whole deposit back, and the chain's clock runs on.
  await rpcCall(n.rpcUrl, 'anvil_setBalance', [p.account.address, toHex(parseEther('1'))]);
  const payerChain = clientsFor(n, p.account);
  const initiated = await payerChain.pub.waitForTransactionReceipt({
    hash: await payerChain.wallet.writeContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: 'initiateWithdraw', args: [config, deposit] }),
  });
  const finalizableAt = Number((await pub.getBlock({ blockNumber: initiated.blockNumber })).timestamp) + DELAY;
  await rpcCall(n.rpcUrl, 'evm_increaseTime', [DELAY / 2]);
  await rpcCall(n.rpcUrl, 'evm_mine', []);
  t.equal((await channelOnChain(n, channelId)).totalClaimed, 0n, 'nothing was claimed before the gateway went down (below the threshold)');

  await restart();
  await until(async () => (await channelOnChain(n, channelId)).totalClaimed === BigInt(p.paid) * PRICE, 'every accepted voucher claimed after the restart', 120_000);
  const head = await pub.getBlock({ blockTag: 'latest' });
  t.ok(Number(head.timestamp) < finalizableAt, `claimed at ${head.timestamp}, before the withdrawal can finalize at ${finalizableAt}`);
  t.pass(`the ${p.paid} accepted vouchers (${BigInt(p.paid) * PRICE}) are claimed`);
  t.match(readFileSync(gw.logPath, 'utf8'), /a payment channel changed on chain/, 'the restarted gateway read the withdrawal it missed');

  await rpcCall(n.rpcUrl, 'evm_increaseTime', [DELAY]);
  await rpcCall(n.rpcUrl, 'evm_mine', []);
  await payerChain.pub.waitForTransactionReceipt({
    hash: await payerChain.wallet.writeContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: 'finalizeWithdraw', args: [config] }),
  });
  t.equal((await stableBalance(n, p.account.address)) - payerBefore, deposit - BigInt(p.paid) * PRICE, 'the payer takes back only what was not accepted');
  await until(async () => (await stableBalance(n, merchant)) - merchantBefore === BigInt(p.paid) * PRICE, 'the sweep of the withdrawn channel', 120_000);
  t.pass("the merchant's wallet received every accepted voucher");
});

t.test('a deposit below the live price floor is refused with its reason: nothing deposited, nothing served', async (t) => {
  const p = await newPayer(10);
  const url = `${gw.url}/m/catjoke/joke`;
  const offer = decodePaymentRequiredHeader((await fetch(url)).headers.get('payment-required') as string).accepts.find((o) => o.scheme === 'batch-settlement' && o.network === CAIP2.base);
  const payerBefore = await stableBalance(n, p.account.address);
  const relayerTxsBefore = await relayerTxCount(n, first.relayers);
  const calls = upstream.calls;
  // Gas spikes after the route was priced: at 2,000 gwei one settlement's gas (82,000 x 1.5) costs 0.246 USD, above
  // the deposit of ten 0.01 USD prices.
  await rpcCall(n.rpcUrl, 'anvil_setNextBlockBaseFeePerGas', [toHex(2000n * 10n ** 9n)]);
  await rpcCall(n.rpcUrl, 'evm_mine', []);
  t.teardown(async () => {
    await rpcCall(n.rpcUrl, 'anvil_setNextBlockBaseFeePerGas', [toHex(10n ** 9n)]);
    await rpcCall(n.rpcUrl, 'evm_mine', []);
  });
  const credential = encodePaymentSignatureHeader((await officialChannelPayment(officialChannelClient(n, p.account), offer as never)) as never);
  let res: Response | undefined;
  let body = '';
  // The gateway reads the gas price again within GATE402_GAS_PRICE_MAX_AGE_MS (3 s): until then the old floor holds.
  await until(
    async () => {
      res = await fetch(url, { headers: { 'payment-signature': credential } });
      body = await res.text();
      return res.status !== 200 && body.includes('amount_below_price_floor');
    },
    'the deposit to meet the new floor',
    60_000,
  );
  t.equal(res?.status, 402, `refused with a 402: ${body}`);
  t.match(res?.headers.get('content-type') ?? '', /json/, 'a JSON answer');
  t.match(JSON.parse(body), { detail: /amount_below_price_floor/ }, 'naming the price floor');
  t.equal(upstream.calls, calls, 'the upstream was not called');
  t.equal((await channelOnChain(n, channelOf({ ...p, buyer: { ...p.buyer, sent: [credential] } }).channelId)).balance, 0n, 'nothing deposited into the channel');
  t.equal(await stableBalance(n, p.account.address), payerBefore, "the payer's tokens did not move");
  t.equal(await relayerTxCount(n, first.relayers), relayerTxsBefore, 'no relayer transaction');
});
