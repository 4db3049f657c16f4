// Payment channels against a hostile or unlucky buyer, on the real gateway: vouchers replayed, lower, equal,
// skipped or above the deposit (a 402 naming the reason, the corrective one carrying the channel's state, no
// upstream call, nothing charged); 25 concurrent copies of the next voucher (one served); channel configs naming
// another receiver or authorizer; malformed payloads (4xx JSON, never 5xx); and a SIGKILL of the gateway between the
// voucher's write-ahead and the serve: after a restart the voucher is kept and the buyer continues from it.
import t from 'tap';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from '@x402/core/http';
import { signVoucher } from '@x402/evm/batch-settlement/client';
import { parseUnits, type Hex } from 'viem';
import { CAIP2 } from '../src/chain/canonical.ts';
import { ChannelLedger, CHANNEL_RECORDS } from '../src/channels/channel-ledger.ts';
import { channelIdOf, type ChannelConfig } from '../src/schemes/batch-settlement/channel-config.ts';
import { BatchReason } from '../src/verify/batch-settlement-reasons.ts';
import { openStore } from '../src/store/open-store.ts';
import { channelBuyer, countingUpstream, decodedCredential, encodedCredential } from './helpers/channel-buyer.ts';
import { freshAccount, network, tester, testDevnet } from './helpers/devnet.ts';
import { spawnPaidGateway } from './helpers/paid-gateway.ts';
import { tempDir } from './helpers/temp-dir.ts';
import { fundedPayer } from './helpers/payments.ts';

const manifest = testDevnet();
const upstream = await countingUpstream();
t.teardown(() => upstream.close());
// A data directory of the test's own: it outlives the killed gateway, and its restart reads it.
const dataDir = tempDir('channels-hostile');
const first = await spawnPaidGateway(manifest, upstream.origin, {}, { dataDir });
let gw = first.gw;
t.teardown(() => gw.stop());

const PRICE = 10_000n;
const n = network(manifest, CAIP2.base);
const payer = await fundedPayer(n, CAIP2.base, tester('channelsHostile'), parseUnits('2', 6));
const buyer = channelBuyer(n, payer, { depositMultiplier: 40 });
const url = () => `${gw.url}/m/catjoke/joke`;
const send = (credential: unknown) => fetch(url(), { headers: { 'payment-signature': typeof credential === 'string' ? credential : encodedCredential(credential) } });
const errorOf = (res: Response) => decodePaymentRequiredHeader(res.headers.get('payment-required') as string).error;

/** Three requests paid (a deposit of 40 prices, two vouchers): the channel the cases below attack. */
for (let i = 0; i < 3; i++) {
  const res = await buyer.pay(url());
  if (res.status !== 200) throw new Error(`setup payment ${i}: ${res.status} ${await res.text()}`);
}
const lastSent = decodedCredential(buyer.sent.at(-1) as string);
const config = lastSent.payload.channelConfig as ChannelConfig;
const channelId = (lastSent.payload.voucher as { channelId: Hex }).channelId;
const voucherCredential = async (amount: bigint, cfg: ChannelConfig = config, signer = payer) => ({
  ...lastSent,
  payload: { type: 'voucher', channelConfig: cfg, voucher: await signVoucher(signer as never, channelIdOf(cfg, n.chainId), amount.toString(), CAIP2.base) },
});

t.test('replayed, lower, equal and skipped vouchers: the corrective 402, no upstream call, nothing charged', async (t) => {
  const calls = upstream.calls;
  const replay = await send(buyer.sent.at(-1));
  t.equal(replay.status, 402, 'replayed: 402');
  const required = decodePaymentRequiredHeader(replay.headers.get('payment-required') as string);
  t.equal(required.error, BatchReason.cumulativeAmountMismatch);
  const offer = required.accepts.find((a) => a.scheme === 'batch-settlement' && a.network === CAIP2.base);
  t.match(
    offer?.extra,
    { channelState: { channelId, chargedCumulativeAmount: String(3n * PRICE), balance: String(40n * PRICE) }, voucherState: { signedMaxClaimable: String(3n * PRICE) } },
    'carrying the state and the last voucher',
  );
  for (const [what, amount] of [
    ['lower', 2n * PRICE],
    ['equal', 3n * PRICE],
    ['one short', 4n * PRICE - 1n],
    ['skipped', 6n * PRICE],
  ] as const) {
    const res = await send(await voucherCredential(amount));
    t.equal(res.status, 402, `${what}: 402`);
    t.equal(errorOf(res), BatchReason.cumulativeAmountMismatch, `${what}: corrective`);
    t.match(JSON.parse(await res.text()), { type: /verification-failed$/ }, `${what}: a problem+json body`);
  }
  t.equal(upstream.calls, calls, 'the upstream was never called');
});

t.test('a voucher above the deposit is refused, however the step is sent', async (t) => {
  const calls = upstream.calls;
  const res = await send(await voucherCredential(41n * PRICE));
  t.equal(res.status, 402);
  t.equal(errorOf(res), BatchReason.cumulativeAmountMismatch, 'a jump past the next step is corrected first');
  t.equal(upstream.calls, calls);
});

