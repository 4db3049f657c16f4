/**
 * The payment-channel door and its voucher flow alone, in-process: the official `@x402/fetch` with the official
 * `batch-settlement` client pays the paid route (test/support/paid-route-harness.ts, real LMDB records) whose
 * settlement port is a double that "settles" deposits into an in-memory chain (the real engine is exercised by
 * test/channels-door.test.ts). What a buyer and the merchant see: statuses, PAYMENT-RESPONSE, the corrective 402's
 * state, upstream calls counted, the channel record's charge.
 */
import { x402Client } from '@x402/core/client';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from '@x402/core/http';
import { BatchSettlementEvmScheme } from '@x402/evm/batch-settlement/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import t, { type Test } from 'tap';
import type { Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { CAIP2 } from '../src/chain/canonical.ts';
import { ChannelLedger, CHANNEL_RECORDS } from '../src/channels/channel-ledger.ts';
import { withPending } from '../src/channels/channel-record.ts';
import { channelDoor } from '../src/front-door/batch-settlement.ts';
import type { Merchant } from '../src/gateway/catalog/merchant.ts';
import type { Settlement } from '../src/ports/settlement.ts';
import { ok } from '../src/protocol/result.ts';
import type { SettleResponse, VerifyRequest } from '../src/protocol/x402/types.ts';
import type { OnchainChannel } from '../src/schemes/batch-settlement/cumulative.ts';
import { BatchReason } from '../src/verify/batch-settlement-reasons.ts';
import { gate, harness, merchant, type Harness } from './support/paid-route-harness.ts';

const AUTHORIZER = privateKeyToAccount(generatePrivateKey()).address;
const PRICE = 10_000n;
const shop: Merchant = { ...merchant, routes: merchant.routes.map((r) => ({ ...r, batchSettlement: true })) };

/** The chain as the double sees it: each channel's balance and totalClaimed. */
class FakeChain {
  readonly channels = new Map<string, OnchainChannel>();
  read = async (_network: string, id: Hex): Promise<OnchainChannel> => this.channels.get(id.toLowerCase()) ?? { balance: 0n, totalClaimed: 0n, withdrawRequestedAt: 0, refundNonce: 0n };
}

/** A settlement port double: a deposit payload "settles" by adding its amount to the fake chain's channel. */
class DepositSettlement implements Settlement {
  deposits = 0;
  refuse: string | undefined;
  readonly chain: FakeChain;
  constructor(chain: FakeChain) {
    this.chain = chain;
  }
  verify = async () => ({ isValid: true });
  shedding = async () => undefined;
  supported = () => ({ kinds: [], extensions: [], signers: {} });
  settle = async (request: VerifyRequest): Promise<SettleResponse> => {
    const payload = request.paymentPayload.payload as unknown as { type: string; voucher: { channelId: string }; deposit: { amount: string } };
    const network = request.paymentRequirements.network;
    if (payload.type !== 'deposit') return { success: false, transaction: '', network, errorReason: 'not_a_deposit' };
    if (this.refuse) return { success: false, transaction: '', network, errorReason: this.refuse };
    this.deposits += 1;
    const id = payload.voucher.channelId.toLowerCase();
    const before = await this.chain.read(network, id as Hex);
    this.chain.channels.set(id, { ...before, balance: before.balance + BigInt(payload.deposit.amount) });
    return { success: true, transaction: `0x${'de'.repeat(32)}`, network };
  };
}

interface World {
  h: Harness;
  chain: FakeChain;
  settlement: DepositSettlement;
  ledger: ChannelLedger;
  live: { boots: Set<string> | undefined };
  /** Whether the claim actors are healthy (the paywall asks before it takes a voucher). */
  claims: { healthy: boolean };
}

function world(t: Test): World {
  const chain = new FakeChain();
  const settlement = new DepositSettlement(chain);
  let ledger: ChannelLedger | undefined;
  const live: World['live'] = { boots: undefined };
  const claims: World['claims'] = { healthy: true };
  const h = harness(t, {
    merchant: shop,
    settlement,
    doors: (defaults) => [channelDoor(), ...defaults],
    channels: (store) => {
      ledger = new ChannelLedger(store.claims(CHANNEL_RECORDS));
      return {
        offers: { receiverAuthorizer: AUTHORIZER, withdrawDelay: 900, maxTimeoutSeconds: 300 },
        ledger,
        readChannel: chain.read,
        live: (boot) => (live.boots ? live.boots.has(boot) : true),
        blocked: () => (claims.healthy ? undefined : 'claims_behind'),
        withdrawMarginSeconds: 300,
      };
    },
  });
  return { h, chain, settlement, ledger: ledger!, live, claims };
}

/** The official client's fetch, pointed at the in-process handler. */
function buyer(w: World, account: PrivateKeyAccount = privateKeyToAccount(generatePrivateKey()), multiplier = 300) {
  const signer = {
    address: account.address,
    signTypedData: (m: Parameters<PrivateKeyAccount['signTypedData']>[0]) => account.signTypedData(m),
    readContract: async (args: { functionName: string; args?: readonly unknown[] }) => {
      const c = await w.chain.read(CAIP2.base, String(args.args?.[0]) as Hex);
      return [c.balance, c.totalClaimed];
    },
  };
  const scheme = new BatchSettlementEvmScheme(signer, { depositPolicy: { depositMultiplier: multiplier } });
  const client = new x402Client().register(CAIP2.base, scheme);
  const sent: Array<Record<string, string>> = [];
  const inProcess = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const req = new Request(input, init);
    const headers: Record<string, string> = {};
    req.headers.forEach((v, k) => {
      headers[k] = v;
    });
    if (headers['payment-signature']) sent.push(headers);
    const url = new URL(req.url);
    const route = url.pathname.split('/')[3] ?? '';
    const answer = await w.h.handle({
      method: req.method,
      path: url.pathname,
      query: url.search.slice(1),
      headers,
      remoteIp: '203.0.113.7',
      params: { slug: 'shop', '*': route },
      body: async () => new Uint8Array(0),
    });
    const out = new Headers();
    for (const [k, v] of Object.entries(answer.headers ?? {})) out.set(k, typeof v === 'string' ? v : String(v));
    for (const [k, v] of Object.entries(answer.moreHeaders ?? {})) out.set(k, typeof v === 'string' ? v : (v as { value: string }).value);
    const body = answer.body === undefined ? null : typeof answer.body === 'string' ? answer.body : Buffer.from(answer.body as Uint8Array);
    return new Response(answer.status === 204 ? null : body, { status: answer.status, headers: out });
  };
  return { pay: wrapFetchWithPayment(inProcess as typeof fetch, client), raw: inProcess, account, sent };
}

