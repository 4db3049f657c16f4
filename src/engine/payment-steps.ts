import { fromPromise } from 'xstate';
import type { Address, Hex, TransactionReceipt } from 'viem';
import { PERMIT2_ADDRESS } from '../chain/canonical.ts';
import type { SettleResponse, VerifyRequest } from '../protocol/x402/types.ts';
import { schemeOfPayload } from '../schemes/registry.ts';
import type { SettlementCall } from '../schemes/scheme.ts';
import type { DurableCollection } from '../store/durable-collection.ts';
import { awaitMined, sendDurably, sleep, type Courier } from '../tx/courier.ts';
import type { SignedTx } from '../tx/trail.ts';
import { err, ok } from '../protocol/result.ts';
import { refusedPayer } from '../verify/checks.ts';
import { GatewayReason, type InvalidReason, type SettleReason } from '../verify/reasons.ts';
import { authorizationOf, consumptionOf, type Consumption } from './authorization-consumption.ts';
import { ChainInspector } from './chain-inspector.ts';
import { DEFAULT_CONSUMED_LOOKBACK_BLOCKS, type EngineOptions } from './engine-options.ts';
import { paymentMachine, type ClaimResult, type StepResult } from './payment-machine.ts';
import { isFinished, leavesNoRecord, type BatchRecord, type PaymentRecord } from './payment-record.ts';
import type { RevertBudget, RevertEvent } from './revert-budget.ts';
import { courierOn, gasLimitOf, SettlementBatcher, sentOrWhyNot, type BatchActor, type MinedBatch } from './settlement-batcher.ts';
import { checkPayment, revertReason, settlementCallOf, simulatePayment, type Verdict } from './verify-payment.ts';

/** How often the consumption read is tried before the failure stands (the buyer's retry reads again). */
const CONSUMPTION_READ_ATTEMPTS = 3;

export interface PaymentStepsDeps {
  options: EngineOptions;
  records: DurableCollection<PaymentRecord>;
  batches: DurableCollection<BatchRecord>;
  budget: RevertBudget;
  /** Verdicts reached before a payment's actor started (by its attempt): its verification step takes them, once. */
  checked: Map<string, Verdict>;
  clock: () => number;
  /** Aborts every transaction awaited (the engine stops). */
  signal: AbortSignal;
  /** Hands a grown trail to the payment's actor, whose host writes it durably; resolves once it is written. */
  trail(id: string, txs: SignedTx[]): Promise<void>;
}

/**
 * The steps of the payment machine, as this engine performs them: verify, claim, simulate (or seat in a batch),
 * broadcast, confirm, reconcile and release, each an actor the machine invokes (`machine`). A step returns what
 * happened; the machine takes it into the payment's context, and the host writes the record: the steps write only
 * the claim (in the claim's own commit) and the trail handed to the machine before each send.
 */
export class PaymentSteps {
  readonly #o: EngineOptions;
  readonly #d: PaymentStepsDeps;
  readonly #records: DurableCollection<PaymentRecord>;
  readonly #budget: RevertBudget;
  readonly #checked: Map<string, Verdict>;
  readonly #clock: () => number;
  readonly #signal: AbortSignal;
  /** Settlement batching: the payments' batch actors, and the open batch of each chain and kind. */
  readonly batcher: SettlementBatcher;

  constructor(deps: PaymentStepsDeps) {
    const opts = deps.options;
    this.#o = opts;
    this.#d = deps;
    this.#records = deps.records;
    this.#budget = deps.budget;
    this.#checked = deps.checked;
    this.#clock = deps.clock;
    this.#signal = deps.signal;
    this.batcher = new SettlementBatcher({
      ...opts,
      maxSize: opts.batch.maxSize,
      windowMs: opts.batch.windowMs,
      eager: opts.batch.eager,
      persist: async (batch, members) => {
        await opts.store.atomically(() => {
          deps.batches.putWithin(batch.id, batch);
          for (const r of members) this.#records.putWithin(r.id, { ...r, updatedAt: this.#clock() });
        });
      },
      revertReason: (record, call) => this.#revertReason(record, call, schemeOfPayload(record.request.paymentPayload.payload).reasons.simulationFailed),
      signal: deps.signal,
    });
  }

