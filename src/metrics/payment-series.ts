/**
 * Payments and the actors that carry them: verifications, actor transitions and state times, settlements, payments
 * shed, settlements that reverted and the contract payers refused for it, and payments pending. The label
 * vocabularies (reasons, outcomes, kinds) are declared by the parts that own them, at zero.
 */
import type { AnyActorRef, AnyStateMachine, StateValue } from 'xstate';
import { machineSeries, statePath } from './machine-series.ts';
import type { MetricKit } from './metric-kit.ts';

/** The statecharts whose actors are measured: `payment` (settlement engine) and `order` (stock orders). */
export type MachineName = 'payment' | 'order';

export interface PaymentSeries {
  /** A payment was judged: `reason` is the invalid reason code, or `none` when valid. */
  verification(valid: boolean, reason: string): void;
  /** Counts the actor's transitions and times each state it leaves. Call before `actor.start()`. */
  watchActor(machine: MachineName, actor: AnyActorRef): void;
  /** A payment actor finished in `outcome` (its final state), `seconds` after the payment was first seen. */
  settlement(network: string, outcome: string, seconds: number): void;
  /** A new payment turned away (503, nothing charged) because its network's settlement is behind. */
  paymentShed(network: string, reason: string): void;
  /** A settlement (or a batch member's call) that passed simulation reverted on chain, burning `gas` of our relayers'. */
  revertedSettlement(network: string, gas: bigint): void;
  /**
   * A `batch-settlement` channel deposit's actor finished in `outcome` (settled, failed, rejected, duplicate,
   * stalled); `reason` is its failure's code, or `none`.
   */
  channelDeposit(network: string, outcome: string, reason: string): void;
  /** A contract payer refused by the revert budget (`kind`: payer_banned, code_banned, payer_gas, code_gas, total_gas, code_busy). */
  revertRefusal(kind: string): void;
  /** The payments in flight, read at scrape time (each source given is read). */
  watchPendingPayments(read: () => number): void;
  /** Every reason a payment can be refused for (`gate402_verifications_total{result="invalid"}`). */
  declareVerifications(reasons: readonly string[]): void;
  /** The machine's transitions and the states it rests in, as {@link watchActor} counts and times them. */
  declareMachine(machine: MachineName, definition: AnyStateMachine): void;
  /** Settlements on each network ending in each outcome (the payment machine's final states); the engine settles these networks. */
  declareSettlements(networks: readonly string[], outcomes: readonly string[]): void;
  /** Payments shed on each network, for each reason of the settlement port's shed vocabulary. */
  declareShedding(networks: readonly string[], reasons: readonly string[]): void;
  /** Channel deposits settled on each network, at zero (the series the deposit panel queries, from the first scrape). */
  declareChannelDeposits(networks: readonly string[]): void;
  /** Every kind of revert budget refusal. */
  declareRevertRefusals(kinds: readonly string[]): void;
}

