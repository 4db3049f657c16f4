import { randomUUID } from 'node:crypto';
import { fromPromise, type SnapshotFrom } from 'xstate';
import { DurableHost, topState } from '../actors/durable-host.ts';
import type { Address, Hex, TransactionReceipt } from 'viem';
import type { BlockWatcher } from '../tx/block-watcher.ts';
import { PERMIT2_ADDRESS } from '../chain/canonical.ts';
import type { SettleResponse, SupportedResponse, VerifyRequest, VerifyResponse } from '../protocol/x402/types.ts';
import type { Logger } from '../log/logger.ts';
import type { Metrics } from '../metrics/metrics.ts';
import type { Store } from '../store/open-store.ts';
import type { DurableCollection } from '../store/durable-collection.ts';
import { Eip3009Reason, GatewayReason } from '../verify/reasons.ts';
import { schemeOfPayload } from '../schemes/registry.ts';
import { authorizationOf, consumptionOf, type Consumption } from './authorization-consumption.ts';
import { ChainInspector } from './chain-inspector.ts';
import { paymentMachine, type ClaimResult, type StepResult } from './payment-machine.ts';
import { currentTxOf, isFinished, leavesNoRecord, type BatchRecord, type PaymentRecord } from './payment-record.ts';
import { fingerprintOf, nonceKeyOf } from '../schemes/payment-identity.ts';
import type { RelayerPool } from '../tx/relayer-pool.ts';
import type { SignedTx } from '../tx/trail.ts';
import { SettlementAdmission, type AdmissionLimits, type QueueTicket } from './settlement-admission.ts';
import type { Shed } from '../ports/settlement.ts';
import { FairAdmission } from './fair-admission.ts';
import type { Reservation } from './payer-reservations.ts';
import { SettlementBatcher, type BatchActor, type MinedBatch } from './settlement-batcher.ts';
import { RevertBudget, type RevertBudgetLimits, type RevertEvent } from './revert-budget.ts';
import type { SettlementCall } from '../schemes/scheme.ts';
import { awaitMined, resend, sendDurably, sleep, type Courier } from '../tx/courier.ts';
import type { PaymentPolicy } from '../verify/payment-policy.ts';
import { supportedExtensionKeys } from '../protocol/x402/extensions/index.ts';
import { checkPayment, precheckPayment, revertReason, settlementCallOf, simulatePayment, type Precheck, type Verdict, type VerifyDeps } from './verify-payment.ts';

export interface EngineOptions extends VerifyDeps {
  store: Store;
  relayers(caip2: string): RelayerPool;
  /** The chain's one block watcher, which every payment in flight on it awaits its receipt from. */
  watcher(caip2: string): BlockWatcher;
  /** How long /settle waits for a receipt before it answers pending with the broadcast hash. */
  confirmDeadlineMs: number;
  /** How often the chain head is read while transactions are in flight. */
  pollMs: number;
  /** Whether /verify simulates the transfer on chain (settle always does). */
  simulateOnVerify: boolean;
  /**
   * Settlement batching: the most payments per transaction, how long the first waits for others (1 or 0: off), and
   * whether a batch leaves early when no payment is on its way to it.
   */
  batch: { maxSize: number; windowMs: number; eager: boolean };
  /**
   * How many blocks below the head are searched for the transaction that consumed an authorization, after a
   * settlement failed or its outcome is unknown (see `authorization-consumption.ts`).
   */
  consumedLookbackBlocks?: bigint;
  /** Backpressure: when a network's settlement falls behind, new payments are turned away before anything is done. */
  admission?: AdmissionLimits;
  /** Bans and hourly gas budgets for settlements that revert on chain after passing simulation (see `revert-budget.ts`). */
  revertBudget?: RevertBudgetLimits;
  /**
   * Whether a payer may have in flight only what its token balance covers (read once per block, reserved per
   * payment; see `fair-admission.ts`). Default: on.
   */
  reserveBalances?: boolean;
  log: Logger;
  metrics: EngineMetrics;
  clockMs?: () => number;
  /** This node's name in a cluster: its payments carry it, and it resumes on start only its own (alone: every one). */
  node?: string;
}