const URL_ = 'https://gateway.test/m/shop/joke';
const channelOf = async (w: World) => [...w.chain.channels.keys()][0] as Hex;

t.test('the 402 lists the channel offer after the exact one, with the receiver authorizer and withdraw delay', async (t) => {
  const w = world(t);
  const answer = await buyer(w).raw(URL_);
  const required = decodePaymentRequiredHeader(answer.headers.get('payment-required')!);
  t.same(
    required.accepts.map((a) => a.scheme),
    ['exact', 'batch-settlement'],
  );
  t.match(required.accepts[1], { amount: '10000', payTo: shop.payTo, extra: { receiverAuthorizer: AUTHORIZER, withdrawDelay: 900, name: 'USD Coin', version: '2' } });
});

t.test('deposit on first use, then vouchers: one settlement, the upstream called once per voucher, charged = N x price', async (t) => {
  const w = world(t);
  const b = buyer(w);
  const N = 60;
  for (let i = 0; i < N; i++) {
    const answer = await b.pay(URL_);
    t.equal(answer.status, 200, `request ${i + 1}: 200`);
    if (answer.status !== 200) break;
    const response = decodePaymentResponseHeader(answer.headers.get('payment-response')!);
    if (i === 0 || i === N - 1)
      t.match(response, { success: true, extra: { chargedAmount: '10000', channelState: { chargedCumulativeAmount: String(BigInt(i + 1) * PRICE) } } }, `receipt ${i + 1}: charged and cumulative`);
  }
  t.same([w.settlement.deposits, w.h.upstream.calls], [1, N], 'one deposit settled; the upstream called once per accepted voucher');
  const held = await w.ledger.read(await channelOf(w));
  t.same([held?.record.charged, held?.record.pending, held?.record.balance], [String(BigInt(N) * PRICE), undefined, String(300n * PRICE)]);
  t.equal(held?.record.signedMaxClaimable, String(BigInt(N) * PRICE), 'the highest signed voucher is held');
});

