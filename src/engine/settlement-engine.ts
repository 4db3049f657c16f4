import { DurableHost, topState } from '../actors/durable-host.ts';
import type { Settlement, Shed } from '../ports/settlement.ts';
import { supportedExtensionKeys } from '../protocol/x402/extensions/index.ts';
import type { SettleResponse, SupportedResponse, VerifyRequest, VerifyResponse } from '../protocol/x402/types.ts';
import type { DurableCollection } from '../store/durable-collection.ts';
import type { RecordOrders } from '../store/record-order.ts';
import type { PaymentPolicy } from '../policy/payment-policy.ts';
import type { Consumption } from './authorization-consumption.ts';
import { DEFAULT_ADMISSION, type EngineOptions } from './engine-options.ts';
import { FairAdmission } from './fair-admission.ts';
import { PaymentIntake, type AdmitHook, type PaymentHost } from './payment-intake.ts';
import { batchRecordOrder, paymentRecordOrder, type BatchRecord, type PaymentRecord } from './payment-record.ts';
import { PaymentSteps } from './payment-steps.ts';
import { PaymentRecovery } from './recovery.ts';
import { RevertBudget } from './revert-budget.ts';
import { SettlementAdmission } from './settlement-admission.ts';
import { checkPayment, precheckPayment, simulatePayment, type Precheck, type Verdict } from './verify-payment.ts';
import { batchRouteOf } from './batch-settlement-route.ts';
import { BATCH_SETTLEMENT_SCHEME } from '../schemes/batch-settlement/domain.ts';
import { BatchReason } from '../verify/batch-settlement-reasons.ts';
import { verifyVoucherPayload } from '../schemes/batch-settlement/voucher-verify.ts';
import { schemeOfPayload } from '../schemes/registry.ts';

/** The engine's collections, and the rank that keeps each record from going backwards (given to the store as it opens). */
const PAYMENTS = 'payments';
const PAYMENT_BATCHES = 'payment-batches';
export const ENGINE_RECORD_ORDERS: RecordOrders = { [PAYMENTS]: paymentRecordOrder, [PAYMENT_BATCHES]: batchRecordOrder };

export { DEFAULT_ADMISSION, DEFAULT_CONSUMED_LOOKBACK_BLOCKS, type EngineMetrics, type EngineOptions } from './engine-options.ts';
export type { AdmitHook } from './payment-intake.ts';
export type { Precheck } from './verify-payment.ts';

const NO_NETWORKS: ReadonlySet<string> = new Set();
/** The schemes of channel deposits, counted apart (`gate402_channel_deposits_total`). */
const depositSchemes: ReadonlySet<string> = new Set(['deposit-eip3009', 'deposit-permit2']);

/** States after the claim: the record exists and each of them is written as it is entered. */
const DURABLE_STATES = new Set(['simulating', 'broadcasting', 'inFlight', 'reconciling', 'releasing', 'settled', 'failed', 'stalled']);

/**
 * Settles x402 payments: one XState actor per payment, its record durable at every step, nonces claimed before
 * simulation, transactions signed and stored before they are sent, and every unfinished payment resumed on start (a
 * broadcast one by its hash, never sent anew). The `Settlement` port of the gateway's own engine.
 *
 * This class is the facade over three parts: how payments come in (`payment-intake.ts`: answered from what is known,
 * admitted, queued), the steps the payment machine invokes (`payment-steps.ts`), and recovery (`recovery.ts`: resume
 * on start, adoption of a dead node's payments). It owns the durable host, the one writer of every payment's record.
 */
export class SettlementEngine implements Settlement {
  readonly #o: EngineOptions;
  readonly #host: PaymentHost;
  readonly #abort = new AbortController();
  readonly #admission: SettlementAdmission;
  readonly #steps: PaymentSteps;
  readonly #intake: PaymentIntake;
  readonly #recovery: PaymentRecovery;

