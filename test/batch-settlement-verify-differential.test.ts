// gate402's /verify of `batch-settlement` payloads against the official facilitator's (`@x402/evm` 2.27.0
// `batch-settlement/facilitator`, run here in-process, reading the same devnet chain): for each payload, the same
// `isValid` and the same `invalidReason`. Where the official facilitator and the spec part ways, /verify follows the
// official facilitator (each such case says so below).
import t, { type Test } from 'tap';
import { parseEther, parseUnits, toHex, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type LocalAccount } from 'viem/accounts';
import { BATCH_SETTLEMENT_ADDRESS, CAIP2 } from '../src/chain/canonical.ts';
import type { NetworkEntry } from '../src/chain/network-types.ts';
import { rpcCall } from '../src/chain/rpc.ts';
import { batchSettlementAbi } from '../src/schemes/batch-settlement/abi.ts';
import { channelIdOf, type ChannelConfig } from '../src/schemes/batch-settlement/channel-config.ts';
import { claimBatchTypedData, voucherClaimArgs } from '../src/schemes/batch-settlement/claim-batch.ts';
import type { BatchSettlementRequirements } from '../src/schemes/batch-settlement/requirements.ts';
import { voucherTypedData } from '../src/schemes/batch-settlement/voucher.ts';
import { clientsFor, network, tester, testDevnet, TEST_MANIFEST_PATH } from './helpers/devnet.ts';
import { newMerchant, offerOn, officialChannelClient, officialChannelFacilitator, officialChannelPayment, randomSalt, type Merchant } from './helpers/channels.ts';
import { fundedPayer, postJson } from './helpers/payments.ts';
import { spawnFacilitator } from './helpers/spawn-facilitator.ts';

const manifest = testDevnet();
const base = network(manifest, CAIP2.base);
const stock = network(manifest, CAIP2.stockChain);
const funder = tester('channelsFacilitator');
// Fresh relayer keys: /verify simulates deposits as the relayer that would send them (nothing is sent here).
const relayerKeys = [generatePrivateKey()];
for (const n of [base, stock]) await rpcCall(n.rpcUrl, 'anvil_setBalance', [privateKeyToAccount(relayerKeys[0] as Hex).address, toHex(parseEther('10'))]);
const fac = await spawnFacilitator({
  manifestPath: TEST_MANIFEST_PATH,
  env: { GATE402_RELAYER_KEYS: relayerKeys.join(','), GATE402_FACILITATOR_PAYER_RATE_CAPACITY: '1000', GATE402_FACILITATOR_PAYER_RATE_PER_SECOND: '1000' },
});
t.teardown(() => fac.stop());

const PRICE = 1000n;
const DEPOSIT = 100_000n;

type Payment = { x402Version: 2; accepted: BatchSettlementRequirements; payload: Record<string, unknown> };
type Verdict = { isValid: boolean; invalidReason?: string };

async function gate402Verify(payment: Payment, offer: BatchSettlementRequirements): Promise<Verdict> {
  const r = await postJson(`${fac.url}/verify`, { x402Version: 2, paymentPayload: payment, paymentRequirements: offer });
  if (r.status !== 200) throw new Error(`/verify answered ${r.status}: ${JSON.stringify(r.json)}`);
  return r.json as Verdict;
}

async function officialVerify(n: NetworkEntry, payment: Payment, offer: BatchSettlementRequirements): Promise<Verdict> {
  return (await officialChannelFacilitator(n).verify(payment as never, offer as never)) as Verdict;
}

/** Both verdicts, and that they agree on `isValid` and `invalidReason`; `expected` is what both must say. */
async function same(t: Test, n: NetworkEntry, what: string, payment: Payment, offer: BatchSettlementRequirements, expected: string | true) {
  const [ours, theirs] = await Promise.all([gate402Verify(payment, offer), officialVerify(n, payment, offer)]);
  t.same([ours.isValid, ours.invalidReason], [theirs.isValid, theirs.invalidReason], `${what}: gate402 ${JSON.stringify(ours)} / official ${JSON.stringify(theirs)}`);
  t.equal(ours.isValid ? true : ours.invalidReason, expected, `${what}: ${expected === true ? 'valid' : expected}`);
}

const voucherPayment = async (payer: LocalAccount, offer: BatchSettlementRequirements, config: ChannelConfig, channelId: Hex, maxClaimableAmount: bigint): Promise<Payment> => ({
  x402Version: 2,
  accepted: offer,
  payload: {
    type: 'voucher',
    channelConfig: config,
    voucher: { channelId, maxClaimableAmount: maxClaimableAmount.toString(), signature: await payer.signTypedData(voucherTypedData({ channelId, maxClaimableAmount }, base.chainId)) },
  },
});

