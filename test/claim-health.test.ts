// The claim path's health as pure functions, no chain: when a network stops taking vouchers (and why), what the
// relayers must hold for the pending claims, and which channel settings stop a start off the devnet.
import t from 'tap';
import { claimBlockOf, claimCostWei, claimGas, newClaimState, relayersCover, type ClaimSafety } from '../src/channels/claim-health.ts';
import { channelConfigFromEnv, offDevnetProblem } from '../src/gateway/paywall/channel-settings.ts';

const SAFETY: ClaimSafety = { maxChannelExposure: 1_000n, maxNetworkExposure: 10_000n, gasHeadroom: 3, stallMs: 120_000 };
const NOW = 1_000_000_000;
const at = { now: NOW, intervalMs: 1_000 };
const healthy = () => ({ ...newClaimState(), scannedAt: NOW - 1_000, funded: true });

t.test('a network takes vouchers only while every part of its claim path holds', async (t) => {
  t.equal(claimBlockOf(healthy(), SAFETY, at), undefined, 'scanned, funded, nothing failing or running long, under the cap: taken');
  t.equal(claimBlockOf(undefined, SAFETY, at), 'claims_behind', 'a network the claimer never read: refused');
  t.equal(claimBlockOf({ ...healthy(), scannedAt: NOW - 61_000 }, SAFETY, at), 'claims_behind', 'withdrawals not read for over a minute (and five rounds)');
  t.equal(claimBlockOf({ ...healthy(), failing: true }, SAFETY, at), 'claims_failing');
  t.equal(claimBlockOf({ ...healthy(), busySince: NOW - 119_000 }, SAFETY, at), undefined, 'a claim running within the stall window');
  t.equal(claimBlockOf({ ...healthy(), busySince: NOW - 121_000 }, SAFETY, at), 'claims_stalled', 'one running past it');
  t.equal(claimBlockOf({ ...healthy(), funded: false }, SAFETY, at), 'relayer_gas_low');
  t.equal(claimBlockOf({ ...healthy(), funded: undefined }, SAFETY, at), 'relayer_gas_low', 'relayers never read: refused');
  t.equal(claimBlockOf({ ...healthy(), exposure: 9_000n, acceptedSince: 999n }, SAFETY, at), undefined, 'one below the network cap');
  t.equal(claimBlockOf({ ...healthy(), exposure: 9_000n, acceptedSince: 1_000n }, SAFETY, at), 'network_exposure_cap', 'what this node accepted since the round counts');
});

t.test('the relayers must cover the pending claims at the live gas price, with the headroom', async (t) => {
  t.equal(claimGas(0, 50), 0n);
  t.equal(claimGas(1, 50), 160_000n, 'one channel: a claim, a sweep and its row');
  t.equal(claimGas(51, 50), 2n * 120_000n + 51n * 40_000n, 'past the rows of one claim: two claims, two sweeps');
  const gasPrice = 2_000_000_000n;
  const need = claimCostWei(3, 50, gasPrice, 3);
  t.equal(need, 240_000n * gasPrice * 3n, 'gas x price x headroom');
  const floor = 10n ** 14n;
  t.same(relayersCover([need, 0n], { needWei: need, oneClaimWei: need, minBalanceWei: floor }), { ok: true, spendableWei: need }, 'one relayer holding it all');
  t.same(relayersCover([need / 2n, need / 2n], { needWei: need, oneClaimWei: need / 2n, minBalanceWei: floor }), { ok: true, spendableWei: need }, 'two holding half each, each able to send a claim');
  t.equal(relayersCover([need / 2n, need / 2n], { needWei: need, oneClaimWei: need, minBalanceWei: floor }).ok, false, 'a relayer that cannot pay for one whole claim counts for nothing');
  t.equal(relayersCover([floor - 1n, floor - 1n], { needWei: 1n, oneClaimWei: 1n, minBalanceWei: floor }).ok, false, 'nor one below the pool floor (it takes no work)');
  t.equal(relayersCover([], { needWei: 0n, oneClaimWei: 0n, minBalanceWei: 0n }).ok, false, 'no relayer: not covered');
});

t.test('off the devnet, channel margins that could not protect an accepted voucher are refused', async (t) => {
  const safe = { withdrawDelay: 86_400, withdrawMarginSeconds: 21_600, stallMs: 120_000, gasHeadroom: 3 };
  t.equal(offDevnetProblem(safe), undefined, 'the defaults');
  t.match(offDevnetProblem({ ...safe, withdrawMarginSeconds: 3_599 }), /WITHDRAW_MARGIN_SECONDS must be at least 3600/);
  t.match(offDevnetProblem({ ...safe, withdrawDelay: 7_199, withdrawMarginSeconds: 3_600 }), /at most half/);
  t.equal(offDevnetProblem({ ...safe, withdrawDelay: 7_200, withdrawMarginSeconds: 3_600, stallMs: 900_000 }), undefined, 'an hour of two, a stall of a quarter');
  t.match(offDevnetProblem({ ...safe, stallMs: 5_400_001 }), /CLAIM_STALL_SECONDS/);
  t.match(offDevnetProblem({ ...safe, gasHeadroom: 1 }), /GAS_HEADROOM/);
  const key = `0x${'11'.repeat(32)}`;
  const off = channelConfigFromEnv({ GATE402_CHANNEL_AUTHORIZER_KEY: key }, undefined);
  t.equal(off.withdrawMarginSeconds, 21_600, 'off the devnet the margin defaults to 6 hours');
  const dev = channelConfigFromEnv({}, key as `0x${string}`);
  t.equal(dev.withdrawMarginSeconds, 300, 'the devnet keeps its 5 minutes');
  t.throws(() => channelConfigFromEnv({ GATE402_CHANNEL_AUTHORIZER_KEY: key, GATE402_CHANNEL_WITHDRAW_MARGIN_SECONDS: '300' }, undefined), /off the devnet: GATE402_CHANNEL_WITHDRAW_MARGIN_SECONDS/);
  t.doesNotThrow(() => channelConfigFromEnv({ GATE402_CHANNEL_WITHDRAW_MARGIN_SECONDS: '300' }, undefined), 'no channels off the devnet: nothing to refuse');
});
