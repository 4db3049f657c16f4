// Payment channels claimed and swept by the gateway's claim actors, on chains of this file's own (it pauses mining
// and moves the clock): vouchers of several channels accepted at the real `gate402 gateway`, then claimed in one
// transaction and swept to the merchant's wallet (the sum of charges equals the channels' totalClaimed equals the
// merchant's balance change); a SIGKILL after the claim's broadcast and before its record of the receipt, the
// transaction even dropped by the node: the restarted gateway carries the same claim to its receipt (claimed once);
// a payer's withdrawal initiated while paying: every accepted voucher claimed before the withdrawal can finalize.
import t from 'tap';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from '@x402/core/http';
import { signVoucher } from '@x402/evm/batch-settlement/client';
import { keccak256, parseEther, parseEventLogs, parseUnits, toHex, type Address, type Hex, type LocalAccount } from 'viem';
import { readFileSync } from 'node:fs';
import { BATCH_SETTLEMENT_ADDRESS, CAIP2 } from '../src/chain/canonical.ts';
import { rpcCall } from '../src/chain/rpc.ts';
import { serviceDevnet } from '../src/devnet/service-devnet.ts';
import { simulateClaim } from '../src/channels/claim-steps.ts';
import type { ClaimRow } from '../src/channels/claim-machine.ts';
import { privateKeyToAccount } from 'viem/accounts';
import { batchSettlementAbi } from '../src/schemes/batch-settlement/abi.ts';
import { channelIdOf, type ChannelConfig } from '../src/schemes/batch-settlement/channel-config.ts';
import { channelBuyer, ownChannelChains, decodedCredential, type ChannelBuyer } from './helpers/channel-buyer.ts';
import { channelOnChain } from './helpers/channels.ts';
import { clientsFor, tester } from './helpers/devnet.ts';
import { relayerTxCount, spawnPaidGateway, until } from './helpers/paid-gateway.ts';
import { fundedPayer, stableBalance } from './helpers/payments.ts';
import { tempDir } from './helpers/temp-dir.ts';

const PRICE = 10_000n; // catjoke/joke: 0.01 USD
/** A claim is due once a network's accepted-but-unclaimed value reaches 30 prices. */
const THRESHOLD = 30n * PRICE;
const DELAY = 900; // the withdraw delay the gateway offers (the scheme's minimum)

const { devnet, manifest, n, pub, upstream } = await ownChannelChains(t, 'channel-claims');
const dataDir = tempDir('channel-claims');
const env = {
  GATE402_CHANNEL_CLAIM_INTERVAL_MS: '250',
  GATE402_CHANNEL_CLAIM_EXPOSURE: String(THRESHOLD),
  GATE402_CHANNEL_WITHDRAW_DELAY_SECONDS: String(DELAY),
  GATE402_LOG_LEVEL: 'info',
};
const first = await spawnPaidGateway(manifest, upstream.origin, env, { dataDir, manifestPath: devnet.manifestPath });
let gw = first.gw;
t.teardown(() => gw.stop('SIGKILL'));
const url = () => `${gw.url}/m/catjoke/joke`;

const required = decodePaymentRequiredHeader((await fetch(url())).headers.get('payment-required') as string);
const merchant = required.accepts.find((a) => a.scheme === 'batch-settlement' && a.network === CAIP2.base)?.payTo as Address;

interface Payer {
  account: LocalAccount;
  buyer: ChannelBuyer;
  paid: number;
}

async function newPayer(deposits: number): Promise<Payer> {
  const account = await fundedPayer(n, CAIP2.base, tester('channelsHostile'), parseUnits('1', 6));
  return { account, buyer: channelBuyer(n, account, { depositMultiplier: deposits }), paid: 0 };
}

async function pay(p: Payer, times: number): Promise<void> {
  for (let i = 0; i < times; i++) {
    const res = await p.buyer.pay(url());
    if (res.status !== 200) throw new Error(`payment ${p.paid + 1}: ${res.status} ${await res.text()}`);
    const charged = decodePaymentResponseHeader(res.headers.get('payment-response') as string).extra?.channelState as { chargedCumulativeAmount: string };
    p.paid += 1;
    if (BigInt(charged.chargedCumulativeAmount) !== BigInt(p.paid) * PRICE) throw new Error(`charged ${charged.chargedCumulativeAmount} after ${p.paid} payments`);
  }
}

