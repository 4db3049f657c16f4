// The payment machine driven through its transitions with fake steps: no chain, no store, milliseconds.
import t from 'tap';
import { fromPromise, toPromise } from 'xstate';
import type { Hex } from 'viem';
import { DurableHost } from '../../src/actors/durable-host.ts';
import { err, ok } from '../../src/protocol/result.ts';
import { paymentMachine, taken, type ClaimResult, type StepInput, type StepResult } from '../../src/engine/payment-machine.ts';
import { createLogger } from '../../src/log/logger.ts';
import type { PaymentRecord } from '../../src/engine/payment-record.ts';
import type { SignedTx } from '../../src/tx/trail.ts';
import type { SettleResponse, VerifyRequest } from '../../src/protocol/x402/types.ts';
import { trace } from '../helpers/actor-trace.ts';

const network = 'eip155:31337';
const payer = '0x1111111111111111111111111111111111111111';
const ourTx = `0x${'aa'.repeat(32)}` as Hex;
const theirTx = `0x${'bb'.repeat(32)}` as Hex;
const signed = (hash: Hex): SignedTx => ({ hash }) as SignedTx;

function newRecord(over: Partial<PaymentRecord> = {}): PaymentRecord {
  return { id: 'eip3009|key', attempt: 'a1', network, payer: '', fingerprint: 'f', request: {} as VerifyRequest, state: 'verifying', txs: [], createdAt: 0, updatedAt: 0, ...over };
}
const settledBy = (record: PaymentRecord, tx: Hex): PaymentRecord => ({ ...record, result: { success: true, transaction: tx, network, payer } });

type Step = (record: PaymentRecord) => Promise<StepResult> | StepResult;
type Steps = { verify: Step; claim: (record: PaymentRecord) => Promise<ClaimResult> | ClaimResult; simulate: Step; broadcast: Step; confirm: Step; reconcile: Step; release: Step };

/** Steps that settle a payment on its own transaction; each call is counted. */
function happySteps(): Steps {
  return {
    verify: (r) => ok({ record: { ...r, payer } }),
    claim: (r) => ok({ record: { ...r, state: 'claiming' } }),
    simulate: (r) => ok({ record: { ...r, gas: '50000' } }),
    broadcast: (r) => ok({ record: { ...r, txs: [...r.txs, signed(ourTx)] } }),
    confirm: (r) => ok({ record: settledBy(r, ourTx) }),
    reconcile: (r) => err(r.failure?.reason ?? 'unexpected_settle_error', ''),
    release: (r) => err(r.failure?.reason ?? 'unexpected_settle_error', ''),
  };
}

function run(steps: Partial<Steps>, record = newRecord(), confirmDeadlineMs = 1000) {
  const all = { ...happySteps(), ...steps };
  const calls: string[] = [];
  const step = (name: keyof Steps) =>
    fromPromise(async ({ input }: { input: { record: PaymentRecord } }) => {
      calls.push(name);
      return (all[name] as (r: PaymentRecord) => unknown)(input.record);
    });
  const machine = paymentMachine.provide({
    actors: {
      verify: step('verify'),
      claim: step('claim'),
      simulate: step('simulate'),
      broadcast: step('broadcast'),
      confirm: step('confirm'),
      reconcile: step('reconcile'),
      release: step('release'),
    } as never,
  });
  return trace(machine, { record, confirmDeadlineMs }).then((r) => ({ ...r, calls, record: r.snapshot.context.record }));
}

t.test('a payment settles on its own transaction, sent once', async (t) => {
  const { states, calls, record, snapshot } = await run({});
  t.same(states, ['verifying', 'claiming', 'simulating', 'broadcasting', 'inFlight.confirming', 'settled']);
  t.equal(calls.filter((c) => c === 'broadcast').length, 1, 'charged once: one broadcast');
  t.notOk(calls.includes('release'), 'the nonce claim is kept');
  t.equal(snapshot.status, 'done');
  t.equal(record.result?.transaction, ourTx, 'the answer names the transaction that mined');
  t.equal(record.payer, payer);
  t.equal(record.gas, '50000', 'what each step learnt is carried to the next');
});

t.test('a payment refused at verification writes nothing and claims nothing', async (t) => {
  const { states, calls, record } = await run({ verify: () => err('invalid_exact_evm_signature', 'bad signature') });
  t.same(states, ['verifying', 'rejected']);
  t.same(calls, ['verify']);
  t.same(record.failure, { reason: 'invalid_exact_evm_signature', message: 'bad signature' });
});