export type EngineMetrics = Pick<Metrics, 'verification' | 'watchActor' | 'settlement' | 'revertedSettlement' | 'revertRefusal'> & Partial<Pick<Metrics, 'paymentShed'>>;

type PaymentSnapshot = SnapshotFrom<typeof paymentMachine>;
type PaymentActor = ReturnType<DurableHost<typeof paymentMachine, PaymentRecord>['spawn']>;

/** States after the claim: the record exists and each of them is written as it is entered. */
const DURABLE_STATES = new Set(['simulating', 'broadcasting', 'inFlight', 'reconciling', 'releasing', 'settled', 'failed', 'stalled']);

/** States of a payment between its admission and its transaction's send: the queue backpressure bounds. */
const QUEUED_STATES = new Set(['verifying', 'claiming', 'simulating', 'broadcasting']);

/** Unless configured: 128 payments queued per network, the oldest for at most 500 ms, 64 unmined transactions per relayer. */
export const DEFAULT_ADMISSION: AdmissionLimits = { maxQueued: 128, maxWaitMs: 500, maxTxsPerRelayer: 64 };

/** How many blocks below the head are searched for a consuming transaction, unless configured. */
export const DEFAULT_CONSUMED_LOOKBACK_BLOCKS = 2000n;
/** How often the consumption read is tried before the failure stands (the buyer's retry reads again). */
const CONSUMPTION_READ_ATTEMPTS = 3;

function stateName(snapshot: PaymentSnapshot): string {
  return topState(snapshot.value);
}

/**
 * Settles x402 payments: one XState actor per payment, its record durable in LMDB at every step, nonces claimed
 * before simulation, transactions signed and stored before they are sent, and every unfinished payment resumed
 * on start — a broadcast one by its hash, never sent anew.
 */
export class SettlementEngine {
  readonly #o: EngineOptions;
  readonly #records: DurableCollection<PaymentRecord>;
  readonly #batches: DurableCollection<BatchRecord>;
  /** Every payment this process is settling: one actor each, and the one writer of their records. */
  readonly #host: DurableHost<typeof paymentMachine, PaymentRecord>;
  readonly #batcher: SettlementBatcher;
  readonly #clock: () => number;
  readonly #abort = new AbortController();
  readonly #admission: SettlementAdmission;
  readonly #budget: RevertBudget;
  /** Per payer: what its balance covers; and per client: its share of the queue (see `fair-admission.ts`). */
  readonly #fair: FairAdmission;
  /** Verdicts reached before a payment's actor started (by its attempt): its verification step takes them. */
  readonly #checked = new Map<string, Verdict>();
  /** Balance reservations of payments in flight (by attempt), released when each ends. */
  readonly #reserved = new Map<string, Reservation>();
  /** Dead nodes' payments this node is finishing, by node, and what to call once they are all final. */
  readonly #adopted = new Map<string, { open: Set<string>; finished: () => void }>();