/** A payer whose channel the SIGKILL test claimed (the simulation test signs on from it). */
let claimedPayer: Payer | undefined;

const channelOf = (p: Payer) => {
  const payload = decodedCredential(p.buyer.sent[0] as string).payload;
  return { config: payload.channelConfig as ChannelConfig, channelId: (payload.voucher as { channelId: Hex }).channelId };
};

/** Every `Claimed` event of the channel: each claim transaction that raised its total. */
async function claimsOf(channelId: Hex) {
  const logs = await pub.getLogs({ address: BATCH_SETTLEMENT_ADDRESS, fromBlock: 0n, toBlock: 'latest' });
  return parseEventLogs({ abi: batchSettlementAbi, logs, eventName: 'Claimed' }).filter((l) => l.args.channelId.toLowerCase() === channelId.toLowerCase());
}

async function metric(name: string): Promise<number | undefined> {
  const text = await (await fetch(`${gw.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && l.includes(`network="${CAIP2.base}"`));
  return line === undefined ? undefined : Number(line.split(' ').at(-1));
}

t.test('vouchers of three channels claimed in one transaction and swept: charges = totalClaimed = the merchant balance change', async (t) => {
  const payers = [await newPayer(20), await newPayer(20), await newPayer(20)];
  const merchantBefore = await stableBalance(n, merchant);
  const calls = upstream.calls;
  // 29 prices stay below the threshold: nothing is claimed yet.
  await pay(payers[0] as Payer, 10);
  await pay(payers[1] as Payer, 10);
  await pay(payers[2] as Payer, 9);
  await new Promise((r) => setTimeout(r, 1500));
  t.equal((await channelOnChain(n, channelOf(payers[0] as Payer).channelId)).totalClaimed, 0n, 'below the threshold nothing is claimed');
  await pay(payers[2] as Payer, 1);
  const charges = 30n * PRICE;
  await until(async () => (await stableBalance(n, merchant)) - merchantBefore === charges, 'the sweep to the merchant', 120_000);
  let claimed = 0n;
  const txs = new Set<string>();
  for (const p of payers) {
    const { channelId } = channelOf(p);
    const onChain = await channelOnChain(n, channelId);
    t.equal(onChain.totalClaimed, BigInt(p.paid) * PRICE, `channel of ${p.paid} payments: totalClaimed is its charges`);
    claimed += onChain.totalClaimed;
    for (const c of await claimsOf(channelId)) txs.add(c.transactionHash);
  }
  t.equal(claimed, charges, 'the channels claimed exactly the sum of the charges');
  t.equal((await stableBalance(n, merchant)) - merchantBefore, charges, "the merchant's wallet received exactly that");
  t.equal(txs.size, 1, 'in one claim transaction');
  const claimGas = (await pub.getTransactionReceipt({ hash: [...txs][0] as Hex })).gasUsed;
  t.comment(`claim of 3 channels: ${claimGas} gas (${claimGas / 3n} per channel)`);
  t.ok(claimGas / 3n < 40_000n, "a channel costs less in a claim of three than the spec's ~40k gas for one channel claimed alone");
  t.equal(upstream.calls - calls, 30, 'the upstream was called once per accepted voucher');
  await until(async () => (await metric('gate402_channel_claims_total')) !== undefined, 'the claims series');
  const text = await (await fetch(`${gw.url}/metrics`)).text();
  t.match(text, new RegExp(`gate402_channel_claims_total\\{network="${CAIP2.base}",outcome="swept"\\} 1`), 'one claim counted swept');
  t.match(text, new RegExp(`gate402_channel_claimed_vouchers_total\\{network="${CAIP2.base}"\\} 3`), 'three channel rows claimed');
  t.match(text, new RegExp(`gate402_channel_vouchers_total\\{network="${CAIP2.base}",outcome="accepted"\\} 30\n`), 'the 30 vouchers counted accepted');
  await until(async () => (await metric('gate402_channel_unclaimed_exposure')) === 0, 'the exposure gauge back at 0');
  t.pass('no exposure left');
  t.equal(await metric('gate402_channels_open'), 3, 'three channels open: each keeps escrow beyond its claims');
});

t.test('SIGKILL after the claim is broadcast, before its receipt is recorded: the restart claims it once', async (t) => {
  const payers = [await newPayer(20), await newPayer(20)];
  claimedPayer = payers[1];
  await pay(payers[0] as Payer, 15);
  await pay(payers[1] as Payer, 14);
  const merchantBefore = await stableBalance(n, merchant);
  const relayerTxsBefore = await relayerTxCount(n, first.relayers);
  await rpcCall(n.rpcUrl, 'evm_setAutomine', [false]);
  t.teardown(() => rpcCall(n.rpcUrl, 'evm_setAutomine', [true]));
  await pay(payers[1] as Payer, 1);
  await until(async () => (await relayerTxCount(n, first.relayers)) > relayerTxsBefore, 'the claim broadcast (pending at the node)');
  const pending = (await rpcCall<{ pending: Record<string, Record<string, { hash: Hex }>> }>(n.rpcUrl, 'txpool_content', [])).pending;
  const claimTx = Object.values(pending).flatMap((byNonce) => Object.values(byNonce).map((tx) => tx.hash))[0] as Hex;
  await gw.stop('SIGKILL');
  // The node loses it too (as a node restart would): only the claim's record can bring it back.
  await rpcCall(n.rpcUrl, 'anvil_dropTransaction', [claimTx]);
  gw = (await spawnPaidGateway(manifest, upstream.origin, env, { dataDir, manifestPath: devnet.manifestPath, relayerKeys: first.relayerKeys, relayers: first.relayers, port: gw.port })).gw;
  await rpcCall(n.rpcUrl, 'evm_setAutomine', [true]);
  await rpcCall(n.rpcUrl, 'evm_mine', []);
  const charges = 30n * PRICE;
  await until(async () => (await stableBalance(n, merchant)) - merchantBefore === charges, 'the sweep after the restart', 120_000);
  for (const p of payers) {
    const { channelId } = channelOf(p);
    const claims = await claimsOf(channelId);
    t.equal(claims.length, 1, `the channel of ${p.paid} payments was claimed once`);
    t.equal(claims[0]?.transactionHash, claimTx, 'by the transaction signed before the kill');
    t.equal((await channelOnChain(n, channelId)).totalClaimed, BigInt(p.paid) * PRICE, 'up to its charges');
  }
  t.equal((await relayerTxCount(n, first.relayers)) - relayerTxsBefore, 2, 'two transactions in all: the claim and the sweep');
  t.match(readFileSync(gw.logPath, 'utf8'), /resuming a channel claim/, 'the restarted gateway resumed the claim from its record');
  t.equal((await stableBalance(n, merchant)) - merchantBefore, charges, "the merchant's wallet received the charges once");
});

t.test('a row that would revert is dropped alone at simulation, the rest kept', async (t) => {
  // The claimed channel of the SIGKILL test, one price further: a voucher its payer signs now (the gateway never sees it).
  const p = claimedPayer as Payer;
  const { config, channelId } = channelOf(p);
  const ceiling = BigInt(p.paid + 1) * PRICE;
  const voucher = await signVoucher(p.account as never, channelId, ceiling.toString(), CAIP2.base);
  const claimedBefore = (await channelOnChain(n, channelId)).totalClaimed;
  const good: ClaimRow = { channelId, config, maxClaimableAmount: ceiling.toString(), signature: voucher.signature as Hex, totalClaimed: ceiling.toString(), exposure: String(PRICE) };
  // A channel nobody deposited into: its claim is above its balance (0).
  const emptyConfig = { ...config, salt: keccak256(toHex('no deposit')) };
  const empty: ClaimRow = { ...good, config: emptyConfig, channelId: channelIdOf(emptyConfig, n.chainId) };
  // The channel's own row, claiming a ceiling its payer never signed (the signature is of another ceiling).
  const forged: ClaimRow = { ...good, totalClaimed: String(ceiling + PRICE), maxClaimableAmount: String(ceiling + PRICE), signature: good.signature };
  const chain = { chainId: n.chainId, client: pub, authorizer: privateKeyToAccount(serviceDevnet(manifest).channelAuthorizerKey) };
  const simulated = await simulateClaim(chain, [empty, good], { from: first.relayers[0] as Address });
  t.same(
    simulated.rows.map((r) => r.channelId),
    [channelId],
    'the good row is kept',
  );
  t.same(simulated.dropped, [{ channelId: empty.channelId, reason: 'ClaimAboveBalance' }], 'the row above its balance is dropped, named by the contract');
  t.ok(simulated.gas > 0n, 'and the rest is estimated');
  t.comment(`a claim of one channel, estimated: ${simulated.gas} gas`);
  const withForged = await simulateClaim(chain, [forged, good], { from: first.relayers[0] as Address });
  t.same(
    withForged.dropped.map((d) => d.reason),
    ['InvalidVoucherSignature'],
    'a voucher whose signature does not match its ceiling is dropped',
  );
  t.equal(withForged.rows.length, 1, 'the other row stays');
  t.equal((await channelOnChain(n, channelId)).totalClaimed, claimedBefore, 'a simulation claims nothing');
});

t.test('a withdrawal initiated while paying: every accepted voucher is claimed before it can finalize', async (t) => {
  const p = await newPayer(10);
  await pay(p, 3);
  const { config, channelId } = channelOf(p);
  await rpcCall(n.rpcUrl, 'anvil_setBalance', [p.account.address, toHex(parseEther('1'))]);
  const payerChain = clientsFor(n, p.account);
  const payerBefore = await stableBalance(n, p.account.address);
  const merchantBefore = await stableBalance(n, merchant);
  const deposit = (await channelOnChain(n, channelId)).balance;
  const unclaimed = deposit; // nothing claimed yet: the whole deposit
  const initiated = await payerChain.pub.waitForTransactionReceipt({
    hash: await payerChain.wallet.writeContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: 'initiateWithdraw', args: [config, unclaimed] }),
  });
  const finalizableAt = Number((await pub.getBlock({ blockNumber: initiated.blockNumber })).timestamp) + DELAY;
  // Paying on while the withdrawal is pending: these vouchers are accepted, and must be claimed too.
  await pay(p, 2);
  await until(async () => (await channelOnChain(n, channelId)).totalClaimed === 5n * PRICE, 'every accepted voucher claimed', 120_000).catch((error: unknown) => {
    // What the claimer said, for whoever reads the failure.
    t.comment(
      readFileSync(gw.logPath, 'utf8')
        .split('\n')
        .filter((l) => /claim|channel/i.test(l))
        .slice(-30)
        .join('\n'),
    );
    throw error;
  });
  const head = await pub.getBlock({ blockTag: 'latest' });
  t.ok(Number(head.timestamp) < finalizableAt, `claimed at ${head.timestamp}, before the withdrawal can finalize at ${finalizableAt}`);
  await until(async () => (await metric('gate402_channel_withdraw_deadline_timestamp_seconds')) === finalizableAt, 'the deadline gauge');
  t.pass('the nearest withdraw deadline is exposed');
  await rpcCall(n.rpcUrl, 'evm_increaseTime', [DELAY + 1]);
  await rpcCall(n.rpcUrl, 'evm_mine', []);
  await payerChain.pub.waitForTransactionReceipt({
    hash: await payerChain.wallet.writeContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: 'finalizeWithdraw', args: [config] }),
  });
  t.equal((await stableBalance(n, p.account.address)) - payerBefore, deposit - 5n * PRICE, 'the payer takes back only what was not accepted');
  await until(async () => (await stableBalance(n, merchant)) - merchantBefore === 5n * PRICE, 'the sweep of the withdrawn channel', 120_000);
  t.pass("the merchant's wallet received every accepted voucher");
});
