// The gateway stops taking vouchers whenever its claim path could not protect them, and takes them again once it can:
// the real `gate402 gateway` on chains of this file's own (it drains relayers, pauses mining and moves the chain's
// clock), paid by the official `@x402/fetch` + `batch-settlement` client. Each refusal is a 503 or 402 before anything
// is charged or served: the upstream is not called, and the next accepted voucher is charged one price more than the
// last accepted one.
import t from 'tap';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from '@x402/core/http';
import { parseEther, parseUnits, toHex, type Address, type Hex, type LocalAccount } from 'viem';
import { readFileSync } from 'node:fs';
import { BATCH_SETTLEMENT_ADDRESS, CAIP2 } from '../src/chain/canonical.ts';
import { rpcCall } from '../src/chain/rpc.ts';
import { claimCostWei } from '../src/channels/claim-health.ts';
import { batchSettlementAbi } from '../src/schemes/batch-settlement/abi.ts';
import type { ChannelConfig } from '../src/schemes/batch-settlement/channel-config.ts';
import { BatchReason } from '../src/verify/batch-settlement-reasons.ts';
import { channelBuyer, ownChannelChains, decodedCredential, type ChannelBuyer } from './helpers/channel-buyer.ts';
import { channelOnChain } from './helpers/channels.ts';
import { clientsFor, tester } from './helpers/devnet.ts';
import { spawnPaidGateway, until } from './helpers/paid-gateway.ts';
import { fundedPayer } from './helpers/payments.ts';

const PRICE = 10_000n; // catjoke/joke: 0.01 USD
const DELAY = 900; // the withdraw delay offered (the scheme's minimum)
const MARGIN = 600; // from 600 s before a withdrawal can finalize, its channel takes no voucher
/** A channel takes at most three prices unclaimed (claimed from half of that). */
const CHANNEL_CAP = 3n * PRICE;
const HEADROOM = 50; // the relayers must hold 50 times the pending claims' cost
const MAX_ROWS = 50;

const { devnet, manifest, n, pub, upstream } = await ownChannelChains(t, 'channel-claim-safety');
const { gw, relayers } = await spawnPaidGateway(
  manifest,
  upstream.origin,
  {
    GATE402_CHANNEL_CLAIM_INTERVAL_MS: '250',
    GATE402_CHANNEL_WITHDRAW_DELAY_SECONDS: String(DELAY),
    GATE402_CHANNEL_WITHDRAW_MARGIN_SECONDS: String(MARGIN),
    GATE402_CHANNEL_MAX_EXPOSURE: String(CHANNEL_CAP),
    // No claim for the network's exposure or age: only the caps and withdrawals make claims here.
    GATE402_CHANNEL_CLAIM_EXPOSURE: '100000000',
    GATE402_CHANNEL_GAS_HEADROOM: String(HEADROOM),
    GATE402_LOG_LEVEL: 'info',
  },
  { manifestPath: devnet.manifestPath },
);
t.teardown(() => gw.stop('SIGKILL'));
const url = `${gw.url}/m/catjoke/joke`;

interface Payer {
  account: LocalAccount;
  buyer: ChannelBuyer;
  /** Vouchers accepted (each charged one price). */
  paid: number;
}

async function newPayer(): Promise<Payer> {
  const account = await fundedPayer(n, CAIP2.base, tester('channelsHostile'), parseUnits('1', 6));
  return { account, buyer: channelBuyer(n, account, { depositMultiplier: 20 }), paid: 0 };
}

/** One paid request: an accepted voucher must be charged exactly one price more than the last accepted one. */
async function pay(p: Payer): Promise<Response> {
  const res = await p.buyer.pay(url);
  if (res.status === 200) {
    const state = decodePaymentResponseHeader(res.headers.get('payment-response') as string).extra?.channelState as { chargedCumulativeAmount: string };
    p.paid += 1;
    if (BigInt(state.chargedCumulativeAmount) !== BigInt(p.paid) * PRICE) throw new Error(`charged ${state.chargedCumulativeAmount} after ${p.paid} accepted vouchers`);
  }
  return res;
}

async function paid(p: Payer): Promise<void> {
  const res = await pay(p);
  if (res.status !== 200) throw new Error(`expected a 200, got ${res.status} ${await res.text()}`);
}

const channelOf = (p: Payer) => {
  const payload = decodedCredential(p.buyer.sent[0] as string).payload;
  return { config: payload.channelConfig as ChannelConfig, channelId: (payload.voucher as { channelId: Hex }).channelId };
};

const logSays = (pattern: RegExp) => pattern.test(readFileSync(gw.logPath, 'utf8'));

async function setRelayerBalances(wei: bigint): Promise<void> {
  for (const r of relayers) await rpcCall(n.rpcUrl, 'anvil_setBalance', [r as Address, toHex(wei)]);
}

