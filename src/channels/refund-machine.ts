/**
 * The lifecycle of one cooperative refund of a payment channel (x402 `batch-settlement`): the payer's zero-charge
 * voucher claims what the gateway has charged, the merchant is swept, and the rest of the escrow goes back to the
 * payer, all in ONE transaction (`multicall(claimWithSignature, settle, refundWithSignature)`: claim before settle
 * before refund, atomic, one relayer nonce). Each step's I/O is provided by the refund desk (`machine.provide`), so
 * this definition is pure and is what `npm run statecharts` exports.
 *
 * preparing -> sending(signing -> signed) -> sent(waiting -> replaced) -> recording -> refunded
 *
 * `preparing` holds the channel for this refund (no voucher is accepted meanwhile), reads the chain, signs the
 * `ClaimBatch` and the `Refund` for the channel's current refund nonce, and simulates the whole call as the relayer
 * that will send it: a refund the chain would refuse, or one that moves nothing, ends `refused` with nothing signed
 * for the chain and no gas spent. The signed transaction is written (its trail) BEFORE it is sent, so a crash after
 * the broadcast resumes the same transaction from its record: the refund nonce makes a second one impossible anyway.
 */
import { minedTrail, signingTrail } from '../tx/trail-states.ts';
import { assign, fromPromise, setup, type DoneActorEvent } from 'xstate';
import type { Hex } from 'viem';
import type { ChannelConfig } from '../schemes/batch-settlement/channel-config.ts';
import type { ChannelStateExtra } from '../schemes/batch-settlement/requirements.ts';
import { extendsTrail, type SignedTx } from '../tx/trail.ts';
import type { MinedTx } from './claim-machine.ts';

/** The durable record of one refund, written before its transaction is sent and whenever its state moves. */
export interface RefundRecord {
  id: string;
  /** CAIP-2 network. */
  network: string;
  channelId: Hex;
  config: ChannelConfig;
  /** The payer's zero-charge voucher: its ceiling is what the gateway has charged; it is the claim row. */
  voucher: { maxClaimableAmount: string; signature: Hex };
  /** What the payer asked back (decimal); absent: everything unclaimed. */
  requested?: string;
  /** The boot (gateway run) driving it: a start resumes only refunds of boots no longer live. */
  boot?: string;
  /** The machine's top-level state as last written. */
  state: string;
  /** What the signed refund returns (decimal), and the refund nonce it is signed for: set once prepared. */
  amount?: string;
  nonce?: string;
  /** Every signed version of the transaction; the last is current. */
  txs: SignedTx[];
  /** The mined transaction. */
  tx?: Hex;
  /** What the chain moved back to the payer (the contract caps it at the unclaimed escrow), decimal. */
  refunded?: string;
  /** The channel as read after the refund. */
  channelState?: ChannelStateExtra;
  /** Why it was refused (the spec's reason) or failed. */
  reason?: string;
  failure?: string;
  createdAt: number;
  updatedAt: number;
}

/** What `preparing` signed and measured. */
export interface PreparedRefund {
  amount: bigint;
  nonce: bigint;
  gas: bigint;
  data: Hex;
}

/** What `recording` read back. */
export interface RecordedRefund {
  refunded: bigint;
  channelState: ChannelStateExtra;
}

/** A refusal with the spec's reason (`invalid_batch_settlement_evm_*`): the refund ends `refused`, nothing sent. */
export class RefundRefusal extends Error {
  readonly reason: string;
  constructor(reason: string, message: string) {
    super(message);
    this.reason = reason;
  }
}

export interface RefundContext {
  record: RefundRecord;
  gas?: bigint;
  data?: Hex;
}

export type RefundEvent = { type: 'trail'; txs: SignedTx[] };

/** The states a refund's record ends in. */
export const REFUND_FINALS = ['refunded', 'refused', 'failed', 'reverted', 'stalled'] as const;
export type RefundFinal = (typeof REFUND_FINALS)[number];

const notProvided = <O, I>(step: string) =>
  fromPromise<O, I>(async () => {
    throw new Error(`refund step '${step}' has no implementation`);
  });

const failure = (error: unknown) => (error instanceof Error ? error.message : String(error));
const reasonOf = (error: unknown) => (error instanceof RefundRefusal ? error.reason : undefined);