export function paymentSeries(kit: MetricKit, clock: () => number): PaymentSeries {
  const verifications = kit.counter({
    name: 'gate402_verifications_total',
    help: 'Payment verifications (facilitator /verify and each settlement) by result and invalid reason',
    labelNames: ['result', 'reason'],
  });
  verifications.labels('valid', 'none').inc(0);

  const transitions = kit.counter({
    name: 'gate402_actor_transitions_total',
    help: 'State transitions of payment and order actors (`from` is `start` for the first state)',
    labelNames: ['machine', 'from', 'to'],
  });
  const stateDuration = kit.histogram({
    name: 'gate402_actor_state_duration_seconds',
    help: 'Time payment and order actors spent in each state they left',
    labelNames: ['machine', 'state'],
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300],
  });

  const settlements = kit.histogram({
    name: 'gate402_settlement_duration_seconds',
    help: 'Finished settlements by network and outcome (the final state: settled, failed, rejected, duplicate, stalled), from first sight of the payment to the end; `_count` is the settlement count',
    labelNames: ['network', 'outcome'],
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300],
  });

  const shed = kit.counter({
    name: 'gate402_payments_shed_total',
    help: "New paid requests turned away with 503 and Retry-After, before anything was verified or charged, because their network's settlement was behind, by network and reason (queue_full, queue_slow, relayers_busy, client_share: the client was at its share of the queue); payer_over_balance counts payments refused (402, nothing charged) because their payer's balance did not cover them beside its payments in flight",
    labelNames: ['network', 'reason'],
  });

  const revertedGas = kit.counter({
    name: 'gate402_settlement_reverted_gas_total',
    help: 'Gas our relayers burnt on settlements that passed simulation and reverted on chain (a batch member: its share of the batch), by network',
    labelNames: ['network'],
  });
  const revertedTxs = kit.counter({
    name: 'gate402_settlement_reverted_total',
    help: 'Settlements (or batch members) that passed simulation and reverted on chain, by network: each bans its payer and its code',
    labelNames: ['network'],
  });
  const revertRefusals = kit.counter({
    name: 'gate402_revert_budget_refusals_total',
    help: 'Contract payers refused before anything was sent, by kind: payer_banned and code_banned (a settlement of it or its code reverted), payer_gas, code_gas and total_gas (an hourly budget of reverted gas spent), code_busy (an unproven code settles one payment at a time)',
    labelNames: ['kind'],
  });

  const channelDeposits = kit.counter({
    name: 'gate402_channel_deposits_total',
    help: 'Deposits into x402 batch-settlement payment channels that /settle (or a paid route) finished, by network, outcome (settled, failed, rejected before anything was sent, duplicate: answered from the record, stalled) and reason (the refusal or failure code, none when settled)',
    labelNames: ['network', 'outcome', 'reason'],
  });

  const pendingSources: Array<() => number> = [];
  kit.gauge({
    name: 'gate402_payments_pending',
    help: 'Payments being settled now',
    labelNames: [],
    collect() {
      this.set(pendingSources.reduce((sum, read) => sum + read(), 0));
    },
  });

  return {
    channelDeposit(network, outcome, reason) {
      channelDeposits.labels(network, outcome, reason).inc();
    },
    verification(valid, reason) {
      verifications.labels(valid ? 'valid' : 'invalid', valid ? 'none' : reason).inc();
    },
    watchActor(machine, actor) {
      let state: string | undefined;
      let since = clock();
      actor.subscribe({
        next: (snapshot: { value: StateValue }) => {
          const next = statePath(snapshot.value);
          if (next === state) return;
          const now = clock();
          if (state !== undefined) stateDuration.labels(machine, state).observe((now - since) / 1000);
          transitions.labels(machine, state ?? 'start', next).inc();
          state = next;
          since = now;
        },
        // The actor's owner reports its errors; this observer only must not make them "unhandled".
        error: () => {},
      });
    },
    settlement(network, outcome, seconds) {
      settlements.labels(network, outcome).observe(seconds);
    },
    paymentShed(network, reason) {
      shed.labels(network, reason).inc();
    },
    revertedSettlement(network, gas) {
      revertedGas.labels(network).inc(Number(gas));
      revertedTxs.labels(network).inc();
    },
    revertRefusal(kind) {
      revertRefusals.labels(kind).inc();
    },
    watchPendingPayments(read) {
      pendingSources.push(read);
    },
    declareVerifications(reasons) {
      for (const reason of reasons) verifications.labels('invalid', reason).inc(0);
    },
    declareMachine(machine, definition) {
      const series = machineSeries(definition);
      for (const [from, to] of series.transitions) transitions.labels(machine, from, to).inc(0);
      for (const state of series.states) stateDuration.zero({ machine, state });
    },
    declareSettlements(networks, outcomes) {
      for (const network of networks) for (const outcome of outcomes) settlements.zero({ network, outcome });
      for (const network of networks) {
        revertedGas.labels(network).inc(0);
        revertedTxs.labels(network).inc(0);
      }
    },
    declareShedding(networks, reasons) {
      for (const network of networks) for (const reason of reasons) shed.labels(network, reason).inc(0);
    },
    declareChannelDeposits(networks) {
      for (const network of networks) channelDeposits.labels(network, 'settled', 'none').inc(0);
    },
    declareRevertRefusals(kinds) {
      for (const kind of kinds) revertRefusals.labels(kind).inc(0);
    },
  };
}