/** A channel opened through gate402's /settle with the official client's deposit; its config and id. */
async function openChannel(payer: LocalAccount, offer: BatchSettlementRequirements, salt: Hex) {
  const deposit = await officialChannelPayment(officialChannelClient(base, payer, salt), offer);
  const settled = (await postJson(`${fac.url}/settle`, { x402Version: 2, paymentPayload: deposit, paymentRequirements: offer })).json as { success: boolean };
  if (!settled.success) throw new Error(`deposit failed: ${JSON.stringify(settled)}`);
  const config = deposit.payload.channelConfig as ChannelConfig;
  return { deposit, config: { ...config, withdrawDelay: Number(config.withdrawDelay) }, channelId: (deposit.payload.voucher as { channelId: Hex }).channelId };
}

/** The receiver side claims `amount` of the channel on chain (its authorizer signs; the funder relays). */
async function claim(merchant: Merchant, payer: LocalAccount, config: ChannelConfig, channelId: Hex, amount: bigint) {
  const signature = await payer.signTypedData(voucherTypedData({ channelId, maxClaimableAmount: amount }, base.chainId));
  const rows = [{ config, maxClaimableAmount: amount, signature, totalClaimed: amount }];
  const authorizerSignature = await merchant.authorizer.signTypedData(claimBatchTypedData(rows, base.chainId));
  const { pub, wallet } = clientsFor(base, funder);
  const hash = await wallet.writeContract({
    address: BATCH_SETTLEMENT_ADDRESS,
    abi: batchSettlementAbi,
    functionName: 'claimWithSignature',
    args: [voucherClaimArgs(rows), authorizerSignature],
    chain: null,
  });
  const receipt = await pub.waitForTransactionReceipt({ hash });
  if (receipt.status !== 'success') throw new Error('claim reverted');
}

t.test('deposits: valid, replayed, expired, another receiver, on both collectors', async (t) => {
  const payer = await fundedPayer(base, CAIP2.base, funder, parseUnits('1', 6));
  const merchant = newMerchant();
  const offer = offerOn(base, merchant, { price: PRICE, deposit: DEPOSIT, method: 'eip3009' });
  const deposit = await officialChannelPayment(officialChannelClient(base, payer), offer);
  await same(t, base, 'a valid deposit', deposit, offer, true);

  const auth = (deposit.payload.deposit as { authorization: { erc3009Authorization: Record<string, unknown> } }).authorization.erc3009Authorization;
  const expired = structuredClone(deposit);
  (expired.payload.deposit as { authorization: { erc3009Authorization: Record<string, unknown> } }).authorization.erc3009Authorization = {
    ...auth,
    validBefore: String(Math.floor(Date.now() / 1000) - 60),
  };
  await same(t, base, 'an expired deposit', expired, offer, 'invalid_batch_settlement_evm_payload_authorization_valid_before');

  const otherReceiver = { ...offer, payTo: newMerchant().receiver };
  await same(t, base, 'a deposit into a channel that pays another receiver', { ...deposit, accepted: otherReceiver }, otherReceiver, 'invalid_batch_settlement_evm_receiver_mismatch');
  const otherAuthorizer = { ...offer, extra: { ...offer.extra, receiverAuthorizer: newMerchant().authorizer.address } };
  await same(
    t,
    base,
    'a deposit whose channel names another receiver authorizer',
    { ...deposit, accepted: otherAuthorizer },
    otherAuthorizer,
    'invalid_batch_settlement_evm_receiver_authorizer_mismatch',
  );

  const poor = await fundedPayer(base, CAIP2.base, funder, DEPOSIT - 1n);
  await same(t, base, 'a deposit beyond the payer balance', await officialChannelPayment(officialChannelClient(base, poor), offer), offer, 'invalid_batch_settlement_evm_insufficient_balance');

  const settled = (await postJson(`${fac.url}/settle`, { x402Version: 2, paymentPayload: deposit, paymentRequirements: offer })).json as { success: boolean };
  t.equal(settled.success, true, 'the deposit settled');
  // The spec has no reason for a spent authorization; the official facilitator's simulation fails on it.
  await same(t, base, 'the same deposit replayed', deposit, offer, 'invalid_batch_settlement_evm_deposit_simulation_failed');

  const stockPayer = await fundedPayer(stock, CAIP2.stockChain, funder, parseUnits('1', 6));
  const stockOffer = offerOn(stock, merchant, { price: PRICE, deposit: DEPOSIT, method: 'permit2' });
  await same(t, stock, 'a valid Permit2 deposit', await officialChannelPayment(officialChannelClient(stock, stockPayer), stockOffer), stockOffer, true);
  const unapproved = await fundedPayer(stock, CAIP2.stockChain, funder, parseUnits('1', 6), { approvePermit2: false });
  await same(
    t,
    stock,
    'a Permit2 deposit without the approval',
    await officialChannelPayment(officialChannelClient(stock, unapproved), stockOffer),
    stockOffer,
    'invalid_batch_settlement_evm_permit2_allowance_required',
  );
});