export const refundMachine = setup({
  types: {
    input: {} as { record: RefundRecord },
    context: {} as RefundContext,
    events: {} as RefundEvent,
  },
  actors: {
    prepare: notProvided<PreparedRefund, { record: RefundRecord }>('prepare'),
    send: notProvided<SignedTx[], { record: RefundRecord; gas: bigint; data: Hex }>('send'),
    confirm: notProvided<MinedTx, { record: RefundRecord }>('confirm'),
    recordRefund: notProvided<RecordedRefund, { record: RefundRecord }>('recordRefund'),
  },
  guards: {
    mined: ({ context }) => context.record.tx !== undefined,
    refusal: ({ event }) => (event as { error?: unknown }).error instanceof RefundRefusal,
    signed: ({ context }) => context.record.txs.length > 0,
    minedWell: ({ event }) => (event as unknown as DoneActorEvent<MinedTx>).output.success,
    grows: ({ context, event }) => event.type === 'trail' && extendsTrail(context.record.txs, event.txs),
  },
  actions: {
    growTrail: assign({ record: ({ context, event }) => ({ ...context.record, txs: event.txs }) }),
  },
}).createMachine({
  id: 'refund',
  context: ({ input }) => ({ record: input.record }),
  initial: 'routing',
  states: {
    /** A record read back resumes where its trail says: a mined transaction, a signed one, or nothing yet. */
    routing: {
      always: [{ guard: 'mined', target: 'recording' }, { guard: 'signed', target: 'sent' }, { target: 'preparing' }],
    },
    /** The channel held, the chain read, claim and refund signed, the whole call simulated: nothing is sent (refused with the spec's reason; failed when the store or node could not be asked). */
    preparing: {
      invoke: {
        src: 'prepare',
        input: ({ context }) => ({ record: context.record }),
        onDone: {
          target: 'sending',
          actions: assign(({ context, event }) => ({
            record: { ...context.record, amount: event.output.amount.toString(), nonce: event.output.nonce.toString() },
            gas: event.output.gas,
            data: event.output.data,
          })),
        },
        onError: [
          {
            guard: 'refusal',
            target: 'refused',
            actions: assign({ record: ({ context, event }) => ({ ...context.record, reason: reasonOf(event.error), failure: failure(event.error) }) }),
          },
          // The store or the node could not be asked: ours, not the payer's; nothing was sent.
          { target: 'failed', actions: assign({ record: ({ context, event }) => ({ ...context.record, failure: failure(event.error) }) }) },
        ],
      },
    },
    /** Signs, has the trail written (`trail`), and only then sends. */
    sending: {
      invoke: {
        src: 'send',
        input: ({ context }) => ({ record: context.record, gas: context.gas as bigint, data: context.data as Hex }),
        onDone: { target: 'sent' },
        // Signing, the first durable write, or the node refused: nothing of this refund is in flight.
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
          { guard: 'minedWell', target: 'recording', actions: assign({ record: ({ context, event }) => ({ ...context.record, txs: event.output.txs, tx: event.output.hash }) }) },
          {
            target: 'reverted',
            actions: assign({ record: ({ context, event }) => ({ ...context.record, txs: event.output.txs, tx: event.output.hash, failure: 'the refund transaction reverted' }) }),
          },
        ],
        // Only when the desk stops: the transaction may still mine, the next start resumes it from the record.
        onError: { target: 'stalled' },
      },
      ...minedTrail(),
    },
    /** The channel record learns the chain's view (claimed, refunded, next nonce) and is released (idempotent). */
    recording: {
      invoke: {
        src: 'recordRefund',
        input: ({ context }) => ({ record: context.record }),
        onDone: {
          target: 'refunded',
          actions: assign({ record: ({ context, event }) => ({ ...context.record, refunded: event.output.refunded.toString(), channelState: event.output.channelState }) }),
        },
        onError: { target: 'stalled', actions: assign({ record: ({ context, event }) => ({ ...context.record, failure: failure(event.error) }) }) },
      },
    },
    refunded: { type: 'final' },
    /** Refused before anything was signed for the chain (the spec's reason in `reason`): no gas spent. */
    refused: { type: 'final' },
    /** Nothing of this refund was sent (the store, signing or the node failed). */
    failed: { type: 'final' },
    /** The transaction mined and reverted: nothing was claimed or refunded. */
    reverted: { type: 'final' },
    /** Stopped with a transaction in flight, or a record write failed: the next start resumes it. */
    stalled: { type: 'final' },
  },
});

/** Whether a record read back is finished (else the desk resumes it): every final state but `stalled`. */
export function refundFinished(state: string): boolean {
  return state !== 'stalled' && (REFUND_FINALS as readonly string[]).includes(state);
}
