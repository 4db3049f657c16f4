import { randomUUID } from 'node:crypto';
import type { SnapshotFrom } from 'xstate';
import type { Hex } from 'viem';
import { type DurableHost, topState } from '../actors/durable-host.ts';
import type { Shed } from '../ports/settlement.ts';
import type { SettleResponse, VerifyRequest } from '../protocol/x402/types.ts';
import { fingerprintOf, nonceKeyOf } from '../schemes/payment-identity.ts';
import type { DurableCollection } from '../store/durable-collection.ts';
import { isStoreUnavailable } from '../store/store-unavailable.ts';
import { GatewayReason } from '../verify/reasons.ts';
import type { EngineOptions } from './engine-options.ts';
import type { FairAdmission } from './fair-admission.ts';
import type { Reservation } from './payer-reservations.ts';
import type { paymentMachine } from './payment-machine.ts';
import { currentTxOf, isFinished, type PaymentRecord } from './payment-record.ts';
import { nonceUsedReason } from './payment-steps.ts';
import type { QueueTicket, SettlementAdmission } from './settlement-admission.ts';
import type { BatchActor, SettlementBatcher } from './settlement-batcher.ts';
import type { Verdict } from './verify-payment.ts';

/** Every payment this process is settling: one actor each, and the one writer of their records. */
export type PaymentHost = DurableHost<typeof paymentMachine, PaymentRecord>;
export type PaymentActor = ReturnType<PaymentHost['spawn']>;
type PaymentSnapshot = SnapshotFrom<typeof paymentMachine>;

/**
 * Asked before a payment the engine does not know is taken in: a refusal it returns is the answer, and nothing is
 * settled (the facilitator's pure checks and payer quota).
 */
export type AdmitHook = (request: VerifyRequest) => Promise<SettleResponse | undefined>;

/** States of a payment between its admission and its transaction's send: the queue backpressure bounds. */
const QUEUED_STATES = new Set(['verifying', 'claiming', 'simulating', 'broadcasting']);

export interface PaymentIntakeDeps {
  options: EngineOptions;
  records: DurableCollection<PaymentRecord>;
  host: PaymentHost;
  batcher: SettlementBatcher;
  admission: SettlementAdmission;
  fair: FairAdmission;
  /** Verdicts reached at admission, by attempt (the verification step takes them). */
  checked: Map<string, Verdict>;
  clock: () => number;
}

/**
 * How a payment comes in: answered from what the engine knows of it (in flight, just ended, or recorded), else
 * admitted (the queue's bounds, the payer's balance, the client's share), spawned as an actor, kept in its network's
 * queue until its transaction is sent, and answered when it ends or once its deadline passed with the hash it sent.
 */
export class PaymentIntake {
  readonly #o: EngineOptions;
  readonly #records: DurableCollection<PaymentRecord>;
  readonly #host: PaymentHost;
  readonly #batcher: SettlementBatcher;
  readonly #admission: SettlementAdmission;
  readonly #fair: FairAdmission;
  readonly #checked: Map<string, Verdict>;
  readonly #clock: () => number;
  /** Balance reservations of payments in flight (by attempt), released when each ends. */
  readonly #reserved = new Map<string, Reservation>();
  /** Settles under way in this process before their actor exists, by nonce key: one payment asked again waits for it. */
  readonly #asked = new Map<string, { fingerprint: string; answer: Promise<SettleResponse> }>();

  constructor(deps: PaymentIntakeDeps) {
    this.#o = deps.options;
    this.#records = deps.records;
    this.#host = deps.host;
    this.#batcher = deps.batcher;
    this.#admission = deps.admission;
    this.#fair = deps.fair;
    this.#checked = deps.checked;
    this.#clock = deps.clock;
  }

