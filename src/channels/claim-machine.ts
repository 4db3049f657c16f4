/**
 * The lifecycle of one claim of payment-channel vouchers (x402 `batch-settlement`) and the sweep that follows it:
 * accepted-but-unclaimed vouchers of many channels claimed in ONE `claimWithSignature` transaction, then the claimed
 * funds swept to each merchant (`settle(receiver, token)`, one transaction for every receiver and token of the claim).
 * Each step's I/O is provided by the claimer (`machine.provide`), so this definition is pure and is what
 * `npm run statecharts` exports.
 *
 * simulating -> sending(signing -> signed) -> sent(waiting -> replaced) -> recording -> sweeping(signing -> signed)
 * -> sweepSent(waiting -> replaced) -> swept
 *
 * A row that would revert is dropped at `simulating` (the rest are claimed); nothing left: `empty`. Each signed
 * version of the claim transaction and of the sweep is written (its trail) BEFORE it is sent, so a crash after the
 * broadcast resumes the same transaction from its record, never a second claim; `recording` (the channel records'
 * claimed totals) is idempotent, and a resumed claim whose receipt exists passes through it again. A sweep moves funds
 * from the channel contract straight to the merchant's wallet; one with nothing due changes nothing.
 */
import { minedTrail, signingTrail } from '../tx/trail-states.ts';
import { assign, fromPromise, setup, type DoneActorEvent } from 'xstate';
import type { Address, Hex } from 'viem';
import type { ChannelConfig } from '../schemes/batch-settlement/channel-config.ts';
import { extendsTrail, type SignedTx } from '../tx/trail.ts';

/** The sweep's trail: its own event, guard and action beside the claim's. */
const SWEEP_TRAIL = { event: 'sweepTrail', guard: 'sweepGrows', action: 'growSweepTrail' } as const;

/** One row of the claim: a channel's latest voucher and the total it claims (decimal strings: the record is JSON). */
export interface ClaimRow {
  channelId: Hex;
  config: ChannelConfig;
  maxClaimableAmount: string;
  signature: Hex;
  /** The cumulative total this row claims (what the gateway has charged on the channel). */
  totalClaimed: string;
  /** What this row adds beyond the channel's claimed total as last read. */
  exposure: string;
}

/** A receiver and token the claim credited: one `settle` call of the sweep. */
export interface SweepTarget {
  receiver: Address;
  token: Address;
}

/** The durable record of one claim (and its sweep), written whenever one of its trails grows or its state moves. */
export interface ClaimRecord {
  id: string;
  /** CAIP-2 network. */
  network: string;
  /** The machine's top-level state as last written. */
  state: string;
  rows: ClaimRow[];
  /** Rows the simulation found would revert, left out of this claim. */
  dropped: Array<{ channelId: Hex; reason: string }>;
  /** Every signed version of the claim transaction; the last is current. */
  txs: SignedTx[];
  /** Every signed version of the sweep transaction (its calls: {@link sweepTargets} of the rows). */
  sweepTxs: SignedTx[];
  /** The mined claim and sweep transactions. */
  claimTx?: Hex;
  sweepTx?: Hex;
  failure?: string;
  createdAt: number;
  updatedAt: number;
}

/** What the simulation of a claim kept (rows, the gas, the authorizer's `ClaimBatch` signature) and dropped. */
export interface SimulatedClaim {
  rows: ClaimRow[];
  dropped: ClaimRecord['dropped'];
  gas: bigint;
  authorizerSignature: Hex;
}

/** A sent transaction's fate: its hash once mined, and whether it succeeded. */
export interface MinedTx {
  hash: Hex;
  success: boolean;
  txs: SignedTx[];
}

export interface ClaimContext {
  record: ClaimRecord;
  gas?: bigint;
  authorizerSignature?: Hex;
}

export type ClaimEvent = { type: 'trail'; txs: SignedTx[] } | { type: 'sweepTrail'; txs: SignedTx[] };