  /** The payment machine with these steps, made once: every payment's actor runs it. */
  readonly machine = paymentMachine.provide({
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

  /** Writes a payment's record as its host hands it over; a refused payment leaves none behind. */
  async write(record: PaymentRecord): Promise<void> {
    // Its claim is released by now (`releasing` came first): a refused payment leaves no record behind (unless another
    // attempt on the nonce, in a cluster, has written its own since).
    if (leavesNoRecord(record)) {
      if ((await this.#records.get(record.id))?.attempt === record.attempt) await this.#records.remove(record.id);
      return;
    }
    await this.#records.put(record.id, { ...record, updatedAt: this.#clock() });
  }

  /** A payment ended: its contract code's turn goes back, and a verdict it never took is dropped. */
  ended(id: string, record: PaymentRecord): void {
    const turn = record.contract?.turn;
    if (turn)
      void this.#budget.release(record.contract?.codeHash as string, turn).catch((error: unknown) => this.#o.log.warn("could not give a contract code's turn back; it lapses", { payment: id, error }));
    this.#checked.delete(record.attempt);
  }

  /**
   * A contract payer's verdict, judged by the revert budget (see `revert-budget.ts`): refused while it or its code is
   * banned, or while the gas of reverted settlements is spent. An EOA's verdict passes untouched, at no cost.
   */
  async judged(verdict: Verdict): Promise<Verdict> {
    if (!verdict.ok || verdict.value.signer !== 'contract' || !verdict.value.codeHash) return verdict;
    const judged = await this.#budget.judge(verdict.value.payer, verdict.value.codeHash);
    return judged.ok ? verdict : refusedPayer({ code: judged.reason, message: judged.message }, verdict.value.payer);
  }

  /** A verdict, counted in the metrics as it passes. */
  counted<V extends Verdict>(verdict: V): V {
    this.#o.metrics.verification(verdict.ok, verdict.ok ? 'none' : verdict.error.code);
    return verdict;
  }

  /**
   * Whether `request`'s authorization was consumed on chain, by whoever sent it (one read, no retry; a failed read
   * throws); undefined when its network or asset is not configured here.
   */
  async consumption(request: VerifyRequest): Promise<Consumption | undefined> {
    const call = settlementCallOf(this.#o, request);
    const network = this.#o.networks.find(request.paymentRequirements.network);
    if (!call || !network) return undefined;
    const auth = authorizationOf(request, call, { permit2: network.permit2 ?? PERMIT2_ADDRESS, ...(network.multicall ? { multicall: network.multicall } : {}) });
    return consumptionOf(this.#o.inspector(network.caip2).client, auth, { lookbackBlocks: this.#o.consumedLookbackBlocks ?? DEFAULT_CONSUMED_LOOKBACK_BLOCKS });
  }

  /**
   * Checks the payment. Verification and the claim after it are a payment's way to its batch: the batcher is told
   * when the way starts, and when it ends other than by joining a batch, so that an open batch waits only for
   * payments that are coming.
   */
  async #verifyStep(record: PaymentRecord): Promise<StepResult> {
    this.batcher.coming(record, 1);
    return this.#leavesUnless(
      record,
      this.#verdictOf(record).then(async (verdict): Promise<StepResult> => {
        if (!verdict.ok) return err(this.counted(verdict).error.code, verdict.error.message);
        const { payer, signer, codeHash } = verdict.value;
        if (signer !== 'contract' || !codeHash) return ok({ record: { ...record, payer }, verdict });
        // A contract payer: refused while banned or over budget, and one at a time while its code never settled.
        const admitted = await this.#budget.admit(payer, codeHash, record);
        if (!admitted.ok) return err(this.counted(refusedPayer({ code: admitted.reason, message: admitted.message }, undefined)).error.code, admitted.message);
        const contract = { codeHash, ...(admitted.turn ? { turn: admitted.turn } : {}) };
        return ok({ record: { ...record, payer, contract }, verdict });
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
  async #leavesUnless<R extends StepResult | ClaimResult>(record: PaymentRecord, step: Promise<R>): Promise<R> {
    let goesOn = false;
    try {
      const result = await step;
      goesOn = result.ok && 'record' in result.value;
      return result;
    } finally {
      if (!goesOn) this.batcher.coming(record, -1);
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
    if (claim.claimed) return ok({ record: claimed });
    if (claim.holder !== record.attempt) {
      const existing = await this.#records.get(record.id);
      if (existing?.state === 'settled' && existing.result) {
        if (existing.fingerprint === record.fingerprint) return ok({ recorded: existing.result });
        return err(nonceUsedReason(record.request), 'this nonce has settled another payment');
      }
      if (existing && !isFinished(existing) && existing.attempt === claim.holder && !this.#orphaned(existing)) {
        return err(GatewayReason.nonceInFlight, 'another payment with this nonce is being settled');
      }
      // The holder failed, or died before writing a record, or left it orphaned here: its claim is stale.
      if (!(await claims.takeover(record.id, claim.holder, record.attempt))) {
        return err(GatewayReason.nonceInFlight, 'lost the race for this nonce');
      }
    }
    await this.write(claimed);
    return ok({ record: claimed });
  }

  /**
   * A record of this node's at `claiming` (nothing signed for it) whose attempt runs nowhere: this process has no
   * other actor for the nonce (the intake answers from one it has), and this node's earlier runs' records were resumed
   * as it started. Left by a claim that committed while its statement failed (the database going down at that
   * moment): the buyer's next request takes it over instead of being told forever that it is in progress.
   */
  #orphaned(existing: PaymentRecord): boolean {
    return existing.state === 'claiming' && existing.node === this.#o.node;
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
      this.batcher.coming(record, -1);
      throw err;
    }
    if (!verdict.ok || verdict.value.signer !== 'key' || !this.batcher.enabled) this.batcher.coming(record, -1);
    else {
      const batch = this.batcher.join(record, verdict.value.call);
      const seat = await this.batcher.seat(batch, record.id);
      if (seat.kind === 'refused') {
        this.#o.metrics.verification(false, seat.reason);
        return err(seat.reason, seat.message);
      }
      if (seat.kind === 'batched') {
        this.#o.metrics.verification(true, 'none');
        return ok({ record: seat.record, batch });
      }
    }
    const simulated = this.counted(await simulatePayment(this.#o, record.request, verdict));
    if (!simulated.ok) return err(simulated.error.code, simulated.error.message);
    const gas = simulated.value.gas;
    return ok({ record: { ...record, ...(gas !== undefined ? { gas: gas.toString() } : {}) }, verdict: simulated });
  }

  /**
   * Signs, has the machine take the signed transaction (its host writes it durably), and only then sends it; a batch
   * member awaits its batch's send.
   */
  async #broadcastStep(record: PaymentRecord, verdict: Verdict | undefined, batch: BatchActor | undefined): Promise<StepResult> {
    if (batch) return this.batcher.sent(batch, record);
    if (!verdict?.ok) return err(schemeOfPayload(record.request.paymentPayload.payload).reasons.simulationFailed, 'no verified settlement call');
    const gas = gasLimitOf(BigInt(record.gas ?? '200000'));
    const sent = await sentOrWhyNot(sendDurably(this.#courier(record), { to: verdict.value.call.to, data: verdict.value.call.data, gas }, record.txs, (txs) => this.#d.trail(record.id, txs)));
    if (!sent.ok) return sent;
    return ok({ record: { ...record, state: 'broadcasting', txs: sent.value } });
  }

  /** Waits for a receipt of any signed version of the transaction (see `awaitMined`); stops only when the engine stops. */
  async #confirmStep(record: PaymentRecord, batch: BatchActor | undefined, signal: AbortSignal): Promise<StepResult> {
    if (record.batch) {
      if (!batch) throw new Error(`batch ${record.batch.id} is not in flight here`);
      return this.#settledInBatch(record, record.batch.index, await this.batcher.mined(batch));
    }
    const mined = await awaitMined(this.#courier(record), record.txs, (txs) => this.#d.trail(record.id, txs), AbortSignal.any([signal, this.#signal]));
    return this.#settledBy({ ...record, txs: mined.txs }, mined.receipt, mined.tx);
  }

  #courier(record: PaymentRecord): Courier {
    return courierOn(this.#o, record.network, this.#o.log.child({ payment: record.id }));
  }

  async #settledBy(record: PaymentRecord, receipt: TransactionReceipt, tx: SignedTx): Promise<StepResult> {
    const scheme = schemeOfPayload(record.request.paymentPayload.payload);
    if (receipt.status !== 'success') {
      await this.#reverted(record, receipt.gasUsed, receipt.transactionHash);
      return err(scheme.reasons.transactionFailed, `settlement ${tx.hash} reverted`);
    }
    const expect = expectedTransfer(record);
    if (!ChainInspector.transferMatches(receipt, expect)) {
      return err(scheme.reasons.transferEventMismatch, `settlement ${receipt.transactionHash} did not log the expected Transfer`);
    }
    const result: SettleResponse = { success: true, transaction: receipt.transactionHash, network: record.network as `eip155:${string}`, payer: record.payer, ...(await this.#details(record)) };
    if (record.contract)
      await this.#budget
        .settled(record.contract.codeHash, receipt.transactionHash)
        .catch((error: unknown) => this.#o.log.warn("could not record a contract code's first settlement", { payment: record.id, error }));
    return ok({ record: { ...record, result } });
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
      return err(failed, `batch ${mined.tx.hash} reverted`);
    }
    const own = settlementCallOf(this.#o, record.request);
    const call = mined.calls[index];
    if (!own || !call || call.to.toLowerCase() !== own.to.toLowerCase() || call.data.toLowerCase() !== own.data.toLowerCase()) {
      this.#o.log.error("a batch member's record names a call of the batch that is not its own", { payment: record.id, tx: mined.tx.hash, index });
      return err(scheme.reasons.transferEventMismatch, `call ${index} of ${mined.tx.hash} is not this payment's`);
    }
    if (!mined.settled[index]) {
      await this.#reverted(record, share, mined.receipt.transactionHash);
      return err(await this.#revertReason(record, own, failed), `call ${index} of batch ${mined.receipt.transactionHash} did not settle`);
    }
    const result: SettleResponse = { success: true, transaction: mined.receipt.transactionHash, network: record.network as `eip155:${string}`, payer: record.payer, ...(await this.#details(record)) };
    return ok({ record: { ...record, result } });
  }

  /** What the payment's scheme adds to its settled answer (a channel deposit: the amount and the channel's state). */
  async #details(record: PaymentRecord): Promise<Pick<SettleResponse, 'amount' | 'extra'>> {
    const scheme = schemeOfPayload(record.request.paymentPayload.payload);
    if (!scheme.settledDetails) return {};
    return scheme.settledDetails(this.#o.inspector(record.network), record.request).catch(() => ({}));
  }

  /** Why a payment's call reverts, read from the chain; `fallback` when nothing there explains it. */
  async #revertReason(record: PaymentRecord, call: SettlementCall, fallback: SettleReason): Promise<SettleReason> {
    const reason = await revertReason(this.#o, record.request, call).catch(() => fallback);
    return reason === schemeOfPayload(record.request.paymentPayload.payload).reasons.simulationFailed ? fallback : reason;
  }

  /**
   * After a failure or an unknown outcome: was the authorization consumed anyway, by a transaction that moved
   * exactly the amount from the payer to the payee? Then the payment settled by that transaction, whoever sent it.
   * Consumed without such a transfer stays a failure, with the reason; not consumed, the failure stands as it was.
   */
  async #reconcileStep(record: PaymentRecord): Promise<StepResult> {
    const failed = err<SettleReason>(record.failure?.reason ?? GatewayReason.unexpectedSettle, record.failure?.message ?? '');
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
        if (attempt < CONSUMPTION_READ_ATTEMPTS) await sleep(this.#o.pollMs, this.#signal);
      }
    }
    if (!found) return err(failed.error.code, `${failed.error.message} (whether the authorization was consumed anyway could not be read: ask again)`);
    if (!found.consumed) return failed;
    if (found.transaction === undefined) {
      log.warn('the authorization is consumed, without a transfer to the payee', { why: found.why, failure: record.failure });
      return err(nonceUsedReason(record.request), found.why);
    }
    log.warn('the settlement failed, but the authorization was consumed by a transaction that paid the payee: settled by it', { tx: found.transaction, failure: record.failure });
    const payer = record.payer || auth.from;
    const result: SettleResponse = { success: true, transaction: found.transaction, network: record.network as `eip155:${string}`, payer, ...(await this.#details(record)) };
    const { failure: _, ...rest } = record;
    return ok({ record: { ...rest, payer, result } });
  }

  async #releaseStep(record: PaymentRecord): Promise<StepResult> {
    await this.#o.store.nonces.release(record.id, record.attempt);
    const reason = record.failure?.reason ?? GatewayReason.unexpectedSettle;
    return err(reason, record.failure?.message ?? '');
  }
}

function expectedTransfer(record: PaymentRecord): { token: Address; from: Address; to: Address; value: bigint } {
  return schemeOfPayload(record.request.paymentPayload.payload).expectedTransfer(record.request);
}

/** The code a payment's scheme gives an authorization used (by anyone). */
export function nonceUsedReason(request: VerifyRequest): InvalidReason {
  return schemeOfPayload(request.paymentPayload.payload).reasons.nonceUsed;
}