  /**
   * Whether `request` must be turned away now because its network's settlement is behind (see
   * `settlement-admission.ts`): asked before anything is verified or settled, so a turned-away payment costs nothing
   * and charges nothing. A payment this engine already knows is never turned away: its answer costs no settlement.
   */
  async shedding(request: VerifyRequest, client?: string): Promise<Shed | undefined> {
    const network = request.paymentRequirements.network;
    if (!this.#o.networks.has(network)) return undefined;
    const shed = this.#admission.shed(network, this.#clock(), this.#o.relayers(network).load(), client);
    if (shed === undefined) return undefined;
    const id = nonceKeyOf(request);
    if (this.#host.get(id) !== undefined || this.#host.snapshot(id) !== undefined) return undefined;
    const recorded = await this.#records.get(id);
    if (recorded !== undefined && (recorded.state === 'settled' || !isFinished(recorded))) return undefined;
    return shed;
  }

  /**
   * Settles `request`, or answers what this engine already knows of it. `admit`, when given, is asked only about a
   * payment the engine does not know yet (a retry of a known one always gets its recorded or pending answer): a
   * refusal it returns is the answer, and nothing is settled.
   *
   * A new payment is then admitted fairly (`fair-admission.ts`): refused (nothing charged) when its payer's balance
   * does not cover it beside the payer's payments in flight, or when `client` (the request's address) is at its share
   * of the queue while the queue is nearly full (`SETTLEMENT_SHED`, to be answered 503 with Retry-After).
   */
  settle(request: VerifyRequest, admit: AdmitHook | undefined, client: string | undefined): Promise<SettleResponse> {
    // The same payment asked again while it is being admitted gets the same answer: without this, copies arriving
    // before its actor started each went through the admission (the payer's rate, the queue's share) and could be
    // refused where the first was settled (50 concurrent settles of one payment: a few answered without the
    // transaction the others named).
    const id = nonceKeyOf(request);
    const fingerprint = fingerprintOf(request);
    const asked = this.#asked.get(id);
    if (asked?.fingerprint === fingerprint) return asked.answer;
    const answer = this.#settleOnce(request, admit, client);
    if (asked === undefined) {
      this.#asked.set(id, { fingerprint, answer });
      const done = () => {
        if (this.#asked.get(id)?.answer === answer) this.#asked.delete(id);
      };
      answer.then(done, done);
    }
    return answer;
  }

  async #settleOnce(request: VerifyRequest, admit: AdmitHook | undefined, client: string | undefined): Promise<SettleResponse> {
    try {
      return await this.#settle(request, admit, client);
    } catch (error) {
      // Before its actor started (after, the answer never throws): the store did not answer a read or the admission.
      if (!isStoreUnavailable(error)) throw error;
      return (
        this.#known(request) ?? {
          ...failure(
            request.paymentRequirements.network,
            undefined,
            GatewayReason.settlementUnknown,
            'the data store cannot be read now: whether this payment settled before cannot be told; ask again with it',
          ),
          extra: { retryAfterSeconds: 2 },
        }
      );
    }
  }

  async #settle(request: VerifyRequest, admit: AdmitHook | undefined, client: string | undefined): Promise<SettleResponse> {
    const known = this.#known(request) ?? (await this.#settledBefore(request));
    if (known) return known;
    if (admit) {
      const refused = await admit(request);
      if (refused) return refused;
    }
    const network = request.paymentRequirements.network;
    // A payer whose balance is known (this block) not to cover the payment is refused before it takes a place.
    // Every refusal below first asks whether the same payment started meanwhile: a duplicate is answered by it.
    const early = await this.#fair.early(request);
    if (early !== undefined) return this.#known(request) ?? early;
    // A payer not read yet is admitted one payment at a time, waiting outside the queue; then read as above.
    const firstTurn = await this.#fair.firstTurn(request);
    let ticket: QueueTicket;
    let fair: Awaited<ReturnType<FairAdmission['admit']>>;
    try {
      if (firstTurn !== undefined) {
        const started = this.#known(request);
        if (started) return started;
        const late = await this.#fair.early(request);
        if (late !== undefined) return this.#known(request) ?? late;
      }
      // The queue's bounds decide here, where the place is taken (no await between the check and the entry): the
      // door's check (`shedding`) ran before this payment's balance was read, and so did everyone else's at once.
      const shed = this.#admission.shed(network, this.#clock(), this.#o.relayers(network).load(), client);
      if (shed !== undefined) return this.#known(request) ?? this.#fair.shed(network, shed);
      ticket = this.#admission.enter(network, this.#clock(), client);
      try {
        fair = await this.#fair.admit(request);
      } catch (err) {
        ticket.sent();
        throw err;
      }
    } finally {
      firstTurn?.();
    }
    // Another settle of the same payment may have started meanwhile (no await from here to the spawn): its answer is
    // this one's, whether or not this one was refused (its reservation may be what refused this one).
    const meanwhile = this.#known(request);
    if (meanwhile) {
      ticket.sent();
      fair.reservation?.release();
      return meanwhile;
    }
    if (fair.refused !== undefined) {
      ticket.sent();
      return fair.refused;
    }
    const now = this.#clock();
    const record: PaymentRecord = {
      id: nonceKeyOf(request),
      attempt: randomUUID(),
      ...(this.#o.node !== undefined ? { node: this.#o.node } : {}),
      network: request.paymentRequirements.network,
      payer: '',
      fingerprint: fingerprintOf(request),
      request,
      state: 'verifying',
      txs: [],
      createdAt: now,
      updatedAt: now,
    };
    if (fair.verdict !== undefined) this.#checked.set(record.attempt, fair.verdict);
    if (fair.reservation !== undefined) this.#reserved.set(record.attempt, fair.reservation);
    const actor = this.spawn(record);
    this.#queue(actor, ticket);
    return this.#answer(actor);
  }

  /** Starts a payment's actor (a resumed batch member with the batch actor carrying its transaction). */
  spawn(record: PaymentRecord, batch?: BatchActor): PaymentActor {
    return this.#host.spawn(record.id, { record, confirmDeadlineMs: this.#o.confirmDeadlineMs, ...(batch ? { batch } : {}) });
  }

  /** A payment ended in `state`: its balance reservation goes back. */
  ended(record: PaymentRecord, state: string): void {
    const reservation = this.#reserved.get(record.attempt);
    if (reservation !== undefined) {
      this.#reserved.delete(record.attempt);
      this.#fair.release(record.network, reservation, state);
    }
  }

  /** Keeps a new payment in its network's queue (its `ticket`) until its transaction is sent, or it ends without one. */
  #queue(actor: PaymentActor, ticket: QueueTicket): void {
    const leave = () => {
      ticket.sent();
      subscription.unsubscribe();
    };
    const subscription = actor.subscribe({
      next: (snapshot) => {
        if (snapshot.status !== 'active' || !QUEUED_STATES.has(topState(snapshot.value))) leave();
      },
      error: leave,
      complete: leave,
    });
    if (actor.getSnapshot().status !== 'active') leave();
  }

