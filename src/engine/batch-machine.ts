import { minedTrail, signingTrail } from '../tx/trail-states.ts';
import { assign, fromPromise, setup, type ActorRefFrom, type DoneActorEvent } from 'xstate';
import type { Address } from 'viem';
import type { BatchRecord, PaymentRecord } from './payment-record.ts';
import { extendsTrail, type SignedTx } from '../tx/trail.ts';
import type { Err, Failure, Ok } from '../protocol/result.ts';
import { SettleFailureReason, type SettleReason } from '../verify/reasons.ts';
import type { SettlementCall } from '../schemes/scheme.ts';
import type { Mined } from '../tx/courier.ts';

/** One payment in a batch: its record (nonce claimed) and its settlement call. */
export interface BatchMember {
  record: PaymentRecord;
  call: SettlementCall;
}

/** A mined batch: its receipt, its calls as the transaction made them, and which of them settled (once for all members). */
export interface MinedBatch extends Mined {
  calls: Array<SettlementCall | undefined>;
  settled: boolean[];
}

/** What the simulation decided: members refused (their calls revert), and whether the rest ride in one transaction. */
export interface Simulated {
  refused: Array<{ id: string; reason: SettleReason; message: string }>;
  /** Absent: the rest settle alone (fewer than two left, no aggregate3 contract, or the chain moved). */
  batch?: { multicall: Address /** The gas limit the batch transaction is sent with. */; gas: bigint };
}

/** Whether the batch transaction went out: the node took it, or refused it (why). */
export type SendResult = Ok<undefined> | Err<Failure<SettleReason>>;

export interface BatchInput {
  /** A new batch (no transaction yet) or one read back from the store. */
  batch: BatchRecord;
  /** The members (for a resumed batch: their records; their calls are read back from the transaction). */
  members: BatchMember[];
  maxSize: number;
  windowMs: number;
}

export interface BatchContext extends BatchInput {
  refused: Simulated['refused'];
  /** Members that settle on their own, not in this batch. */
  alone: string[];
  multicall?: Address;
  gas?: bigint;
  mined?: MinedBatch;
  failure?: { reason: SettleReason; message: string };
}

export type BatchEvent =
  /** A verified payment, its nonce claimed, joins the open batch. */
  | { type: 'join'; member: BatchMember }
  /** No other payment is on its way: the batch leaves now (eager batching). */
  | { type: 'close' }
  /** The trail grew: the batch transaction was signed (again), or replaced by one paying more. */
  | { type: 'trail'; txs: SignedTx[] };

const notProvided = <O, I>(step: string) =>
  fromPromise<O, I>(async () => {
    throw new Error(`batch step '${step}' has no implementation`);
  });

/**
 * The lifecycle of one settlement batch: verified payments of one chain and kind that are ready within the window
 * go out as one `aggregate3` transaction. Each step's I/O is provided by the batcher (`machine.provide`), so this
 * definition is pure and is what `npm run statecharts` exports.
 *
 * open -> simulating -> sending(signing -> signed) -> sent(waiting -> replaced) -> mined
 * Members whose calls revert are refused at `simulating`; fewer than two left: `dissolved` (each settles alone). A
 * send the node refuses: `failed`. The batch's record (its trail) and every member's record naming it are written
 * before the transaction is first sent, and again at every replacement; a restored batch with a trail enters at
 * `sent` and is carried to its receipt, never signed anew.
 */