  constructor(opts: EngineOptions) {
    this.#o = opts;
    const clock = opts.clockMs ?? Date.now;
    const records: DurableCollection<PaymentRecord> = opts.store.collection<PaymentRecord>(PAYMENTS);
    const batches = opts.store.collection<BatchRecord>(PAYMENT_BATCHES);
    this.#admission = new SettlementAdmission(opts.admission ?? DEFAULT_ADMISSION);
    const budget = new RevertBudget({
      store: opts.store,
      ...(opts.revertBudget ? { limits: opts.revertBudget } : {}),
      clock,
      observer: { reverted: (network, gas) => opts.metrics.revertedSettlement(network, gas), refused: (kind) => opts.metrics.revertRefusal(kind) },
    });
    /** Verdicts reached before a payment's actor started (by its attempt): its verification step takes them. */
    const checked = new Map<string, Verdict>();
    const steps = new PaymentSteps({ options: opts, records, batches, budget, checked, clock, signal: this.#abort.signal, trail: (id, txs) => this.#host.record(id, { type: 'trail', txs }) });
    this.#steps = steps;
    this.#host = new DurableHost({
      machine: steps.machine,
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
      write: (record) => steps.write(record),
      started: (actor) => {
        opts.metrics.watchActor('payment', actor);
        const log = opts.log.child({ payment: actor.getSnapshot().context.record.id });
        let last = '';
        actor.subscribe((snapshot) => {
          const state = topState(snapshot.value);
          if (state !== last) log.debug('payment state', { state });
          last = state;
        });
      },
      done: (id, snapshot, state) => {
        const record = snapshot.context.record;
        steps.ended(id, record);
        this.#intake.ended(record, state);
        this.#recovery.ended(id, record);
        const network = opts.networks.has(record.network) ? record.network : 'other';
        opts.metrics.settlement(network, state, (clock() - record.createdAt) / 1000);
        if (depositSchemes.has(schemeOfPayload(record.request.paymentPayload.payload).name)) opts.metrics.channelDeposit?.(network, state, record.failure?.reason ?? 'none');
      },
    });
    const fair = new FairAdmission(opts, clock);
    this.#intake = new PaymentIntake({ options: opts, records, host: this.#host, batcher: steps.batcher, admission: this.#admission, fair, checked, clock });
    this.#recovery = new PaymentRecovery({ options: opts, records, batches, host: this.#host, batcher: steps.batcher, spawn: (record, batch) => this.#intake.spawn(record, batch) });
  }