t.test('replayed, lower, equal and skipped vouchers: corrective 402 with the state, no upstream call, nothing charged', async (t) => {
  const w = world(t);
  const b = buyer(w);
  for (let i = 0; i < 3; i++) t.equal((await b.pay(URL_)).status, 200);
  const calls = w.h.upstream.calls;
  const last = b.sent.at(-1)!;
  const replay = await b.raw(URL_, { headers: { 'payment-signature': last['payment-signature']! } });
  t.equal(replay.status, 402, 'replayed: 402');
  const required = decodePaymentRequiredHeader(replay.headers.get('payment-required')!);
  t.equal(required.error, BatchReason.cumulativeAmountMismatch, 'the x402 error is the spec reason the client recovers on');
  const offer = required.accepts.find((a) => a.scheme === 'batch-settlement')!;
  t.match(
    offer.extra,
    { channelState: { chargedCumulativeAmount: String(3n * PRICE), balance: String(300n * PRICE) }, voucherState: { signedMaxClaimable: String(3n * PRICE) } },
    'carries the charged state and the last signed voucher',
  );
  const { signVoucher } = await import('@x402/evm/batch-settlement/client');
  const channelId = await channelOf(w);
  const payment = JSON.parse(Buffer.from(last['payment-signature']!, 'base64').toString()) as { payload: { voucher: unknown } };
  for (const [what, amount] of [
    ['lower', 2n * PRICE],
    ['equal (= charged)', 3n * PRICE],
    ['one below the next', 4n * PRICE - 1n],
    ['skipped', 5n * PRICE],
  ] as const) {
    const voucher = await signVoucher(b.account, channelId, amount.toString(), CAIP2.base);
    const forged = { ...payment, payload: { ...payment.payload, voucher } };
    const answer = await b.raw(URL_, { headers: { 'payment-signature': Buffer.from(JSON.stringify(forged)).toString('base64') } });
    t.equal(answer.status, 402, `${what}: 402`);
    t.equal(decodePaymentRequiredHeader(answer.headers.get('payment-required')!).error, BatchReason.cumulativeAmountMismatch, `${what}: corrective`);
  }
  t.equal(w.h.upstream.calls, calls, 'no upstream call for any of them');
  t.equal((await w.ledger.read(channelId))?.record.charged, String(3n * PRICE), 'nothing more charged');
  t.equal((await b.pay(URL_)).status, 200, 'the client goes on from the state');
});

t.test('a voucher above the deposit is refused; a signature of another key is refused', async (t) => {
  const w = world(t);
  const b = buyer(w, undefined, 3);
  for (let i = 0; i < 3; i++) t.equal((await b.pay(URL_)).status, 200, `voucher ${i + 1} within the 3-price deposit`);
  const channelId = await channelOf(w);
  const { signVoucher } = await import('@x402/evm/batch-settlement/client');
  const last = JSON.parse(Buffer.from(b.sent.at(-1)!['payment-signature']!, 'base64').toString()) as { accepted: unknown; payload: { type: string; channelConfig: unknown; voucher: unknown } };
  const over = { ...last, payload: { type: 'voucher', channelConfig: last.payload.channelConfig, voucher: await signVoucher(b.account, channelId, (4n * PRICE).toString(), CAIP2.base) } };
  const answer = await b.raw(URL_, { headers: { 'payment-signature': Buffer.from(JSON.stringify(over)).toString('base64') } });
  t.equal(answer.status, 402);
  t.equal(decodePaymentRequiredHeader(answer.headers.get('payment-required')!).error, BatchReason.cumulativeExceedsBalance);
  const stranger = privateKeyToAccount(generatePrivateKey());
  const forged = { ...over, payload: { ...over.payload, voucher: await signVoucher(stranger, channelId, (4n * PRICE).toString(), CAIP2.base) } };
  const bad = await b.raw(URL_, { headers: { 'payment-signature': Buffer.from(JSON.stringify(forged)).toString('base64') } });
  t.equal(decodePaymentRequiredHeader(bad.headers.get('payment-required')!).error, BatchReason.voucherSignature);
  t.equal(w.h.upstream.calls, 3, 'neither reached the upstream');
});