export const batchMachine = setup({
  types: {
    input: {} as BatchInput,
    context: {} as BatchContext,
    events: {} as BatchEvent,
  },
  actors: {
    simulate: notProvided<Simulated, { network: string; members: BatchMember[] }>('simulate'),
    send: notProvided<SendResult, { batch: BatchRecord; calls: SettlementCall[]; multicall: Address; gas: bigint }>('send'),
    confirm: notProvided<MinedBatch, { batch: BatchRecord }>('confirm'),
  },
  guards: {
    resumesSent: ({ context }) => context.batch.txs.length > 0 && context.batch.state !== 'failed',
    wasFailed: ({ context }) => context.batch.state === 'failed',
    fillsUp: ({ context }) => context.members.length + 1 >= context.maxSize,
    tooFew: ({ context }) => context.members.length < 2,
    rides: ({ event }) => (event as unknown as DoneActorEvent<Simulated>).output.batch !== undefined,
    sentOk: ({ event }) => (event as unknown as DoneActorEvent<SendResult>).output.ok,
    grows: ({ context, event }) => event.type === 'trail' && extendsTrail(context.batch.txs, event.txs),
  },
  actions: {
    /** The machine takes the grown trail (the guard `grows` checked that it only grows). */
    growTrail: assign({ batch: ({ context, event }) => (event.type === 'trail' ? { ...context.batch, txs: event.txs } : context.batch) }),
  },
  delays: {
    window: ({ context }) => context.windowMs,
  },
}).createMachine({
  id: 'batch',
  context: ({ input }) => ({ ...input, refused: [], alone: [] }),
  initial: 'routing',
  states: {
    routing: {
      always: [{ guard: 'wasFailed', target: 'failed' }, { guard: 'resumesSent', target: 'sent' }, { target: 'open' }],
    },
    /** Waiting for company: until the window ends, the batch is full, or nobody else is coming. */
    open: {
      on: {
        join: [
          { guard: 'fillsUp', target: 'closing', actions: assign({ members: ({ context, event }) => [...context.members, event.member] }) },
          { actions: assign({ members: ({ context, event }) => [...context.members, event.member] }) },
        ],
        close: 'closing',
      },
      after: { window: 'closing' },
    },
    closing: {
      always: [{ guard: 'tooFew', target: 'dissolved', actions: assign({ alone: ({ context }) => context.members.map((m) => m.record.id) }) }, { target: 'simulating' }],
    },
    /** One estimate of the whole; when that reverts, which calls would, and an estimate of the rest. */
    simulating: {
      invoke: {
        src: 'simulate',
        input: ({ context }) => ({ network: context.batch.network, members: context.members }),
        onDone: [
          {
            guard: 'rides',
            target: 'sending',
            actions: assign(({ context, event }) => {
              const refused = new Set(event.output.refused.map((r) => r.id));
              const members = context.members.filter((m) => !refused.has(m.record.id));
              const batch = event.output.batch as NonNullable<Simulated['batch']>;
              return { refused: event.output.refused, members, multicall: batch.multicall, gas: batch.gas, batch: { ...context.batch, members: members.map((m) => m.record.id) } };
            }),
          },
          {
            target: 'dissolved',
            actions: assign(({ context, event }) => {
              const refused = new Set(event.output.refused.map((r) => r.id));
              return { refused: event.output.refused, alone: context.members.filter((m) => !refused.has(m.record.id)).map((m) => m.record.id) };
            }),
          },
        ],
        // Only reached before anything was signed: nothing is in flight, every member is refused.
        onError: {
          target: 'dissolved',
          actions: assign({ refused: ({ context, event }) => context.members.map((m) => ({ id: m.record.id, reason: SettleFailureReason.simulationError, message: String(event.error) })) }),
        },
      },
    },
    /** Signs, has the trail written (`trail`, the batch and every member's record at once), and only then sends. */
    sending: {
      invoke: {
        src: 'send',
        input: ({ context }) => ({ batch: context.batch, calls: context.members.map((m) => m.call), multicall: context.multicall as Address, gas: context.gas as bigint }),
        onDone: [
          { guard: 'sentOk', target: 'sent' },
          {
            target: 'failed',
            actions: assign({ failure: ({ event }) => ({ reason: (event.output as Err<Failure<SettleReason>>).error.code, message: (event.output as Err<Failure<SettleReason>>).error.message }) }),
          },
        ],
        // Signing or the first durable write failed: nothing was sent.
        onError: { target: 'failed', actions: assign({ failure: ({ event }) => ({ reason: SettleFailureReason.broadcastError, message: String(event.error) }) }) },
      },
      ...signingTrail(),
    },
    /** Carried to its receipt, once for every member; priced out by the base fee, it is replaced (same nonce). */
    sent: {
      invoke: {
        src: 'confirm',
        input: ({ context }) => ({ batch: context.batch }),
        onDone: {
          target: 'mined',
          actions: assign({
            mined: ({ event }) => event.output,
            batch: ({ context, event }) => ({ ...context.batch, txs: event.output.txs.length >= context.batch.txs.length ? event.output.txs : context.batch.txs }),
          }),
        },
        // The confirm step gives up only when the batcher stops: the transaction may still mine, the next start resumes it.
        onError: { target: 'stalled' },
      },
      ...minedTrail(),
    },
    mined: { type: 'final' },
    /** Signed but refused by the node, or never signed: no member is in a transaction of this batch. */
    failed: { type: 'final' },
    /** Not a batch after all: its members are refused or settle alone. */
    dissolved: { type: 'final' },
    stalled: { type: 'final' },
  },
});

/** The member records as the batch's trail leaves them: each names the batch, its call and the current transaction. */
export function seatedRecords(context: Pick<BatchContext, 'batch' | 'members'>, state: string): PaymentRecord[] {
  const tx = context.batch.txs.at(-1);
  if (!tx) return [];
  const index = new Map(context.batch.members.map((id, i) => [id, i]));
  return context.members.map((m) => ({ ...m.record, state, batch: { id: context.batch.id, index: index.get(m.record.id) ?? -1, tx: tx.hash } }));
}

/**
 * The record of the member `id` alone, as {@link seatedRecords} has it; undefined when it is no member or nothing is
 * signed yet. Each member asks for its own: building every record for each would cost the batch its size squared.
 */
export function seatedRecord(context: Pick<BatchContext, 'batch' | 'members'>, id: string, state: string): PaymentRecord | undefined {
  const tx = context.batch.txs.at(-1);
  const member = context.members.find((m) => m.record.id === id);
  if (!tx || !member) return undefined;
  return { ...member.record, state, batch: { id: context.batch.id, index: context.batch.members.indexOf(id), tx: tx.hash } };
}

export type BatchActor = ActorRefFrom<typeof batchMachine>;