t.test('channel configs naming another receiver or receiver authorizer: refused by name', async (t) => {
  const calls = upstream.calls;
  const other = freshAccount().address;
  for (const [what, cfg, reason] of [
    ['another receiver', { ...config, receiver: other }, BatchReason.receiverMismatch],
    ['another receiver authorizer', { ...config, receiverAuthorizer: other }, BatchReason.receiverAuthorizerMismatch],
    ['another token', { ...config, token: other }, BatchReason.tokenMismatch],
    ['another withdraw delay', { ...config, withdrawDelay: 1000 }, BatchReason.withdrawDelayMismatch],
  ] as const) {
    const res = await send(await voucherCredential(PRICE, cfg));
    t.equal(res.status, 402, `${what}: 402`);
    t.equal(errorOf(res), reason, `${what}: ${reason}`);
  }
  const stranger = await voucherCredential(4n * PRICE, config, freshAccount());
  t.equal(errorOf(await send(stranger)), BatchReason.voucherSignature, "a voucher signed by another key: the signature's reason");
  t.equal(upstream.calls, calls);
});

t.test('malformed payloads: 4xx JSON, never 5xx, nothing called', async (t) => {
  const calls = upstream.calls;
  const cases: Array<[string, string]> = [
    ['not base64', '%%%'],
    ['base64 of nothing JSON', Buffer.from('{"x402Version":').toString('base64')],
    ['no payload', encodedCredential({ ...lastSent, payload: undefined })],
    ['unknown payload type', encodedCredential({ ...lastSent, payload: { type: 'claim' } })],
    ['a voucher without its signature', encodedCredential({ ...lastSent, payload: { ...lastSent.payload, voucher: { channelId, maxClaimableAmount: '40000' } } })],
    ['an amount past uint128', encodedCredential({ ...lastSent, payload: { ...lastSent.payload, voucher: { ...(lastSent.payload.voucher as object), maxClaimableAmount: (1n << 130n).toString() } } })],
    ['x402Version 1', encodedCredential({ ...lastSent, x402Version: 1 })],
    ['a huge header', 'A'.repeat(200_000)],
  ];
  for (const [what, header] of cases) {
    const res = await send(header);
    t.ok(res.status === 400 || res.status === 402 || res.status === 431, `${what}: ${res.status}`);
    const text = await res.text();
    if (res.status !== 431) {
      t.match(res.headers.get('content-type'), /json/, `${what}: a JSON answer`);
      t.doesNotThrow(() => JSON.parse(text), `${what}: it parses`);
    }
  }
  t.equal(upstream.calls, calls);
});

t.test('25 concurrent copies of the next voucher: exactly one served; then the buyer goes on', async (t) => {
  const calls = upstream.calls;
  const next = encodedCredential(await voucherCredential(4n * PRICE));
  const answers = await Promise.all(Array.from({ length: 25 }, () => send(next)));
  const statuses = answers.map((a) => a.status);
  t.equal(statuses.filter((s) => s === 200).length, 1, 'one 200');
  t.equal(statuses.filter((s) => s === 402).length, 24, 'the rest 402');
  const reasons = new Set(await Promise.all(answers.filter((a) => a.status === 402).map(errorOf)));
  t.ok(
    [...reasons].every((r) => r === BatchReason.channelBusy || r === BatchReason.cumulativeAmountMismatch),
    `busy while it is served, corrective after: ${[...reasons].join(', ')}`,
  );
  t.equal(upstream.calls - calls, 1, 'upstream calls == accepted vouchers');
  const res = await buyer.pay(url());
  t.equal(res.status, 200, `the official client recovers from the corrective 402 and pays the next step (${res.status === 402 ? errorOf(res) : ''})`);
  t.match(decodePaymentResponseHeader(res.headers.get('payment-response') as string), { extra: { channelState: { chargedCumulativeAmount: String(5n * PRICE) } } });
});

t.test('SIGKILL between the write-ahead and the serve: after a restart the voucher is kept, the next continues from it', async (t) => {
  const before = upstream.calls;
  upstream.hang = true;
  const arrived = upstream.hung();
  const stuck = buyer.pay(url()).catch((err: unknown) => err);
  await arrived;
  await gw.stop('SIGKILL');
  await stuck;
  upstream.hang = false;
  t.equal(upstream.calls, before + 1, 'the killed request reached the upstream once');
  gw = (await spawnPaidGateway(manifest, upstream.origin, {}, { relayerKeys: first.relayerKeys, relayers: first.relayers, dataDir, port: gw.port })).gw;
  const res = await buyer.pay(url());
  t.equal(res.status, 200, await res.clone().text());
  t.match(
    decodePaymentResponseHeader(res.headers.get('payment-response') as string),
    { extra: { channelState: { chargedCumulativeAmount: String(7n * PRICE) } } },
    'the killed voucher (6 prices) is kept; this one is the 7th',
  );
  t.equal(upstream.calls, before + 2, 'the killed voucher is not served again');
  await gw.stop();
  const store = await openStore({ dataDir });
  t.teardown(() => store.close());
  const held = await new ChannelLedger(store.claims(CHANNEL_RECORDS)).read(channelId);
  t.same([held?.record.charged, held?.record.pending], [String(7n * PRICE), undefined], 'the record: 7 prices charged, nothing pending');
});
