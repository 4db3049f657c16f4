import { assign, fromPromise, setup, type DoneActorEvent } from 'xstate';
import type { SettleResponse } from '../protocol/x402/types.ts';
import type { PaymentRecord } from './payment-record.ts';
import { extendsTrail, type SignedTx } from '../tx/trail.ts';
import type { BatchActor } from './batch-machine.ts';
import type { Verdict } from './verify-payment.ts';
import { err, type Err, type Failure, type Ok } from '../protocol/result.ts';
import { GatewayReason, SettleFailureReason, type SettleReason } from '../verify/reasons.ts';

/** What a step made of the payment: the record as it left it (and, from the simulation, the batch it is seated in). */
export interface Stepped {
  record: PaymentRecord;
  batch?: BatchActor;
  verdict?: Verdict;
}
/** What a step returns: how it left the payment, or why the payment failed (a code of the settlement vocabulary). */
export type StepResult = Ok<Stepped> | Err<Failure<SettleReason>>;
/** What a step is given: the record, the checked payment (its settlement call), and the batch it rides in, if any. */
export interface StepInput {
  record: PaymentRecord;
  verdict?: Verdict;
  batch?: BatchActor;
}
/** A step signed a version of the settlement transaction: the machine takes the grown trail before it is sent. */
export type PaymentEvent = { type: 'trail'; txs: SignedTx[] };
/** The claim step may find the payment already settled: the recorded answer is the answer. */
export type ClaimResult = StepResult | Ok<{ recorded: SettleResponse }>;

export interface PaymentInput {
  record: PaymentRecord;
  confirmDeadlineMs: number;
  /** A resumed batch member: the batch actor carrying its transaction. */
  batch?: BatchActor;
}

export interface PaymentContext {
  record: PaymentRecord;
  confirmDeadlineMs: number;
  recorded?: SettleResponse;
  /** The payment as checked (payer, settlement call, gas): what simulation and the send need. Not stored. */
  verdict?: Verdict;
  /** The batch this payment is seated in (its transaction is the batch's). */
  batch?: BatchActor;
}

type Done = Ok<Stepped>;

/**
 * The record a step left, taken into the context: its transaction trail only grows (a step that read an older
 * trail cannot shorten it); everything else is the step's.
 */
export function taken(current: PaymentRecord, next: PaymentRecord): PaymentRecord {
  if (next.txs === current.txs || extendsTrail(current.txs, next.txs)) return next;
  return { ...next, txs: current.txs };
}

const notProvided = (step: string) =>
  fromPromise<StepResult, StepInput>(async () => {
    throw new Error(`payment step '${step}' has no implementation`);
  });

/**
 * The lifecycle of one settlement. Each step's I/O is provided by the engine (`machine.provide`), so this
 * definition is pure and is what `npm run statecharts` exports.
 *
 * verifying -> claiming -> simulating -> broadcasting -> inFlight(confirming -> pending) -> settled | failed
 * A failure after the claim passes through `reconciling` (was the authorization consumed anyway?) to settled or failed.
 * A restored record enters at `inFlight` when a transaction was signed (its own, or its batch's), else at `verifying`.
 * With settlement batching, `simulating` covers the payment's wait for its batch, the batch's simulation and the
 * durable write of the signed batch transaction; `broadcasting` its send; `inFlight` the batch's receipt.
 */