t.test('a verify step that throws is a rejection with its own reason', async (t) => {
  const { states, record } = await run({ verify: () => Promise.reject(new Error('rpc down')) });
  t.same(states, ['verifying', 'rejected']);
  t.equal(record.failure?.reason, 'unexpected_verify_error');
  t.match(record.failure?.message, /rpc down/);
});

t.test('the same payment settled before: the recorded answer, nothing sent', async (t) => {
  const recorded: SettleResponse = { success: true, transaction: theirTx, network, payer };
  const { states, calls, snapshot } = await run({ claim: () => ok({ recorded }) });
  t.same(states, ['verifying', 'claiming', 'duplicate']);
  t.same(calls, ['verify', 'claim']);
  t.same(snapshot.context.recorded, recorded);
});

t.test('a claim lost to another attempt is refused before anything is simulated', async (t) => {
  const { states, record } = await run({ claim: () => err('payment_in_progress', 'another payment with this nonce is being settled') });
  t.same(states, ['verifying', 'claiming', 'rejected']);
  t.equal(record.failure?.reason, 'payment_in_progress');
});

t.test('a simulation that reverts, the authorization not consumed: failed and the claim released', async (t) => {
  const { states, calls, record } = await run({ simulate: () => err('invalid_exact_evm_insufficient_balance', 'no balance') });
  t.same(states, ['verifying', 'claiming', 'simulating', 'reconciling', 'releasing', 'failed']);
  t.notOk(calls.includes('broadcast'), 'nothing sent');
  t.equal(calls.filter((c) => c === 'release').length, 1, 'released once');
  t.equal(record.failure?.reason, 'invalid_exact_evm_insufficient_balance', 'the reason the buyer hears is the simulation failure');
  t.equal(record.result, undefined);
});

t.test("reverted because a front-runner's copy consumed the authorization: settled by the consuming transaction", async (t) => {
  const { states, calls, record } = await run({
    simulate: () => err('invalid_exact_evm_nonce_already_used', 'used'),
    reconcile: (r) => {
      const { failure: _, ...rest } = r;
      return ok({ record: settledBy(rest, theirTx) });
    },
  });
  t.same(states, ['verifying', 'claiming', 'simulating', 'reconciling', 'settled']);
  t.notOk(calls.includes('release'), 'a settled payment keeps its claim');
  t.equal(record.result?.transaction, theirTx, 'the answer names the transaction that moved the money');
  t.equal(record.failure, undefined, 'no failure left on a settled record');
});

t.test('a node that refuses the send: reconciled, then failed', async (t) => {
  const { states, record } = await run({ broadcast: () => err('broadcast_rejected', 'underpriced') });
  t.same(states, ['verifying', 'claiming', 'simulating', 'broadcasting', 'reconciling', 'releasing', 'failed']);
  t.equal(record.failure?.reason, 'broadcast_rejected');
});

t.test('a step that throws after the claim is reconciled too', async (t) => {
  for (const [step, reason] of [
    ['simulate', 'simulation_error'],
    ['broadcast', 'broadcast_error'],
  ] as const) {
    const { states, record } = await run({ [step]: () => Promise.reject(new Error('boom')) });
    t.equal(states.at(-1), 'failed', `${step} throws`);
    t.ok(states.includes('reconciling') && states.includes('releasing'), `${step}: reconciled and released`);
    t.equal(record.failure?.reason, reason);
  }
});

t.test('a reverted settlement transaction is reconciled and fails', async (t) => {
  const { states, calls, record } = await run({ confirm: (r) => err('invalid_exact_evm_transaction_failed', `settlement ${r.txs.at(-1)?.hash} reverted`) });
  t.same(states, ['verifying', 'claiming', 'simulating', 'broadcasting', 'inFlight.confirming', 'reconciling', 'releasing', 'failed']);
  t.equal(calls.filter((c) => c === 'broadcast').length, 1, 'not sent again');
  t.same(
    record.txs.map((x) => x.hash),
    [ourTx],
    'the record keeps the transaction it sent',
  );
});

t.test('past the confirm deadline the payment is pending, then settles when the receipt comes', async (t) => {
  // The receipt comes 40 ms after confirming began, the deadline 5 ms after: both timers are set on entering
  // `confirming`, so the deadline's fires first however late a loaded machine runs them (a timer started with the test
  // instead could fire before confirming even began, and the payment then never looked pending).
  const done = run(
    {
      confirm: async (r) => {
        await new Promise((resolve) => setTimeout(resolve, 40));
        return ok({ record: settledBy(r, ourTx) });
      },
    },
    newRecord(),
    5,
  );
  const { states } = await done;
  t.same(states, ['verifying', 'claiming', 'simulating', 'broadcasting', 'inFlight.confirming', 'inFlight.pending', 'settled']);
});