t.test('relayers below the gas the pending claims need: vouchers refused (503, nothing charged, upstream not called), then taken again once funded', async (t) => {
  const p = await newPayer();
  await paid(p);
  // Above the pool's own floor (0.001 ETH), below what claiming this channel and one more costs at the headroom.
  const gasPrice = await pub.getGasPrice();
  const need = claimCostWei(2, MAX_ROWS, gasPrice, HEADROOM);
  const each = (need * 3n) / 10n;
  t.ok(each > 10n ** 15n, `each relayer keeps ${each} wei: enough to send a transaction, not enough for the claims (${need} wei)`);
  await setRelayerBalances(each);
  await until(() => logSays(/relayers cannot pay for the pending channel claims/), 'the claimer reads the drained relayers', 60_000);
  const calls = upstream.calls;
  const refused = await pay(p);
  t.equal(refused.status, 503, 'the voucher is refused with a 503');
  const body = (await refused.json()) as { error: string; code: string; reason: string };
  t.equal(body.reason, 'relayer_gas_low', 'naming the relayers');
  t.equal(body.code, 'channel_claims_unsafe');
  t.match(body.error, /nothing was charged/);
  t.ok(Number(refused.headers.get('retry-after')) >= 1, 'with Retry-After');
  t.notOk(refused.headers.get('payment-response'), 'no settlement answered');
  t.equal(upstream.calls, calls, 'the upstream was not called');
  const metrics = await (await fetch(`${gw.url}/metrics`)).text();
  t.match(metrics, `gate402_channel_vouchers_blocked{network="${CAIP2.base}",reason="relayer_gas_low"} 1`, 'the operator sees why (the metric the alert reads)');
  t.match(metrics, `gate402_channel_vouchers_total{network="${CAIP2.base}",outcome="relayer_gas_low"} 1`, 'and the refused voucher, counted by its reason');
  await setRelayerBalances(parseEther('10'));
  await until(() => logSays(/relayers can pay for the pending channel claims again/), 'the claimer reads the funded relayers', 60_000);
  await paid(p);
  t.equal(p.paid, 2, 'the next voucher is accepted, charged one price more than the first: the refused one cost nothing');
  t.equal(upstream.calls, calls + 1, 'and served once');
});

t.test('a channel at its cap of unclaimed value: its vouchers wait (503) until the claim is mined', async (t) => {
  const p = await newPayer();
  await paid(p); // the deposit, mined
  await rpcCall(n.rpcUrl, 'evm_setAutomine', [false]);
  t.teardown(() => rpcCall(n.rpcUrl, 'evm_setAutomine', [true]));
  await paid(p); // two prices unclaimed: past half the cap, a claim is sent (and not mined)
  await paid(p); // three prices: at the cap
  const calls = upstream.calls;
  const refused = await pay(p);
  t.equal(refused.status, 503, 'the fourth voucher waits: 503');
  t.equal(((await refused.json()) as { reason: string }).reason, 'channel_exposure_cap');
  t.equal(upstream.calls, calls, 'the upstream was not called');
  t.equal((await channelOnChain(n, channelOf(p).channelId)).totalClaimed, 0n, 'nothing claimed yet');
  await rpcCall(n.rpcUrl, 'evm_setAutomine', [true]);
  await rpcCall(n.rpcUrl, 'evm_mine', []);
  await until(async () => (await channelOnChain(n, channelOf(p).channelId)).totalClaimed > 0n, 'the claim mined', 60_000);
  await until(async () => (await pay(p)).status === 200, 'the voucher taken after the claim', 60_000);
  t.equal(p.paid, 4, 'the fourth voucher is accepted, charged one price more than the third');
  t.equal(upstream.calls, calls + 1, 'and served once');
});

// Last: it moves the chain's clock ahead of the wall's (a deposit signed after it would be out of its time window).
t.test("a withdrawal whose finalization comes inside the margin: that channel's vouchers refused, the others' taken", async (t) => {
  const leaving = await newPayer();
  const staying = await newPayer();
  await paid(leaving);
  await paid(staying);
  const { config } = channelOf(leaving);
  await rpcCall(n.rpcUrl, 'anvil_setBalance', [leaving.account.address, toHex(parseEther('1'))]);
  const chain = clientsFor(n, leaving.account);
  await chain.pub.waitForTransactionReceipt({
    hash: await chain.wallet.writeContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: 'initiateWithdraw', args: [config, 1n] }),
  });
  // The chain's clock moves 400 s on: the withdrawal can finalize in 500 s, inside the 600 s margin.
  await rpcCall(n.rpcUrl, 'evm_increaseTime', [DELAY - MARGIN + 100]);
  await rpcCall(n.rpcUrl, 'evm_mine', []);
  // Until the claimer's next round reads the chain's clock, the gateway's own clock says 900 s are left.
  let refused: Response | undefined;
  let calls = 0;
  await until(async () => {
    calls = upstream.calls;
    const res = await pay(leaving);
    if (res.status === 402) refused = res;
    return refused !== undefined;
  }, 'a voucher refused on the withdrawing channel');
  const answer = refused as Response;
  t.equal(decodePaymentRequiredHeader(answer.headers.get('payment-required') as string).error, BatchReason.cumulativeExceedsBalance, 'a 402 with the spec reason');
  t.equal(upstream.calls, calls, 'the upstream was not called');
  const again = await pay(leaving);
  t.equal(again.status, 402, 'and again: the channel stays closed to vouchers');
  await paid(staying);
  t.pass('the other channel on the same network still takes vouchers');
  await until(async () => (await channelOnChain(n, channelOf(leaving).channelId)).totalClaimed === BigInt(leaving.paid) * PRICE, 'the withdrawing channel claimed', 60_000);
  t.pass('every voucher it accepted is claimed');
});