export const paymentMachine = setup({
  types: {
    input: {} as PaymentInput,
    context: {} as PaymentContext,
    events: {} as PaymentEvent,
  },
  actors: {
    verify: notProvided('verify'),
    claim: fromPromise<ClaimResult, { record: PaymentRecord }>(async () => {
      throw new Error("payment step 'claim' has no implementation");
    }),
    simulate: notProvided('simulate'),
    broadcast: notProvided('broadcast'),
    confirm: notProvided('confirm'),
    reconcile: notProvided('reconcile'),
    release: notProvided('release'),
  },
  guards: {
    /** The step's output says it succeeded (`ok: true`). */
    stepOk: ({ event }) => (event as unknown as DoneActorEvent<StepResult | ClaimResult>).output.ok,
    /** The claim found this payment settled already. */
    settledBefore: ({ event }) => {
      const output = (event as unknown as DoneActorEvent<ClaimResult>).output;
      return output.ok && 'recorded' in output.value;
    },
    /** A trail handed in extends the recorded one. */
    grows: ({ context, event }) => event.type === 'trail' && extendsTrail(context.record.txs, event.txs),
    resumesInFlight: ({ context }) => (context.record.txs.length > 0 || context.record.batch !== undefined) && context.record.state !== 'settled' && context.record.state !== 'failed',
    wasSettled: ({ context }) => context.record.state === 'settled',
    wasFailed: ({ context }) => context.record.state === 'failed',
  },
  actions: {
    growTrail: assign({ record: ({ context, event }) => (event.type === 'trail' ? { ...context.record, txs: event.txs } : context.record) }),
  },
  delays: {
    confirmDeadline: ({ context }) => context.confirmDeadlineMs,
  },
}).createMachine({
  id: 'payment',
  context: ({ input }) => ({ record: input.record, confirmDeadlineMs: input.confirmDeadlineMs, ...(input.batch ? { batch: input.batch } : {}) }),
  initial: 'routing',
  states: {
    routing: {
      always: [{ guard: 'wasSettled', target: 'settled' }, { guard: 'wasFailed', target: 'failed' }, { guard: 'resumesInFlight', target: 'inFlight' }, { target: 'verifying' }],
    },
    verifying: {
      invoke: {
        src: 'verify',
        input: ({ context }) => ({ record: context.record }),
        onDone: [
          {
            guard: 'stepOk',
            target: 'claiming',
            actions: assign({ record: ({ context, event }) => taken(context.record, (event.output as Done).value.record), verdict: ({ event }) => (event.output as Done).value.verdict }),
          },
          { target: 'rejected', actions: assign({ record: ({ context, event }) => withFailure(context.record, event.output) }) },
        ],
        onError: {
          target: 'rejected',
          actions: assign({ record: ({ context, event }) => withFailure(context.record, err(GatewayReason.unexpected, String(event.error))) }),
        },
      },
    },
    claiming: {
      invoke: {
        src: 'claim',
        input: ({ context }) => ({ record: context.record }),
        onDone: [
          { guard: 'settledBefore', target: 'duplicate', actions: assign({ recorded: ({ event }) => (event.output as Ok<{ recorded: SettleResponse }>).value.recorded }) },
          { guard: 'stepOk', target: 'simulating', actions: assign({ record: ({ context, event }) => taken(context.record, (event.output as Done).value.record) }) },
          { target: 'rejected', actions: assign({ record: ({ context, event }) => withFailure(context.record, event.output as StepResult) }) },
        ],
        // The claim threw: the store did not answer (or this node is fenced). Whether the nonce is claimed is unknown here.
        onError: { target: 'rejected', actions: assign({ record: ({ context, event }) => withFailure(context.record, err(GatewayReason.settlementUnknown, String(event.error))) }) },
      },
    },
    simulating: {
      invoke: {
        src: 'simulate',
        input: ({ context }) => ({ record: context.record, ...(context.verdict ? { verdict: context.verdict } : {}) }),
        onDone: [
          {
            guard: 'stepOk',
            target: 'broadcasting',
            actions: assign({
              record: ({ context, event }) => taken(context.record, (event.output as Done).value.record),
              batch: ({ event }) => (event.output as Done).value.batch,
              verdict: ({ context, event }) => (event.output as Done).value.verdict ?? context.verdict,
            }),
          },
          { target: 'reconciling', actions: assign({ record: ({ context, event }) => withFailure(context.record, event.output) }) },
        ],
        onError: { target: 'reconciling', actions: assign({ record: ({ context, event }) => withFailure(context.record, err(SettleFailureReason.simulationError, String(event.error))) }) },
      },
    },
    broadcasting: {
      invoke: {
        src: 'broadcast',
        input: ({ context }) => ({ record: context.record, ...(context.verdict ? { verdict: context.verdict } : {}), ...(context.batch ? { batch: context.batch } : {}) }),
        onDone: [
          { guard: 'stepOk', target: 'inFlight', actions: assign({ record: ({ context, event }) => taken(context.record, (event.output as Done).value.record) }) },
          { target: 'reconciling', actions: assign({ record: ({ context, event }) => withFailure(context.record, event.output) }) },
        ],
        onError: { target: 'reconciling', actions: assign({ record: ({ context, event }) => withFailure(context.record, err(SettleFailureReason.broadcastError, String(event.error))) }) },
      },
      on: { trail: { guard: 'grows', actions: 'growTrail' } },
    },
    inFlight: {
      invoke: {
        src: 'confirm',
        input: ({ context }) => ({ record: context.record, ...(context.batch ? { batch: context.batch } : {}) }),
        onDone: [
          { guard: 'stepOk', target: 'settled', actions: assign({ record: ({ context, event }) => taken(context.record, (event.output as Done).value.record) }) },
          { target: 'reconciling', actions: assign({ record: ({ context, event }) => withFailure(context.record, event.output) }) },
        ],
        // The confirm step retries its own RPC failures; reaching here means it gave up, and the transaction may
        // still mine: the record stays in flight and the engine's restore picks it up again.
        onError: { target: 'stalled' },
      },
      // A version priced out by the base fee is replaced: the machine takes the grown trail before it is sent.
      on: { trail: { guard: 'grows', actions: 'growTrail' } },
      initial: 'confirming',
      states: {
        confirming: { after: { confirmDeadline: 'pending' } },
        pending: {},
      },
    },
    /**
     * Failed, or the outcome unknown, after the nonce was claimed: the chain is asked whether the authorization was
     * consumed anyway (a front-runner's copy of the call, or our own send that landed despite an error). Consumed by
     * a transaction that moved the amount to the payee: settled by it. Otherwise the claim is released.
     */
    reconciling: {
      invoke: {
        src: 'reconcile',
        input: ({ context }) => ({ record: context.record }),
        onDone: [
          { guard: 'stepOk', target: 'settled', actions: assign({ record: ({ context, event }) => taken(context.record, (event.output as Done).value.record) }) },
          { target: 'releasing', actions: assign({ record: ({ context, event }) => withFailure(context.record, event.output) }) },
        ],
        onError: { target: 'releasing' },
      },
    },
    releasing: {
      invoke: {
        src: 'release',
        input: ({ context }) => ({ record: context.record }),
        onDone: { target: 'failed' },
        onError: { target: 'failed' },
      },
    },
    settled: { type: 'final' },
    failed: { type: 'final' },
    /** Refused before the nonce was claimed: nothing was written, nothing to release. */
    rejected: { type: 'final' },
    /** The same payment had settled already: its recorded answer stands. */
    duplicate: { type: 'final' },
    stalled: { type: 'final' },
  },
});

function withFailure(record: PaymentRecord, output: StepResult | ClaimResult): PaymentRecord {
  if (output.ok) return record;
  return { ...record, failure: { reason: output.error.code, message: output.error.message } };
}

export type { SignedTx };