  /** The answer for a payment in flight in this process, or just ended in it; undefined when it is new here. */
  #known(request: VerifyRequest): Promise<SettleResponse> | SettleResponse | undefined {
    const id = nonceKeyOf(request);
    const fingerprint = fingerprintOf(request);
    const network = request.paymentRequirements.network;
    const active = this.#host.get(id);
    if (active) {
      if (active.getSnapshot().context.record.fingerprint !== fingerprint) return failure(network, undefined, GatewayReason.nonceInFlight, 'another payment with this nonce is being settled');
      return this.#answer(active);
    }
    // Ended, its last write not on disk yet: the store may still show it in flight; its actor has the answer.
    const ended = this.#host.snapshot(id);
    if (ended) {
      const answer = outcomeOf(ended);
      if (answer && ended.context.record.fingerprint === fingerprint) return answer;
    }
    return undefined;
  }

  /** The recorded answer for a payment settled under this nonce, by this process or another sharing the store (in a cluster, the pending one of a payment another node is settling). */
  async #settledBefore(request: VerifyRequest): Promise<SettleResponse | undefined> {
    const existing = await this.#records.get(nonceKeyOf(request));
    if (existing?.state === 'settled' && existing.result) {
      if (existing.fingerprint === fingerprintOf(request)) return existing.result;
      return failure(request.paymentRequirements.network, existing.payer, nonceUsedReason(request), 'this nonce has settled another payment');
    }
    // In a cluster, another node is settling it: the transaction that node sent is the answer until it is final.
    const tx = existing && this.#o.node !== undefined && !isFinished(existing) && existing.fingerprint === fingerprintOf(request) ? currentTxOf(existing) : undefined;
    if (existing && tx) return pendingOf(existing, tx);
    return undefined;
  }

  /** Answers when the payment ends, or once the deadline passed with the hash of its sent transaction. */
  #answer(actor: PaymentActor): Promise<SettleResponse> {
    return this.#host.answer(actor, this.#o.confirmDeadlineMs, (snapshot, deadlinePassed) => {
      const outcome = outcomeOf(snapshot);
      if (outcome || !deadlinePassed) return outcome;
      // Pending names a transaction the node has: one still being sent (its trail written ahead of the send) is
      // waited for, so a buyer who looks the hash up finds it.
      if (!snapshot.matches('inFlight')) return undefined;
      const { record, batch } = snapshot.context;
      // A batch member's transaction is its batch's current one (replaced, perhaps, since the member was seated).
      const tx = (batch && record.batch ? this.#batcher.currentTx(batch)?.hash : undefined) ?? currentTxOf(record);
      return tx ? pendingOf(record, tx) : undefined;
    });
  }
}

function failure(network: string, payer: string | undefined, reason: string, message: string): SettleResponse {
  return { success: false, errorReason: reason, errorMessage: message, transaction: '', network: network as `eip155:${string}`, ...(payer ? { payer } : {}) };
}

function pendingOf(record: PaymentRecord, tx: Hex): SettleResponse {
  return {
    success: false,
    errorReason: 'settlement_pending',
    transaction: tx,
    network: record.network as `eip155:${string}`,
    payer: record.payer,
    status: 'pending',
  };
}

/** The answer a finished actor gives, or undefined while it runs. */
function outcomeOf(snapshot: PaymentSnapshot): SettleResponse | undefined {
  if (snapshot.status !== 'done') return undefined;
  const record = snapshot.context.record;
  const state = topState(snapshot.value);
  if (state === 'settled' && record.result) return record.result;
  if (state === 'duplicate' && snapshot.context.recorded) return snapshot.context.recorded;
  const tx = currentTxOf(record);
  if (state === 'stalled' && tx) return pendingOf(record, tx);
  return failure(record.network, record.payer || undefined, record.failure?.reason ?? 'unexpected_settle_error', record.failure?.message ?? '');
}