t.test('upstream failure: 502, the voucher released and not charged; the same voucher then buys the call', async (t) => {
  const w = world(t);
  const b = buyer(w);
  t.equal((await b.pay(URL_)).status, 200);
  w.h.upstream.answer = async () => ok({ status: 500, headers: {}, body: new Uint8Array(0), latencyMs: 1 });
  const failed = await b.pay(URL_);
  t.equal(failed.status, 502);
  const held = await w.ledger.read(await channelOf(w));
  t.same([held?.record.charged, held?.record.pending], [String(PRICE), undefined], 'not charged, nothing pending');
  w.h.upstream.answer = async () => ok({ status: 200, headers: {}, body: Buffer.from('a joke'), latencyMs: 1 });
  const again = await b.raw(URL_, { headers: { 'payment-signature': b.sent.at(-1)!['payment-signature']! } });
  t.equal(again.status, 200, 'the released voucher is accepted on its retry');
  t.equal((await w.ledger.read(await channelOf(w)))?.record.charged, String(2n * PRICE));
});

t.test('20 concurrent copies of the next voucher: one accepted, the rest 402; upstream calls == accepted', async (t) => {
  const w = world(t);
  const b = buyer(w);
  t.equal((await b.pay(URL_)).status, 200);
  const channelId = await channelOf(w);
  const { signVoucher } = await import('@x402/evm/batch-settlement/client');
  const last = JSON.parse(Buffer.from(b.sent.at(-1)!['payment-signature']!, 'base64').toString()) as { payload: { type: string; channelConfig: unknown } };
  const next = { ...last, payload: { type: 'voucher', channelConfig: last.payload.channelConfig, voucher: await signVoucher(b.account, channelId, (2n * PRICE).toString(), CAIP2.base) } };
  const header = Buffer.from(JSON.stringify(next)).toString('base64');
  const held = gate();
  w.h.upstream.answer = async () => {
    await held.promise;
    return ok({ status: 200, headers: {}, body: Buffer.from('a joke'), latencyMs: 1 });
  };
  const answers = Array.from({ length: 20 }, () => b.raw(URL_, { headers: { 'payment-signature': header } }));
  await new Promise((r) => setTimeout(r, 200));
  held.open();
  const statuses = (await Promise.all(answers)).map((a) => a.status);
  t.equal(statuses.filter((s) => s === 200).length, 1, 'exactly one 200');
  t.equal(statuses.filter((s) => s === 402).length, 19, 'the others 402 (busy or corrective)');
  t.equal(w.h.upstream.calls, 2, 'upstream calls == accepted vouchers');
  t.equal((await w.ledger.read(channelId))?.record.charged, String(2n * PRICE));
});

t.test("a dead server's write-ahead: the voucher is kept and the next voucher continues from it", async (t) => {
  const w = world(t);
  const b = buyer(w);
  t.equal((await b.pay(URL_)).status, 200);
  const channelId = await channelOf(w);
  const { signVoucher } = await import('@x402/evm/batch-settlement/client');
  // A server accepted voucher 2 (its write-ahead is durable), then died before serving or committing.
  const voucher = await signVoucher(b.account, channelId, (2n * PRICE).toString(), CAIP2.base);
  const before = (await w.ledger.read(channelId))!;
  t.ok(await w.ledger.replace(before, withPending(before.record, { cumulative: 2n * PRICE, signature: voucher.signature as Hex }, 'a-dead-boot', Date.now() + 60_000, Date.now())));
  w.live.boots = new Set();
  const calls = w.h.upstream.calls;
  // The client still believes 1 price charged: it sends voucher 2, is corrected to 2 charged, and pays voucher 3.
  const answer = await b.pay(URL_);
  t.equal(answer.status, 200);
  t.match(decodePaymentResponseHeader(answer.headers.get('payment-response')!), { extra: { channelState: { chargedCumulativeAmount: String(3n * PRICE) } } });
  t.equal(w.h.upstream.calls, calls + 1, 'one upstream call: the dead voucher is not served again');
  t.same([(await w.ledger.read(channelId))?.record.charged, (await w.ledger.read(channelId))?.record.pending], [String(3n * PRICE), undefined]);
});