t.test('vouchers: valid, replayed, lower, skipped, over the balance, wrong channel, no channel, another receiver', async (t) => {
  const payer = await fundedPayer(base, CAIP2.base, funder, parseUnits('1', 6));
  const merchant = newMerchant();
  const offer = offerOn(base, merchant, { price: PRICE, deposit: DEPOSIT, method: 'eip3009' });
  const salt = randomSalt();
  const { config, channelId } = await openChannel(payer, offer, salt);

  const next = await officialChannelPayment(officialChannelClient(base, payer, salt), offer);
  t.equal(next.payload.type, 'voucher');
  await same(t, base, "the official client's next voucher", next, offer, true);

  await claim(merchant, payer, config, channelId, 3n * PRICE);
  // The facilitator knows only the chain: a voucher at or below what was claimed is refused. (The spec's rule 10 asks
  // for the price above the claimed total; the official facilitator asks for any amount above it, and so does /verify.)
  await same(t, base, 'a replayed voucher (the one claimed)', await voucherPayment(payer, offer, config, channelId, 3n * PRICE), offer, 'invalid_batch_settlement_evm_cumulative_below_claimed');
  await same(t, base, 'a lower voucher', await voucherPayment(payer, offer, config, channelId, 2n * PRICE), offer, 'invalid_batch_settlement_evm_cumulative_below_claimed');
  await same(t, base, 'the next voucher after the claim', await voucherPayment(payer, offer, config, channelId, 4n * PRICE), offer, true);
  // Skipping ahead is the server's to refuse (it knows what it charged): on chain a skipped voucher is claimable.
  await same(t, base, 'a skipped voucher', await voucherPayment(payer, offer, config, channelId, 40n * PRICE), offer, true);
  await same(t, base, 'a voucher of the whole balance', await voucherPayment(payer, offer, config, channelId, DEPOSIT), offer, true);
  await same(t, base, 'a voucher over the balance', await voucherPayment(payer, offer, config, channelId, DEPOSIT + 1n), offer, 'invalid_batch_settlement_evm_cumulative_exceeds_balance');

  const other = await openChannel(payer, offer, randomSalt());
  await same(
    t,
    base,
    "a voucher naming another channel than its config's",
    await voucherPayment(payer, offer, config, other.channelId, 5n * PRICE),
    offer,
    'invalid_batch_settlement_evm_channel_id_mismatch',
  );
  const stranger = privateKeyToAccount(generatePrivateKey());
  const forged = await voucherPayment(stranger, offer, config, channelId, 5n * PRICE);
  await same(t, base, 'a voucher signed by someone else', forged, offer, 'invalid_batch_settlement_evm_voucher_signature');
  const unopened = { ...config, salt: randomSalt() };
  const unopenedId = channelIdOf(unopened, base.chainId);
  await same(t, base, 'a voucher on a channel never funded', await voucherPayment(payer, offer, unopened, unopenedId, PRICE), offer, 'invalid_batch_settlement_evm_channel_not_found');
  const otherReceiver = { ...offer, payTo: newMerchant().receiver as Address };
  const forOther = await voucherPayment(payer, otherReceiver, config, channelId, 5n * PRICE);
  await same(t, base, 'a voucher of a channel that pays another receiver', forOther, otherReceiver, 'invalid_batch_settlement_evm_receiver_mismatch');
  const longer = { ...offer, extra: { ...offer.extra, withdrawDelay: 3600 } };
  await same(
    t,
    base,
    'a voucher of a channel with another withdraw delay',
    await voucherPayment(payer, longer, config, channelId, 5n * PRICE),
    longer,
    'invalid_batch_settlement_evm_withdraw_delay_mismatch',
  );
});