  /** The payment kinds this engine settles: `exact` on every configured network, signed for by its relayers. */
  readonly supported = (): SupportedResponse => {
    const networks = this.#o.networks.all();
    const signers = [...new Set(networks.flatMap((n) => this.#o.relayers(n.caip2).addresses))];
    const channels = this.#batchNetworks;
    return {
      kinds: [
        ...networks.map((n) => ({ x402Version: 2 as const, scheme: 'exact' as const, network: n.caip2 as `eip155:${string}` })),
        ...networks.filter((n) => channels.has(n.caip2)).map((n) => ({ x402Version: 2 as const, scheme: BATCH_SETTLEMENT_SCHEME, network: n.caip2 as `eip155:${string}` })),
      ],
      extensions: supportedExtensionKeys(),
      signers: { 'eip155:*': signers },
    };
  };

  /** Checks one payment without settling it: the checks, the revert budget, then (unless switched off) simulation. */
  readonly verify = async (request: VerifyRequest): Promise<VerifyResponse> => {
    const route = batchRouteOf(request, this.#batchNetworks);
    if (route.kind === 'refused') return { isValid: false, invalidReason: route.code, invalidMessage: route.message };
    if (route.kind === 'voucher') return verifyVoucherPayload(this.#o.inspector(request.paymentRequirements.network), request, route.payload);
    const steps = this.#steps;
    const checked = await steps.judged(await checkPayment(this.#o, request));
    const verdict = steps.counted(this.#o.simulateOnVerify ? await simulatePayment(this.#o, request, checked) : checked);
    if (verdict.ok) return { isValid: true, payer: verdict.value.payer, ...(verdict.value.extra ? { extra: verdict.value.extra } : {}) };
    return { isValid: false, invalidReason: verdict.error.code, invalidMessage: verdict.error.message, ...(verdict.error.payer ? { payer: verdict.error.payer } : {}) };
  };

  /**
   * Settles `request`, or answers what this engine already knows of it (see `PaymentIntake.settle`); `client` is the
   * request's address, whose share of the settlement queue is bounded.
   */
  readonly settle = (request: VerifyRequest, client?: string): Promise<SettleResponse> => this.#refusedUnsettleable(request) ?? this.#intake.settle(request, undefined, client);

  /** The networks whose `batch-settlement` contracts were found at start: deposits are settled and vouchers verified there. */
  get #batchNetworks(): ReadonlySet<string> {
    return this.#o.batchSettlementNetworks ?? NO_NETWORKS;
  }

  /**
   * A `batch-settlement` request that /settle does not send (not a deposit: a voucher is claimed by its receiver,
   * never settled one by one), answered as the official facilitator answers it; undefined for one that is settled.
   */
  #refusedUnsettleable(request: VerifyRequest): Promise<SettleResponse> | undefined {
    const route = batchRouteOf(request, this.#batchNetworks);
    if (route.kind === 'exact' || route.kind === 'deposit') return undefined;
    const network = request.paymentRequirements.network as `eip155:${string}`;
    const refused =
      route.kind === 'refused'
        ? { errorReason: route.code, errorMessage: route.message }
        : { errorReason: BatchReason.payloadType, errorMessage: 'a voucher is not settled on its own: the receiver claims it', payer: route.payload.config.payer };
    return Promise.resolve({ success: false, transaction: '', network, ...refused });
  }

  /**
   * {@link settle}, with `admit` asked first about a payment the engine does not know yet (a retry of a known one
   * always gets its recorded or pending answer): a refusal it returns is the answer, and nothing is settled. The
   * facilitator's checks and payer quota.
   */
  settleAdmitting(request: VerifyRequest, admit: AdmitHook, client?: string): Promise<SettleResponse> {
    return this.#refusedUnsettleable(request) ?? this.#intake.settle(request, admit, client);
  }

  /** Whether a new payment must be turned away now because its network's settlement is behind (see `PaymentIntake.shedding`). */
  readonly shedding = (request: VerifyRequest, client?: string): Promise<Shed | undefined> => (this.sendsPayment(request) ? this.#intake.shedding(request, client) : Promise.resolve(undefined));

  /**
   * Whether `request` is a payment this engine sends (an `exact` payment, or a channel deposit): what the
   * facilitator's door judges and quotas. A voucher is verified against its channel only; a refused request is
   * answered by `verify` and `settle` as they are.
   */
  sendsPayment(request: VerifyRequest): boolean {
    const kind = batchRouteOf(request, this.#batchNetworks).kind;
    return kind === 'exact' || kind === 'deposit';
  }

  /** Payments this process is settling now. */
  get inFlight(): number {
    return this.#host.size;
  }

  /** Payments of `network` admitted and not yet sent. */
  queued(network: string): number {
    return this.#admission.queued(network);
  }

  /** Resumes every unfinished payment of the store (in a cluster, this node's): see `recovery.ts`. */
  start(): Promise<void> {
    return this.#recovery.start();
  }

  /** Takes over the unfinished payments of `node`, a dead cluster node; `finished` once every one is final. */
  adopt(node: string, finished: () => void): Promise<number> {
    return this.#recovery.adopt(node, finished);
  }

  async stop(): Promise<void> {
    this.#steps.batcher.stop();
    this.#abort.abort();
    this.#host.stop();
  }

  /**
   * Whether `request`'s authorization was consumed on chain, by whoever sent it (one read, no retry; a failed read
   * throws); undefined when its network or asset is not configured here. What a caller that settled elsewhere reads
   * to learn, without sending anything, whether a settlement of unknown outcome happened.
   */
  consumption(request: VerifyRequest): Promise<Consumption | undefined> {
    return this.#steps.consumption(request);
  }

  /** The checks of `request` that need no chain, under `policy` (default: the engine's own). */
  precheck(request: VerifyRequest, policy: PaymentPolicy = this.#o.policy): Promise<Precheck> {
    return precheckPayment(this.#o, request, policy);
  }

  /** The payments this engine refuses to settle whoever asks (its relayers, its contracts, nothing of value). */
  get policy(): PaymentPolicy {
    return this.#o.policy;
  }
}