  constructor(opts: EngineOptions) {
    this.#o = opts;
    this.#admission = new SettlementAdmission(opts.admission ?? DEFAULT_ADMISSION);
    this.#records = opts.store.collection<PaymentRecord>('payments');
    this.#batches = opts.store.collection<BatchRecord>('payment-batches');
    this.#clock = opts.clockMs ?? Date.now;
    this.#budget = new RevertBudget({
      store: opts.store,
      ...(opts.revertBudget ? { limits: opts.revertBudget } : {}),
      clock: this.#clock,
      observer: { reverted: (network, gas) => opts.metrics.revertedSettlement(network, gas), refused: (kind) => opts.metrics.revertRefusal(kind) },
    });
    this.#fair = new FairAdmission(opts, this.#clock);
    this.#batcher = new SettlementBatcher({
      ...opts,
      maxSize: opts.batch.maxSize,
      windowMs: opts.batch.windowMs,
      eager: opts.batch.eager,
      persist: async (batch, members) => {
        await opts.store.atomically(() => {
          this.#batches.putWithin(batch.id, batch);
          for (const r of members) this.#records.putWithin(r.id, { ...r, updatedAt: this.#clock() });
        });
      },
      revertReason: (record, call) => this.#revertReason(record, call, schemeOfPayload(record.request.paymentPayload.payload).reasons.simulationFailed),
      signal: this.#abort.signal,
    });
    this.#host = new DurableHost({
      machine: this.#machine,
      log: opts.log,
      // Every state after the claim, as it is entered, and every grown trail before its transaction is sent.
      durable: (snapshot, state) => {
        if (!DURABLE_STATES.has(state)) return undefined;
        const record = snapshot.context.record;
        // Entering the send with nothing signed yet, the record is the simulated one: the first signed version is
        // the next write, and the send waits for it. (A batch member's record was written with its batch.)
        if (state === 'broadcasting' && record.txs.length === 0) return undefined;
        return { key: `${state}|${record.txs.length}`, value: { ...record, state } };
      },
      write: (record) => this.#write(record),
      started: (actor) => {
        this.#o.metrics.watchActor('payment', actor);
        const log = this.#o.log.child({ payment: actor.getSnapshot().context.record.id });
        let last = '';
        actor.subscribe((snapshot) => {
          const state = stateName(snapshot);
          if (state !== last) log.debug('payment state', { state });
          last = state;
        });
      },
      done: (id, snapshot, state) => {
        const record = snapshot.context.record;
        const turn = record.contract?.turn;
        if (turn)
          void this.#budget
            .release(record.contract?.codeHash as string, turn)
            .catch((error: unknown) => this.#o.log.warn("could not give a contract code's turn back; it lapses", { payment: id, error }));
        this.#checked.delete(record.attempt);
        const reservation = this.#reserved.get(record.attempt);
        if (reservation !== undefined) {
          this.#reserved.delete(record.attempt);
          this.#fair.release(record.network, reservation, state);
        }
        const adopted = record.node === undefined ? undefined : this.#adopted.get(record.node);
        if (adopted?.open.delete(id) && adopted.open.size === 0) {
          this.#adopted.delete(record.node as string);
          // Its last write is under way: the node's lease is given back once it is on disk.
          void this.#host.written(id).then(adopted.finished);
        }
        this.#o.metrics.settlement(this.#o.networks.has(record.network) ? record.network : 'other', state, (this.#clock() - record.createdAt) / 1000);
      },
    });
  }

  supported(): SupportedResponse {
    const networks = this.#o.networks.all();
    const signers = [...new Set(networks.flatMap((n) => this.#o.relayers(n.caip2).addresses))];
    return {
      kinds: networks.map((n) => ({ x402Version: 2 as const, scheme: 'exact' as const, network: n.caip2 as `eip155:${string}` })),
      extensions: supportedExtensionKeys(),
      signers: { 'eip155:*': signers },
    };
  }

  /** Payments this process is settling now. */
  get inFlight(): number {
    return this.#host.size;
  }

  /** Payments of `network` admitted and not yet sent. */
  queued(network: string): number {
    return this.#admission.queued(network);
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
   * Resumes every unfinished payment of the store (in a cluster, this node's): transactions already signed go out
   * again as they were (a batch transaction once for all its members), and each batch is carried to its receipt once
   * for all of them.
   */
  async start(): Promise<void> {
    const own = this.#o.node;
    const resumed = await this.#resume(
      (r) => own === undefined || (r.node ?? own) === own,
      async () => {
        await Promise.all(this.#o.networks.all().map((n) => this.#o.relayers(n.caip2).init()));
      },
    );
    this.#o.log.info('payments resumed', { count: resumed.length });
  }

  /**
   * Takes over the unfinished payments of `node`, a cluster node whose lease this node took (it died): resumed as its
   * own restart would resume them, signed transactions re-sent as they were. `finished` is called once every one of
   * them is final (at once when there are none).
   */
  async adopt(node: string, finished: () => void): Promise<number> {
    const resumed = await this.#resume(
      (r) => r.node === node,
      async () => {},
    );
    this.#o.log.warn("resumed a dead node's payments", { node, count: resumed.length });
    const open = new Set(resumed.filter((id) => this.#host.get(id)));
    if (open.size === 0) finished();
    else this.#adopted.set(node, { open, finished });
    return resumed.length;
  }

  /** Resumes the unfinished payments `mine` selects; `ready` runs once their transactions went out again, before they start. */
  async #resume(mine: (r: PaymentRecord) => boolean, ready: () => Promise<void>): Promise<string[]> {
    const unfinished: PaymentRecord[] = [];
    for await (const [, r] of this.#records.entries()) if (!isFinished(r) && mine(r) && !this.#host.get(r.id)) unfinished.push(r);
    const batches: BatchRecord[] = [];
    for (const id of new Set(unfinished.flatMap((r) => (r.batch ? [r.batch.id] : [])))) {
      const batch = await this.#batches.get(id);
      // Written in one transaction with its members: a member without its batch record is a broken store.
      if (!batch) this.#o.log.error('a payment names a batch that has no record', { batch: id });
      else batches.push(batch);
    }
    const trails = [...unfinished.filter((r) => !r.batch && r.txs.length), ...batches];
    for (const t of trails) await resend({ pool: this.#o.relayers(t.network) }, t.txs);
    await ready();
    for (const t of trails) this.#o.relayers(t.network).adopt(t.txs.at(-1) as SignedTx);
    const carried = new Map(
      batches.map((batch) => [
        batch.id,
        this.#batcher.resume(
          batch,
          unfinished.filter((r) => r.batch?.id === batch.id),
        ),
      ]),
    );
    for (const r of unfinished) {
      this.#o.log.info('resuming payment', { payment: r.id, state: r.state, tx: currentTxOf(r), batch: r.batch?.id, node: r.node });
      this.#spawn(r, r.batch ? carried.get(r.batch.id) : undefined);
    }
    return unfinished.map((r) => r.id);
  }

  async stop(): Promise<void> {
    this.#batcher.stop();
    this.#abort.abort();
    this.#host.stop();
  }

  async verify(request: VerifyRequest): Promise<VerifyResponse> {
    const checked = await this.#judged(await checkPayment(this.#o, request));
    const verdict = this.#counted(this.#o.simulateOnVerify ? await simulatePayment(this.#o, request, checked) : checked);
    if (verdict.ok) return { isValid: true, payer: verdict.payer };
    return { isValid: false, invalidReason: verdict.reason, invalidMessage: verdict.message, ...(verdict.payer ? { payer: verdict.payer } : {}) };
  }

  /**
   * A contract payer's verdict, judged by the revert budget (see `revert-budget.ts`): refused while it or its code is
   * banned, or while the gas of reverted settlements is spent. An EOA's verdict passes untouched, at no cost.
   */
  async #judged(verdict: Verdict): Promise<Verdict> {
    if (!verdict.ok || verdict.signer !== 'contract' || !verdict.codeHash) return verdict;
    const judged = await this.#budget.judge(verdict.payer, verdict.codeHash);
    return judged.ok ? verdict : { ok: false, reason: judged.reason, message: judged.message, payer: verdict.payer };
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
  async settle(request: VerifyRequest, admit?: (request: VerifyRequest) => Promise<SettleResponse | undefined>, client?: string): Promise<SettleResponse> {
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
    const actor = this.#spawn(record);
    this.#queue(actor, ticket);
    return this.#answer(actor);
  }

  /** Keeps a new payment in its network's queue (its `ticket`) until its transaction is sent, or it ends without one. */
  #queue(actor: PaymentActor, ticket: QueueTicket): void {
    const leave = () => {
      ticket.sent();
      subscription.unsubscribe();
    };
    const subscription = actor.subscribe({
      next: (snapshot) => {
        if (snapshot.status !== 'active' || !QUEUED_STATES.has(stateName(snapshot))) leave();
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

  /**
   * Whether `request`'s authorization was consumed on chain, by whoever sent it (one read, no retry; a failed read
   * throws); undefined when its network or asset is not configured here. What a caller that settled elsewhere reads
   * to learn, without sending anything, whether a settlement of unknown outcome happened.
   */
  async consumption(request: VerifyRequest): Promise<Consumption | undefined> {
    const call = settlementCallOf(this.#o, request);
    const network = this.#o.networks.find(request.paymentRequirements.network);
    if (!call || !network) return undefined;
    const auth = authorizationOf(request, call, { permit2: network.permit2 ?? PERMIT2_ADDRESS, ...(network.multicall ? { multicall: network.multicall } : {}) });
    return consumptionOf(this.#o.inspector(network.caip2).client, auth, { lookbackBlocks: this.#o.consumedLookbackBlocks ?? DEFAULT_CONSUMED_LOOKBACK_BLOCKS });
  }

  /** The checks of `request` that need no chain, under `policy` (default: the engine's own). */
  precheck(request: VerifyRequest, policy: PaymentPolicy = this.#o.policy): Promise<Precheck> {
    return precheckPayment(this.#o, request, policy);
  }

  /** The payments this engine refuses to settle whoever asks (its relayers, its contracts, nothing of value). */
  get policy(): PaymentPolicy {
    return this.#o.policy;
  }

  /** The payment machine with this engine's steps, made once: every payment's actor runs it. */
  readonly #machine = paymentMachine.provide({
    actors: {
      verify: fromPromise(({ input }) => this.#verifyStep(input.record)),
      claim: fromPromise(({ input }) => this.#claimStep(input.record)),
      simulate: fromPromise(({ input }) => this.#simulateStep(input.record, input.verdict)),
      broadcast: fromPromise(({ input }) => this.#broadcastStep(input.record, input.verdict, input.batch)),
      confirm: fromPromise(({ input, signal }) => this.#confirmStep(input.record, input.batch, signal)),
      reconcile: fromPromise(({ input }) => this.#reconcileStep(input.record)),
      release: fromPromise(({ input }) => this.#releaseStep(input.record)),
    },
  });

  #spawn(record: PaymentRecord, batch?: BatchActor): PaymentActor {
    return this.#host.spawn(record.id, { record, confirmDeadlineMs: this.#o.confirmDeadlineMs, ...(batch ? { batch } : {}) });
  }

  async #write(record: PaymentRecord): Promise<void> {
    // Its claim is released by now (`releasing` came first): a refused payment leaves no record behind (unless another
    // attempt on the nonce, in a cluster, has written its own since).
    if (leavesNoRecord(record)) {
      if ((await this.#records.get(record.id))?.attempt === record.attempt) await this.#records.remove(record.id);
      return;
    }
    await this.#records.put(record.id, { ...record, updatedAt: this.#clock() });
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

  /**
   * Checks the payment. Verification and the claim after it are a payment's way to its batch: the batcher is told
   * when the way starts, and when it ends other than by joining a batch, so that an open batch waits only for
   * payments that are coming.
   */
  async #verifyStep(record: PaymentRecord): Promise<StepResult> {
    this.#batcher.coming(record, 1);
    return this.#leavesUnless(
      record,
      this.#verdictOf(record).then(async (verdict): Promise<StepResult> => {
        if (!verdict.ok) return { ok: false, reason: this.#counted(verdict).reason, message: verdict.message };
        if (verdict.signer !== 'contract' || !verdict.codeHash) return { ok: true, record: { ...record, payer: verdict.payer }, verdict };
        // A contract payer: refused while banned or over budget, and one at a time while its code never settled.
        const admitted = await this.#budget.admit(verdict.payer, verdict.codeHash, record);
        if (!admitted.ok) return { ok: false, reason: this.#counted({ ok: false, reason: admitted.reason, message: admitted.message }).reason, message: admitted.message };
        const contract = { codeHash: verdict.codeHash, ...(admitted.turn ? { turn: admitted.turn } : {}) };
        return { ok: true, record: { ...record, payer: verdict.payer, contract }, verdict };
      }),
    );
  }

  /** The verdict reached at admission, if one was (taken once), else checked now. */
  #verdictOf(record: PaymentRecord): Promise<Verdict> {
    const checked = this.#checked.get(record.attempt);
    if (checked === undefined) return checkPayment(this.#o, record.request);
    this.#checked.delete(record.attempt);
    return Promise.resolve(checked);
  }

  /** The step's result; unless it lets the payment go on, the payment has left its way to a batch. */
  async #leavesUnless<R extends { ok: unknown }>(record: PaymentRecord, step: Promise<R>): Promise<R> {
    let goesOn = false;
    try {
      const result = await step;
      goesOn = result.ok === true;
      return result;
    } finally {
      if (!goesOn) this.#batcher.coming(record, -1);
    }
  }

  /** Claims the nonce key; a won claim and the payment's record are written in one commit. */
  #claimStep(record: PaymentRecord): Promise<ClaimResult> {
    return this.#leavesUnless(record, this.#claim(record));
  }

  async #claim(record: PaymentRecord): Promise<ClaimResult> {
    const claims = this.#o.store.nonces;
    const claimed = { ...record, state: 'claiming' };
    const claim = await claims.claim(record.id, record.attempt, () => this.#records.putWithin(record.id, { ...claimed, updatedAt: this.#clock() }));
    if (claim.claimed) return { ok: true, record: claimed };
    if (claim.holder !== record.attempt) {
      const existing = await this.#records.get(record.id);
      if (existing?.state === 'settled' && existing.result) {
        if (existing.fingerprint === record.fingerprint) return { ok: 'settled-before', result: existing.result };
        return { ok: false, reason: nonceUsedReason(record.request), message: 'this nonce has settled another payment' };
      }
      if (existing && !isFinished(existing) && existing.attempt === claim.holder) {
        return { ok: false, reason: GatewayReason.nonceInFlight, message: 'another payment with this nonce is being settled' };
      }
      // The holder failed, or died before writing a record: its claim is stale.
      if (!(await claims.takeover(record.id, claim.holder, record.attempt))) {
        return { ok: false, reason: GatewayReason.nonceInFlight, message: 'lost the race for this nonce' };
      }
    }
    await this.#write(claimed);
    return { ok: true, record: claimed };
  }

  /**
   * Batching on, the payment joins its chain's open batch: refused there if its call reverts, else seated in the
   * batch transaction (signed and stored with the record) or, with no batch to ride in, simulated on its own. A
   * payer contract (ERC-1271) is never batched: the gas its signature check takes is its own to decide, and it
   * could leave the calls after its own without any.
   */
  async #simulateStep(record: PaymentRecord, checked: Verdict | undefined): Promise<StepResult> {
    let verdict: Verdict;
    try {
      verdict = checked ?? (await checkPayment(this.#o, record.request));
    } catch (err) {
      this.#batcher.coming(record, -1);
      throw err;
    }
    if (!verdict.ok || verdict.signer !== 'key' || !this.#batcher.enabled) this.#batcher.coming(record, -1);
    else {
      const batch = this.#batcher.join(record, verdict.call);
      const seat = await this.#batcher.seat(batch, record.id);
      if (seat.kind === 'refused') {
        this.#o.metrics.verification(false, seat.reason);
        return { ok: false, reason: seat.reason, message: seat.message };
      }
      if (seat.kind === 'batched') {
        this.#o.metrics.verification(true, 'none');
        return { ok: true, record: seat.record, batch };
      }
    }
    const simulated = this.#counted(await simulatePayment(this.#o, record.request, verdict));
    if (!simulated.ok) return { ok: false, reason: simulated.reason, message: simulated.message };
    return { ok: true, record: { ...record, ...(simulated.gas !== undefined ? { gas: simulated.gas.toString() } : {}) }, verdict: simulated };
  }

  /**
   * Signs, has the machine take the signed transaction (its host writes it durably), and only then sends it; a batch
   * member awaits its batch's send.
   */
  async #broadcastStep(record: PaymentRecord, verdict: Verdict | undefined, batch: BatchActor | undefined): Promise<StepResult> {
    if (batch) return this.#batcher.sent(batch, record);
    if (!verdict?.ok) return { ok: false, reason: Eip3009Reason.simulationFailed, message: 'no verified settlement call' };
    const gas = (BigInt(record.gas ?? '200000') * 13n) / 10n + 10_000n;
    const sent = await sendDurably(this.#courier(record), { to: verdict.call.to, data: verdict.call.data, gas }, record.txs, (txs) => this.#host.record(record.id, { type: 'trail', txs }));
    if (!sent.ok) return { ok: false, reason: 'broadcast_rejected', message: sent.message };
    return { ok: true, record: { ...record, state: 'broadcasting', txs: sent.txs } };
  }

  /** Waits for a receipt of any signed version of the transaction (see `awaitMined`); stops only when the engine stops. */
  async #confirmStep(record: PaymentRecord, batch: BatchActor | undefined, signal: AbortSignal): Promise<StepResult> {
    if (record.batch) {
      if (!batch) throw new Error(`batch ${record.batch.id} is not in flight here`);
      return this.#settledInBatch(record, record.batch.index, await this.#batcher.mined(batch));
    }
    const mined = await awaitMined(this.#courier(record), record.txs, (txs) => this.#host.record(record.id, { type: 'trail', txs }), AbortSignal.any([signal, this.#abort.signal]));
    return this.#settledBy({ ...record, txs: mined.txs }, mined.receipt, mined.tx);
  }

  #courier(record: PaymentRecord): Courier {
    const network = record.network;
    return { pool: this.#o.relayers(network), client: this.#o.inspector(network).client, watcher: this.#o.watcher(network), pollMs: this.#o.pollMs, log: this.#o.log.child({ payment: record.id }) };
  }

  /** A verdict, counted in the metrics as it passes. */
  #counted<V extends Verdict>(verdict: V): V {
    this.#o.metrics.verification(verdict.ok, verdict.ok ? 'none' : verdict.reason);
    return verdict;
  }

  async #settledBy(record: PaymentRecord, receipt: TransactionReceipt, tx: SignedTx): Promise<StepResult> {
    const scheme = schemeOfPayload(record.request.paymentPayload.payload);
    if (receipt.status !== 'success') {
      await this.#reverted(record, receipt.gasUsed, receipt.transactionHash);
      return { ok: false, reason: scheme.reasons.transactionFailed, message: `settlement ${tx.hash} reverted` };
    }
    const expect = expectedTransfer(record);
    if (!ChainInspector.transferMatches(receipt, expect)) {
      return { ok: false, reason: Eip3009Reason.transferEventMismatch, message: `settlement ${receipt.transactionHash} did not log the expected Transfer` };
    }
    const result: SettleResponse = { success: true, transaction: receipt.transactionHash, network: record.network as `eip155:${string}`, payer: record.payer };
    if (record.contract)
      await this.#budget
        .settled(record.contract.codeHash, receipt.transactionHash)
        .catch((error: unknown) => this.#o.log.warn("could not record a contract code's first settlement", { payment: record.id, error }));
    return { ok: true, record: { ...record, result } };
  }

  /**
   * A settlement (or a batch member's call) reverted on chain after it passed simulation: its payer (and its code)
   * is refused from now on, and the gas counts against the hour's budgets. Never fails the step: the failure is
   * logged, the payment's own outcome stands.
   */
  async #reverted(record: PaymentRecord, gas: bigint, tx: Hex): Promise<void> {
    const payer = record.payer || expectedTransfer(record).from;
    const event: Omit<RevertEvent, 'at'> = { network: record.network, payer, gas: gas.toString(), tx, ...(record.contract ? { codeHash: record.contract.codeHash } : {}) };
    this.#o.log.warn('a settlement that passed simulation reverted on chain: its payer is refused from now on', { payment: record.id, ...event });
    await this.#budget.reverted(event).catch((error: unknown) => this.#o.log.error('could not record a reverted settlement', { payment: record.id, error }));
  }

  /** A batch member settled if its own call of the mined batch did, as the batch's receipt shows (`settledCalls`). */
  async #settledInBatch(record: PaymentRecord, index: number, mined: MinedBatch): Promise<StepResult> {
    const scheme = schemeOfPayload(record.request.paymentPayload.payload);
    const failed = scheme.reasons.transactionFailed;
    // A member's share of the batch's gas is what its failed call is counted for.
    const share = mined.receipt.gasUsed / BigInt(Math.max(1, mined.calls.length));
    if (mined.receipt.status !== 'success') {
      await this.#reverted(record, share, mined.receipt.transactionHash);
      return { ok: false, reason: failed, message: `batch ${mined.tx.hash} reverted` };
    }
    const own = settlementCallOf(this.#o, record.request);
    const call = mined.calls[index];
    if (!own || !call || call.to.toLowerCase() !== own.to.toLowerCase() || call.data.toLowerCase() !== own.data.toLowerCase()) {
      this.#o.log.error("a batch member's record names a call of the batch that is not its own", { payment: record.id, tx: mined.tx.hash, index });
      return { ok: false, reason: Eip3009Reason.transferEventMismatch, message: `call ${index} of ${mined.tx.hash} is not this payment's` };
    }
    if (!mined.settled[index]) {
      await this.#reverted(record, share, mined.receipt.transactionHash);
      return { ok: false, reason: await this.#revertReason(record, own, failed), message: `call ${index} of batch ${mined.receipt.transactionHash} did not settle` };
    }
    const result: SettleResponse = { success: true, transaction: mined.receipt.transactionHash, network: record.network as `eip155:${string}`, payer: record.payer };
    return { ok: true, record: { ...record, result } };
  }

  /** Why a payment's call reverts, read from the chain; `fallback` when nothing there explains it. */
  async #revertReason(record: PaymentRecord, call: SettlementCall, fallback: string): Promise<string> {
    const reason = await revertReason(this.#o, record.request, call).catch(() => fallback);
    return reason === schemeOfPayload(record.request.paymentPayload.payload).reasons.simulationFailed ? fallback : reason;
  }

  /**
   * After a failure or an unknown outcome: was the authorization consumed anyway, by a transaction that moved
   * exactly the amount from the payer to the payee? Then the payment settled by that transaction, whoever sent it.
   * Consumed without such a transfer stays a failure, with the reason; not consumed, the failure stands as it was.
   */
  async #reconcileStep(record: PaymentRecord): Promise<StepResult> {
    const failed: StepResult = { ok: false, reason: record.failure?.reason ?? 'unexpected_settle_error', message: record.failure?.message ?? '' };
    const call = settlementCallOf(this.#o, record.request);
    if (!call) return failed;
    const network = this.#o.networks.find(record.network);
    const auth = authorizationOf(record.request, call, { permit2: network?.permit2 ?? PERMIT2_ADDRESS, ...(network?.multicall ? { multicall: network.multicall } : {}) });
    const log = this.#o.log.child({ payment: record.id });
    let found: Consumption | undefined;
    for (let attempt = 1; attempt <= CONSUMPTION_READ_ATTEMPTS && !found; attempt++) {
      try {
        found = await consumptionOf(this.#o.inspector(record.network).client, auth, { lookbackBlocks: this.#o.consumedLookbackBlocks ?? DEFAULT_CONSUMED_LOOKBACK_BLOCKS });
      } catch (err) {
        log.warn('could not read whether the authorization was consumed', { attempt, error: err });
        if (attempt < CONSUMPTION_READ_ATTEMPTS) await sleep(this.#o.pollMs, this.#abort.signal);
      }
    }
    if (!found) return { ...failed, message: `${failed.message} (whether the authorization was consumed anyway could not be read: ask again)` };
    if (!found.consumed) return failed;
    if (found.transaction === undefined) {
      log.warn('the authorization is consumed, without a transfer to the payee', { why: found.why, failure: record.failure });
      return { ok: false, reason: nonceUsedReason(record.request), message: found.why };
    }
    log.warn('the settlement failed, but the authorization was consumed by a transaction that paid the payee: settled by it', { tx: found.transaction, failure: record.failure });
    const payer = record.payer || auth.from;
    const result: SettleResponse = { success: true, transaction: found.transaction, network: record.network as `eip155:${string}`, payer };
    const { failure: _, ...rest } = record;
    return { ok: true, record: { ...rest, payer, result } };
  }

  async #releaseStep(record: PaymentRecord): Promise<StepResult> {
    await this.#o.store.nonces.release(record.id, record.attempt);
    const reason = record.failure?.reason ?? 'unknown';
    return { ok: false, reason, message: record.failure?.message ?? '' };
  }
}

function expectedTransfer(record: PaymentRecord): { token: Address; from: Address; to: Address; value: bigint } {
  return schemeOfPayload(record.request.paymentPayload.payload).expectedTransfer(record.request);
}

function nonceUsedReason(request: VerifyRequest): string {
  return schemeOfPayload(request.paymentPayload.payload).reasons.nonceUsed;
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
  const state = stateName(snapshot);
  if (state === 'settled' && record.result) return record.result;
  if (state === 'duplicate' && snapshot.context.recorded) return snapshot.context.recorded;
  const tx = currentTxOf(record);
  if (state === 'stalled' && tx) return pendingOf(record, tx);
  return failure(record.network, record.payer || undefined, record.failure?.reason ?? 'unexpected_settle_error', record.failure?.message ?? '');
}