/** The states a claim's record ends in. */
export const CLAIM_FINALS = ['swept', 'empty', 'failed', 'reverted', 'sweepFailed', 'stalled'] as const;
export type ClaimFinal = (typeof CLAIM_FINALS)[number];

const notProvided = <O, I>(step: string) =>
  fromPromise<O, I>(async () => {
    throw new Error(`claim step '${step}' has no implementation`);
  });

const failure = (error: unknown) => (error instanceof Error ? error.message : String(error));

export const claimMachine = setup({
  types: {
    input: {} as { record: ClaimRecord },
    context: {} as ClaimContext,
    events: {} as ClaimEvent,
  },
  actors: {
    simulate: notProvided<SimulatedClaim, { record: ClaimRecord }>('simulate'),
    send: notProvided<SignedTx[], { record: ClaimRecord; gas: bigint; authorizerSignature: Hex }>('send'),
    confirm: notProvided<MinedTx, { record: ClaimRecord }>('confirm'),
    recordClaimed: notProvided<void, { record: ClaimRecord }>('recordClaimed'),
    sweep: notProvided<SignedTx[], { record: ClaimRecord }>('sweep'),
    confirmSweep: notProvided<MinedTx, { record: ClaimRecord }>('confirmSweep'),
  },
  guards: {
    sweepSigned: ({ context }) => context.record.sweepTxs.length > 0,
    claimMined: ({ context }) => context.record.claimTx !== undefined,
    claimSigned: ({ context }) => context.record.txs.length > 0,
    nothingLeft: ({ event }) => (event as unknown as DoneActorEvent<SimulatedClaim>).output.rows.length === 0,
    minedWell: ({ event }) => (event as unknown as DoneActorEvent<MinedTx>).output.success,
    grows: ({ context, event }) => event.type === 'trail' && extendsTrail(context.record.txs, event.txs),
    sweepGrows: ({ context, event }) => event.type === 'sweepTrail' && extendsTrail(context.record.sweepTxs, event.txs),
  },
  actions: {
    growTrail: assign({ record: ({ context, event }) => (event.type === 'trail' ? { ...context.record, txs: event.txs } : context.record) }),
    growSweepTrail: assign({ record: ({ context, event }) => (event.type === 'sweepTrail' ? { ...context.record, sweepTxs: event.txs } : context.record) }),
  },
}).createMachine({
  id: 'claim',
  context: ({ input }) => ({ record: input.record }),
  initial: 'routing',
  states: {
    /** A record read back resumes where its trails say: a signed sweep, a mined claim, a signed claim. */
    routing: {
      always: [{ guard: 'sweepSigned', target: 'sweepSent' }, { guard: 'claimMined', target: 'recording' }, { guard: 'claimSigned', target: 'sent' }, { target: 'simulating' }],
    },
    /** The whole claim simulated as the relayer that would send it; a row that would revert is dropped alone. */
    simulating: {
      invoke: {
        src: 'simulate',
        input: ({ context }) => ({ record: context.record }),
        onDone: [
          { guard: 'nothingLeft', target: 'empty', actions: assign({ record: ({ context, event }) => ({ ...context.record, rows: [], dropped: event.output.dropped }) }) },
          {
            target: 'sending',
            actions: assign(({ context, event }) => ({
              record: { ...context.record, rows: event.output.rows, dropped: event.output.dropped },
              gas: event.output.gas,
              authorizerSignature: event.output.authorizerSignature,
            })),
          },
        ],
        onError: { target: 'failed', actions: assign({ record: ({ context, event }) => ({ ...context.record, failure: failure(event.error) }) }) },
      },
    },
    /** Signs, has the trail written (`trail`), and only then sends. */
    sending: {
      invoke: {
        src: 'send',
        input: ({ context }) => ({ record: context.record, gas: context.gas as bigint, authorizerSignature: context.authorizerSignature as Hex }),
        onDone: { target: 'sent' },
        // Signing, the first durable write, or the node refused: nothing of this claim is in flight.
        onError: { target: 'failed', actions: assign({ record: ({ context, event }) => ({ ...context.record, failure: failure(event.error) }) }) },
      },
      ...signingTrail(),
    },
    /** Carried to its receipt; priced out by the base fee, it is replaced (same nonce, the trail grows first). */
    sent: {
      invoke: {
        src: 'confirm',
        input: ({ context }) => ({ record: context.record }),
        onDone: [
          { guard: 'minedWell', target: 'recording', actions: assign({ record: ({ context, event }) => ({ ...context.record, txs: event.output.txs, claimTx: event.output.hash }) }) },
          {
            target: 'reverted',
            actions: assign({ record: ({ context, event }) => ({ ...context.record, txs: event.output.txs, claimTx: event.output.hash, failure: 'the claim transaction reverted' }) }),
          },
        ],
        // Only when the claimer stops: the transaction may still mine, the next start resumes it from the record.
        onError: { target: 'stalled' },
      },
      ...minedTrail(),
    },
    /** The channel records learn their new claimed totals (compare-and-set, idempotent). */
    recording: {
      invoke: {
        src: 'recordClaimed',
        input: ({ context }) => ({ record: context.record }),
        onDone: { target: 'sweeping' },
        onError: { target: 'stalled', actions: assign({ record: ({ context, event }) => ({ ...context.record, failure: failure(event.error) }) }) },
      },
    },
    /** One sweep for every receiver and token the claim credited, written ahead like the claim. */
    sweeping: {
      invoke: {
        src: 'sweep',
        input: ({ context }) => ({ record: context.record }),
        onDone: { target: 'sweepSent' },
        // The claimed funds stay credited to the merchant in the contract: the next sweep of that receiver moves them.
        onError: { target: 'sweepFailed', actions: assign({ record: ({ context, event }) => ({ ...context.record, failure: failure(event.error) }) }) },
      },
      ...signingTrail(SWEEP_TRAIL),
    },
    sweepSent: {
      invoke: {
        src: 'confirmSweep',
        input: ({ context }) => ({ record: context.record }),
        onDone: [
          { guard: 'minedWell', target: 'swept', actions: assign({ record: ({ context, event }) => ({ ...context.record, sweepTxs: event.output.txs, sweepTx: event.output.hash }) }) },
          {
            target: 'sweepFailed',
            actions: assign({ record: ({ context, event }) => ({ ...context.record, sweepTxs: event.output.txs, sweepTx: event.output.hash, failure: 'the sweep reverted' }) }),
          },
        ],
        onError: { target: 'stalled' },
      },
      ...minedTrail(SWEEP_TRAIL),
    },
    swept: { type: 'final' },
    /** Every row would revert (or none was given): nothing was signed. */
    empty: { type: 'final' },
    /** Nothing of this claim was sent (simulation, signing or the node failed): its rows are claimed by a later one. */
    failed: { type: 'final' },
    /** The claim mined and reverted: nothing was claimed; a later claim simulates the rows again. */
    reverted: { type: 'final' },
    /** The claim stands; its sweep did not go (or reverted): the next sweep of those receivers moves the funds. */
    sweepFailed: { type: 'final' },
    /** Stopped with a transaction in flight, or a record write failed: the next start resumes it. */
    stalled: { type: 'final' },
  },
});

/** The receivers and tokens the rows credit, each once, in the rows' order: the sweep's `settle` calls. */
export function sweepTargets(rows: readonly ClaimRow[]): SweepTarget[] {
  const seen = new Map<string, SweepTarget>();
  for (const row of rows) {
    const key = `${row.config.receiver.toLowerCase()}|${row.config.token.toLowerCase()}`;
    if (!seen.has(key)) seen.set(key, { receiver: row.config.receiver, token: row.config.token });
  }
  return [...seen.values()];
}

/** Whether a record read back is finished (else the claimer resumes it): every final state but `stalled`. */
export function claimFinished(state: string): boolean {
  return state !== 'stalled' && (CLAIM_FINALS as readonly string[]).includes(state);
}