t.test('hostile payloads: another receiver or authorizer, malformed, a refund: 4xx JSON, nothing called', async (t) => {
  const w = world(t);
  const b = buyer(w);
  t.equal((await b.pay(URL_)).status, 200);
  const last = JSON.parse(Buffer.from(b.sent.at(-1)!['payment-signature']!, 'base64').toString()) as { accepted: Record<string, unknown>; payload: { channelConfig: Record<string, unknown> } };
  const send = (v: unknown) => b.raw(URL_, { headers: { 'payment-signature': Buffer.from(JSON.stringify(v)).toString('base64') } });
  const other = privateKeyToAccount(generatePrivateKey()).address;
  const cases: Array<[string, unknown, string]> = [
    ['another receiver', { ...last, payload: { ...last.payload, channelConfig: { ...last.payload.channelConfig, receiver: other } } }, BatchReason.channelIdMismatch],
    ['another authorizer', { ...last, payload: { ...last.payload, channelConfig: { ...last.payload.channelConfig, receiverAuthorizer: other } } }, BatchReason.channelIdMismatch],
    ['no voucher', { ...last, payload: { type: 'voucher', channelConfig: last.payload.channelConfig } }, BatchReason.voucherPayload],
    ['unknown type', { ...last, payload: { type: 'claim' } }, BatchReason.payloadType],
    ['payload a string', { ...last, payload: 'x' }, BatchReason.payloadType],
    ['a refund where the paywall has no refund desk', { ...last, payload: { ...last.payload, type: 'refund' } }, BatchReason.refundPayload],
  ];
  for (const [what, payment, reason] of cases) {
    const answer = await send(payment);
    t.equal(answer.status, 402, `${what}: 402`);
    t.equal(decodePaymentRequiredHeader(answer.headers.get('payment-required')!).error, reason, `${what}: ${reason}`);
    t.ok(JSON.parse(await answer.text()), `${what}: a JSON body`);
  }
  const version = await send({ ...last, x402Version: 1 });
  t.equal(version.status, 400, 'x402Version 1: 400');
  t.equal(w.h.upstream.calls, 1, 'the upstream was called for the first payment only');
});

t.test('no voucher while claims are behind, nor near a withdrawal deadline: nothing charged, no upstream call', async (t) => {
  const w = world(t);
  const b = buyer(w);
  for (let i = 0; i < 2; i++) t.equal((await b.pay(URL_)).status, 200);
  const calls = w.h.upstream.calls;
  w.claims.healthy = false;
  const behind = await b.pay(URL_);
  t.equal(behind.status, 503, 'claims behind: 503');
  t.ok(Number(behind.headers.get('retry-after')) >= 1, 'with Retry-After');
  t.match(await behind.text(), /nothing was charged/);
  w.claims.healthy = true;
  // The payer's withdrawal can finalize in 100 s: inside the 300 s margin.
  const held = (await w.ledger.read(await channelOf(w)))!;
  const withdrawRequestedAt = Math.floor(Date.now() / 1000) - 900 + 100;
  t.ok(await w.ledger.replace(held, { ...held.record, withdrawRequestedAt, version: held.record.version + 1 }));
  const closing = await b.pay(URL_);
  t.equal(closing.status, 402, 'a withdrawal about to finalize: 402');
  t.equal(decodePaymentRequiredHeader(closing.headers.get('payment-required')!).error, BatchReason.cumulativeExceedsBalance);
  t.equal(w.h.upstream.calls, calls, 'the upstream was not called');
  t.equal((await w.ledger.read(await channelOf(w)))?.record.charged, String(2n * PRICE), 'nothing more charged');
});