t.test('a confirm step that gives up leaves the payment stalled in flight, its claim kept', async (t) => {
  const { states, calls, record } = await run({ confirm: () => Promise.reject(new Error('stopped while the transaction was in flight')) });
  t.same(states, ['verifying', 'claiming', 'simulating', 'broadcasting', 'inFlight.confirming', 'stalled']);
  t.notOk(calls.includes('release') || calls.includes('reconcile'), 'nothing released: the transaction may still mine');
  t.same(
    record.txs.map((x) => x.hash),
    [ourTx],
  );
});

t.test('a restored record resumes where it stood, never signing anew', async (t) => {
  const inFlight = newRecord({ state: 'inFlight', payer, txs: [signed(ourTx)] });
  const resumed = await run({}, inFlight);
  t.same(resumed.states, ['inFlight.confirming', 'settled'], 'a signed transaction is confirmed');
  t.same(resumed.calls, ['confirm']);

  const batched = newRecord({ state: 'broadcasting', payer, batch: { id: 'b1', index: 1, tx: ourTx } });
  const member = await run({}, batched);
  t.same(member.states, ['inFlight.confirming', 'settled'], 'a batch member awaits its batch');
  t.same(member.calls, ['confirm']);

  const claimed = newRecord({ state: 'claiming' });
  const fresh = await run({}, claimed);
  t.equal(fresh.states[0], 'verifying', 'nothing signed yet: verified again');

  for (const state of ['settled', 'failed'] as const) {
    const over = await run({}, newRecord({ state, txs: [signed(ourTx)] }));
    t.same(over.states, [state], `a ${state} record stays ${state}`);
    t.same(over.calls, [], 'and runs no step');
  }
});

t.test('hosted durably: the trail only grows, and a failed confirm cannot write an older transaction list over a newer one', async (t) => {
  const writes: PaymentRecord[] = [];
  const replacement = signed(theirTx);
  const machine = paymentMachine.provide({
    actors: {
      confirm: fromPromise<StepResult, StepInput>(async ({ input }) => {
        // The transaction is priced out and replaced: the machine takes the grown trail, the host writes it.
        await host.record(input.record.id, { type: 'trail', txs: [...input.record.txs, replacement] });
        // A trail that is not the recorded one grown is refused, and nothing is written for it.
        const stale = await host.record(input.record.id, { type: 'trail', txs: [signed(theirTx)] }).then(
          () => 'taken',
          (err: unknown) => String(err),
        );
        t.match(stale, /did not take/, 'a stale trail is refused');
        // Then it reverts; the step read the trail when it started.
        return err('invalid_exact_evm_transaction_failed', 'reverted');
      }),
      reconcile: fromPromise<StepResult, StepInput>(async ({ input }) => err(input.record.failure?.reason ?? 'unexpected_settle_error', '')),
      // A step that hands back the record as it read it at its start (older trail) cannot shorten the trail either.
      release: fromPromise<StepResult, StepInput>(async () => err('unexpected_settle_error', '')),
    },
  });
  const host = new DurableHost({
    machine,
    log: createLogger('test', { write: () => {} }),
    durable: (snapshot, state) =>
      state === 'routing' || state === 'verifying' || state === 'claiming' ? undefined : { key: `${state}|${snapshot.context.record.txs.length}`, value: { ...snapshot.context.record, state } },
    write: async (record) => {
      await new Promise((r) => setTimeout(r, 1));
      writes.push(record);
    },
  });
  const actor = host.spawn('eip3009|key', { record: newRecord({ state: 'inFlight', payer, txs: [signed(ourTx)] }), confirmDeadlineMs: 1000 });
  await toPromise(actor);
  await host.written('eip3009|key');
  t.same(
    writes.map((w) => [w.state, w.txs.map((x) => x.hash)]),
    [
      ['inFlight', [ourTx]],
      ['inFlight', [ourTx, theirTx]],
      ['reconciling', [ourTx, theirTx]],
      ['releasing', [ourTx, theirTx]],
      ['failed', [ourTx, theirTx]],
    ],
    'one write per durable transition and per grown trail; every later write keeps the replacement',
  );

  t.same(
    taken(newRecord({ txs: [signed(ourTx), replacement] }), newRecord({ txs: [signed(ourTx)] })).txs.map((x) => x.hash),
    [ourTx, theirTx],
    'a step output with an older trail keeps the newer one',
  );
});
