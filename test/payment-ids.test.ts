/**
 * The idempotency-key store of payment identifiers on a real LMDB store: who binds a key, what a repeat, a conflict,
 * a race, an oversized answer, an unpaid outcome and the retention get. The paid flow around it is
 * test/payment-identifier.test.ts's.
 */
import t from 'tap';
import { rmSync } from 'node:fs';
import { encodeAnswer, PaymentIds, type PaymentIdPolicy, type PaymentIdRecord } from '../src/gateway/paywall/payment-ids.ts';
import type { VerifyRequest } from '../src/protocol/x402/types.ts';
import { openLmdbStore } from '../src/store/lmdb/open-lmdb-store.ts';
import type { Store } from '../src/store/open-store.ts';
import { tempDir } from './helpers/temp-dir.ts';

const dir = tempDir('payment-ids');
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const store: Store = openLmdbStore(dir);
t.teardown(() => store.close());
// The real clock, pushed ahead by `skew` to pass a lease or the retention (waits are timed by the same clock).
let skew = 0;
const policy: PaymentIdPolicy = { maxBodyBytes: 16, retentionMs: 60_000, leaseMs: 5_000, waitMs: 300, maxWaiting: 4 };
const ids = new PaymentIds(
  { claims: store.claims('payment-ids'), records: store.collection<PaymentIdRecord>('payment-ids'), expiry: store.collection<string>('payment-id-expiry') },
  policy,
  () => Date.now() + skew,
);
const payment = (n: number) => ({ paymentPayload: { n }, paymentRequirements: { n } }) as unknown as VerifyRequest;
const answer = (body: string) => encodeAnswer(200, { 'content-type': 'text/plain' }, body, policy.maxBodyBytes);

t.test('the first payment binds the key; repeats run on it until served, then replay its answer', async (t) => {
  const first = await ids.turn('k1', 'fp', payment(1));
  t.equal(first.kind, 'run');
  if (first.kind !== 'run') return;
  t.same(first.request, payment(1));
  await first.finish('charged'); // e.g. pending: charged, not served
  const retry = await ids.turn('k1', 'fp', payment(2));
  t.equal(retry.kind, 'run');
  if (retry.kind !== 'run') return;
  t.same(retry.request, payment(1), 'the retry runs on the bound payment, not its own');
  await retry.record(answer('hello'));
  await retry.finish('served');
  const replay = await ids.turn('k1', 'fp', payment(3));
  t.match(replay, { kind: 'replay', answer: { status: 200, body: Buffer.from('hello').toString('base64') }, bound: payment(1) });
  t.match(await ids.turn('k1', 'other', payment(4)), { kind: 'conflict' }, 'another request: conflict');
});

t.test('of concurrent first requests one runs; the others wait for its answer, or are told to retry', async (t) => {
  const [running, ...others] = await Promise.all([1, 2, 3].map((n) => ids.turn('k2', 'fp', payment(n))));
  t.same([running?.kind, ...others.map((o) => o.kind)], ['run', 'busy', 'busy'], 'one runs; the others, still waiting when their wait ends, are told to retry');
  if (running?.kind !== 'run') return;
  const waiting = ids.turn('k2', 'fp', payment(4));
  await new Promise((r) => setTimeout(r, 100));
  await running.record(answer('once'));
  await running.finish('served');
  t.match(await waiting, { kind: 'replay' }, 'a waiter gets the answer once it is recorded');
});

t.test('a run that charged nothing frees the key for another payment', async (t) => {
  const first = await ids.turn('k3', 'fp', payment(1));
  if (first.kind !== 'run') return t.fail(first.kind);
  await first.finish('not-charged');
  const next = await ids.turn('k3', 'fp', payment(2));
  t.match(next, { kind: 'run', request: payment(2) }, 'bound to the new payment');
  if (next.kind === 'run') await next.finish('not-charged');
});

t.test('an answer over the cap is not kept: the key then answers gone, never runs again', async (t) => {
  const first = await ids.turn('k4', 'fp', payment(1));
  if (first.kind !== 'run') return t.fail(first.kind);
  await first.record(answer('x'.repeat(17)));
  await first.finish('served');
  t.match(await ids.turn('k4', 'fp', payment(2)), { kind: 'gone', message: /17 bytes \(over 16\)/ });
});

t.test('a lease of a node that died is taken over once it ends', async (t) => {
  const first = await ids.turn('k5', 'fp', payment(1));
  t.equal(first.kind, 'run');
  skew += policy.leaseMs + 1;
  t.match(await ids.turn('k5', 'fp', payment(2)), { kind: 'run', request: payment(1) }, 'taken over, on the bound payment');
});

t.test('keys are forgotten after the retention, by a repeat or by the sweep', async (t) => {
  skew += policy.retentionMs + 1;
  t.match(await ids.turn('k1', 'fp', payment(9)), { kind: 'run', request: payment(9) }, 'an expired key is a new purchase');
  t.ok((await ids.sweep()) >= 3, 'the sweep forgets the other expired keys');
  t.equal(await store.collection<PaymentIdRecord>('payment-ids').get('k4'), undefined);
  t.equal(await store.claims('payment-ids').holder('k4'), undefined);
});
