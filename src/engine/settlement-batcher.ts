import { randomUUID } from 'node:crypto';
import { fromPromise, waitFor } from 'xstate';
import type { Address } from 'viem';
import { DurableHost, topState } from '../actors/durable-host.ts';
import type { BlockWatcher } from '../tx/block-watcher.ts';
import type { ReorgGuard } from '../tx/reorg-guard.ts';
import type { NetworkRegistry } from '../chain/networks.ts';
import type { Logger } from '../log/logger.ts';
import { batchMachine, seatedRecord, seatedRecords, type BatchActor, type BatchMember, type MinedBatch, type SendResult, type Simulated } from './batch-machine.ts';
import type { ChainInspector, SimulationSender } from './chain-inspector.ts';
import type { StepResult } from './payment-machine.ts';
import type { BatchRecord, PaymentRecord } from './payment-record.ts';
import type { RelayerPool } from '../tx/relayer-pool.ts';
import type { SignedTx } from '../tx/trail.ts';
import { aggregateCall, callsOfBatch, indistinguishable, settledCalls } from './settlement-batch.ts';
import type { SchemeName, SettlementCall } from '../schemes/scheme.ts';
import { schemeOfPayload } from '../schemes/registry.ts';
import { awaitMined, sendDurably, type Courier, type SendOutcome } from '../tx/courier.ts';
import { err, ok, type Err, type Failure, type Ok } from '../protocol/result.ts';
import { isStoreUnavailable } from '../store/store-unavailable.ts';
import { GatewayReason, SettleFailureReason, type SettleReason } from '../verify/reasons.ts';

export type { MinedBatch } from './batch-machine.ts';

export interface BatcherOptions {
  /** The most payments one transaction carries; 1 turns batching off. */
  maxSize: number;
  /** How long the first payment of a batch waits for others to join; 0 turns batching off. */
  windowMs: number;
  /** Whether a batch leaves before its window ends when no payment is on its way to it (else it waits the window out or fills up). */
  eager: boolean;
  networks: NetworkRegistry;
  inspector(caip2: string): ChainInspector;
  relayers(caip2: string): RelayerPool;
  watcher(caip2: string): BlockWatcher;
  reorgs?(caip2: string): ReorgGuard | undefined;
  /** Who simulates a batch: the relayer that would send it, with the fees it would sign. */
  simulateFrom(caip2: string): SimulationSender | Promise<SimulationSender>;
  pollMs: number;
  log: Logger;
  /** Writes a batch's record and its members' records in one durable transaction: after a crash, all of them or none. */
  persist(batch: BatchRecord, members: PaymentRecord[]): Promise<void>;
  /** Why a member's call reverts (or reverted), in the reference's terms. */
  revertReason(record: PaymentRecord, call: SettlementCall): Promise<SettleReason>;
  /** Aborts every batch transaction awaited (the engine stops). */
  signal: AbortSignal;
  clockMs?: () => number;
}

/** Where a payment stands once its batch has been simulated. */
export type Seat =
  /** Its call is in the batch transaction, which is signed and stored durably with every member's record. */
  | { kind: 'batched'; record: PaymentRecord }
  /** No batch to ride in (it came alone, or the batch fell apart): it settles on its own. */
  | { kind: 'alone' }
  /** Its call reverts. */
  | { kind: 'refused'; reason: SettleReason; message: string };

export type { BatchActor };

/**
 * Batches settlements: verified payments of one chain and one kind (EIP-3009, or Permit2 through the exact-permit
 * proxy) that are ready within `windowMs` of each other go out as one `aggregate3` transaction, each call allowed to
 * fail on its own. Each batch is an actor of `batchMachine`, hosted durably: its record (the signed trail) and every
 * member's record naming it are written in one durable transaction before the transaction is first sent and at every
 * replacement. Members read where they stand from the batch actor's state (see `seat`, `sent`, `mined`).
 */
export class SettlementBatcher {
  readonly #o: BatcherOptions;
  readonly #host: DurableHost<typeof batchMachine, { batch: BatchRecord; members: PaymentRecord[] }>;
  /** The open batch of each chain and kind. */
  readonly #open = new Map<string, BatchActor>();
  /** Payments on their way to a batch (being verified or claiming their nonce), by batch key. */
  readonly #coming = new Map<string, number>();
  readonly #warned = new Set<string>();
  readonly #clock: () => number;

  constructor(opts: BatcherOptions) {
    this.#o = opts;
    this.#clock = opts.clockMs ?? Date.now;
    const machine = batchMachine.provide({
      actors: {
        simulate: fromPromise(({ input }) => this.#simulate(input.network, input.members)),
        send: fromPromise(({ input }) => this.#send(input.batch, input.calls, input.multicall, input.gas)),
        confirm: fromPromise(({ input }) => this.#confirm(input.batch)),
      },
    });
    this.#host = new DurableHost({
      machine,
      log: opts.log,
      // Written once the batch has a trail: with every member's record whenever the trail grows, alone at its end.
      durable: (snapshot, state) => {
        const { batch } = snapshot.context;
        if (batch.txs.length === 0) return undefined;
        const record = { ...batch, state, updatedAt: this.#clock() };
        const grown = snapshot.matches({ sending: 'signed' }) || snapshot.matches({ sent: 'replaced' });
        const members = grown ? seatedRecords(snapshot.context, state === 'sending' ? 'broadcasting' : 'inFlight') : [];
        // `sending` and `sent` of one trail share a key: the record written before the send already resumes at `sent`
        // (by its trail), so the send's success writes nothing; a replacement (a grown trail) is written before it goes.
        const step = state === 'sent' ? 'sending' : state;
        return { key: `${step}|${batch.txs.length}`, value: { batch: record, members } };
      },
      write: ({ batch, members }) => opts.persist(batch, members),
      done: (id, snapshot, state) => {
        for (const [key, open] of this.#open) if (open.getSnapshot().status !== 'active') this.#open.delete(key);
        if (state !== 'mined' && state !== 'dissolved') opts.log.debug('batch ended', { batch: id, state, failure: snapshot.context.failure });
      },
    });
  }

  /** Whether payments are batched at all. */
  get enabled(): boolean {
    return this.#o.maxSize > 1 && this.#o.windowMs > 0;
  }

  /**
   * A payment sets out on its way to a batch (+1: verification, then the nonce claim), or leaves it without joining
   * one (-1: refused, or not to be batched). An open batch waits for the payments on their way only: when none is,
   * it goes at once rather than at the end of its window. Joining ends the way too.
   */
  coming(record: PaymentRecord, delta: 1 | -1): void {
    const key = this.#count(record, delta);
    const open = this.#open.get(key);
    if (open && this.#o.eager && !this.#coming.has(key)) this.#close(key, open);
  }

  #count(record: PaymentRecord, delta: 1 | -1): string {
    const key = batchKey(record.network, schemeOfPayload(record.request.paymentPayload.payload).name);
    const count = Math.max(0, (this.#coming.get(key) ?? 0) + delta);
    if (count > 0) this.#coming.set(key, count);
    else this.#coming.delete(key);
    return key;
  }

  /** Puts a verified payment (its nonce claimed) into the open batch of its chain and kind; the batch it joined. */
  join(record: PaymentRecord, call: SettlementCall): BatchActor {
    const key = this.#count(record, -1);
    let open = this.#open.get(key);
    if (open && (open.getSnapshot().value !== 'open' || open.getSnapshot().context.members.some((m) => indistinguishable(m.call, call)))) {
      this.#close(key, open);
      open = undefined;
    }
    if (!open) {
      const now = this.#clock();
      const batch: BatchRecord = { id: randomUUID(), network: record.network, members: [], txs: [], createdAt: now, updatedAt: now };
      open = this.#host.spawn(batch.id, { batch, members: [], maxSize: this.#o.maxSize, windowMs: this.#o.windowMs });
      this.#open.set(key, open);
    }
    open.send({ type: 'join', member: { record, call } });
    if (open.getSnapshot().value !== 'open') this.#open.delete(key);
    else if (this.#o.eager && !this.#coming.has(key)) this.#close(key, open);
    return open;
  }

  /** Where the payment `id` stands in `batch`, once the batch has been simulated (and, seated, recorded). */
  async seat(batch: BatchActor, id: string): Promise<Seat> {
    const s = await waitFor(batch, (s) => s.status === 'done' || s.matches({ sending: 'signed' }) || s.matches('sent'), { timeout: Infinity });
    const refused = s.context.refused.find((r) => r.id === id);
    if (refused) return { kind: 'refused', reason: refused.reason, message: refused.message };
    if (s.context.alone.includes(id)) return { kind: 'alone' };
    const seated = seatedRecord(s.context, id, 'broadcasting');
    if (!seated || s.matches('failed')) {
      const failure = s.context.failure ?? { reason: SettleFailureReason.broadcastError, message: 'the batch ended before it was signed' };
      return { kind: 'refused', ...failure };
    }
    await this.#host.written(s.context.batch.id);
    return { kind: 'batched', record: seated };
  }

  /** Once seated: the batch transaction sent (the record with its trail), or why it was not. */
  async sent(batch: BatchActor, record: PaymentRecord): Promise<StepResult> {
    const s = await waitFor(batch, (s) => s.status === 'done' || s.matches('sent'), { timeout: Infinity });
    if (s.matches('failed')) {
      const failure = s.context.failure;
      return failure ? err(failure.reason, failure.message) : err(SettleFailureReason.broadcastError, 'the batch was not sent');
    }
    const seated = seatedRecord(s.context, record.id, 'broadcasting');
    return seated ? ok({ record: seated }) : err(SettleFailureReason.broadcastError, 'not a member of the batch sent');
  }

  /** The receipt of a batch transaction, for one of its members. */
  async mined(batch: BatchActor): Promise<MinedBatch> {
    const s = await waitFor(batch, (s) => s.status === 'done', { timeout: Infinity });
    if (!s.context.mined) throw new Error(`batch ${s.context.batch.id} ended ${topState(s.value)}, not mined`);
    return s.context.mined;
  }

  /** The transaction a batch is in now (its latest replacement). */
  currentTx(batch: BatchActor): SignedTx | undefined {
    return batch.getSnapshot().context.batch.txs.at(-1);
  }

  /** After a restart: carries a batch transaction to its receipt for its unfinished members, once for all of them. */
  resume(batch: BatchRecord, members: PaymentRecord[]): BatchActor {
    const existing = this.#host.get(batch.id);
    if (existing) return existing;
    const tx = batch.txs.at(-1) as SignedTx;
    const calls = callsOfBatch(tx.data);
    const seats: BatchMember[] = members.map((record) => ({ record, call: calls[batch.members.indexOf(record.id)] as SettlementCall }));
    return this.#host.spawn(batch.id, { batch, members: seats, maxSize: this.#o.maxSize, windowMs: this.#o.windowMs });
  }

  /** Every batch actor stops; what was written stays for the next start. */
  stop(): void {
    this.#open.clear();
    this.#host.stop();
  }

  #close(key: string, open: BatchActor): void {
    if (this.#open.get(key) === open) this.#open.delete(key);
    open.send({ type: 'close' });
  }

  /**
   * Whether the batch's calls all succeed, and the gas limit it is sent with. Once calls to its members' contracts
   * have been estimated on the network, the batch is first run once at the limit it would be sent with (the most gas
   * each call has taken there, with the margin): when it succeeds within that limit, that limit is the batch's.
   * Otherwise one estimate of the whole batch; when it reverts, one eth_call says which calls would.
   * (An estimate runs the batch several times to find its least gas: under a storm of payments on a busy node it took
   * 0.4 to 0.9 s of the 1 s block, where one run takes a tenth of that.)
   */
  async #simulate(network: string, members: BatchMember[]): Promise<Simulated> {
    const multicall = this.#o.networks.find(network)?.multicall;
    const inspector = this.#o.inspector(network);
    if (!multicall || !(await inspector.hasCode(multicall))) {
      if (!this.#warned.has(network)) this.#o.log.warn('no aggregate3 contract on this network: payments are settled one by one', { network, multicall });
      this.#warned.add(network);
      return { refused: [] };
    }
    const from = await this.#o.simulateFrom(network);
    const all = members.map((m) => m.call);
    const bound = inspector.gasBound(all);
    if (bound !== undefined) {
      const gas = gasLimitOf(TRANSACTION_BASE_GAS + bound);
      if (await inspector.succeedsWithin(aggregateCall(multicall, all, false), from, gas)) return { refused: [], batch: { multicall, gas } };
    }
    const whole = await inspector.simulate(aggregateCall(multicall, all, false), from, all);
    if (whole.ok) return { refused: [], batch: { multicall, gas: gasLimitOf(whole.value) } };
    const passes = await inspector.simulateBatch(multicall, all, from);
    const ok = members.filter((_, i) => passes[i] === true);
    const refused = await Promise.all(
      members.flatMap((m, i) =>
        passes[i] === true ? [] : [this.#o.revertReason(m.record, m.call).then((reason) => ({ id: m.record.id, reason, message: `simulation reverted (call ${i} of a batch of ${members.length})` }))],
      ),
    );
    if (ok.length < 2) return { refused };
    const rest = ok.map((m) => m.call);
    const estimate = await inspector.simulate(aggregateCall(multicall, rest, false), from, rest);
    // The chain moved between the reads: each payment is simulated again on its own.
    if (!estimate.ok) return { refused };
    return { refused, batch: { multicall, gas: gasLimitOf(estimate.value) } };
  }

  /** Signs the batch, has its trail recorded by the machine (the host writes it with every member's record), and only then sends it. */
  async #send(batch: BatchRecord, calls: SettlementCall[], multicall: Address, gas: bigint): Promise<SendResult> {
    const call = { ...aggregateCall(multicall, calls, true), gas };
    const sent = await sentOrWhyNot(sendDurably(this.#courier(batch.network, batch.id), call, batch.txs, (txs) => this.#host.record(batch.id, { type: 'trail', txs })));
    if (!sent.ok) return sent;
    this.#o.log.debug('batch sent', { network: batch.network, batch: batch.id, tx: sent.value.at(-1)?.hash, payments: calls.length });
    return ok(undefined);
  }

  /** One courier per batch transaction; a replacement is recorded by the machine before it is sent. */
  async #confirm(batch: BatchRecord): Promise<MinedBatch> {
    const m = await awaitMined(this.#courier(batch.network, batch.id), batch.txs, (txs) => this.#host.record(batch.id, { type: 'trail', txs }), this.#o.signal);
    const calls = callsOfBatch(m.tx.data);
    return { ...m, calls, settled: settledCalls(m.receipt, calls) };
  }

  #courier(network: string, batch: string): Courier {
    return courierOn(this.#o, network, this.#o.log.child({ batch }));
  }
}

/** The gas every transaction pays before its calldata and execution: a batch's bound adds it to its calls' shares. */
const TRANSACTION_BASE_GAS = 21_000n;

/** The gas limit a settlement (a batch or a lone payment) estimated at `estimate` is sent with: a margin for the chain moving between the two. */
export function gasLimitOf(estimate: bigint): bigint {
  return (estimate * 13n) / 10n + 10_000n;
}

/**
 * A durable send's outcome as a step's: the node's refusal, or a signed transaction the store could not record (the
 * database did not answer), which was never sent, so nothing was charged: `settlement_unavailable` (503, Retry-After).
 */
export async function sentOrWhyNot(send: Promise<SendOutcome>): Promise<Ok<SignedTx[]> | Err<Failure<SettleReason>>> {
  try {
    const sent = await send;
    return sent.ok ? sent : err(SettleFailureReason.broadcastRejected, sent.error.message);
  } catch (error) {
    if (!isStoreUnavailable(error)) throw error;
    return err(GatewayReason.settlementUnavailable, `the signed settlement could not be recorded, so it was not sent (${error.message})`);
  }
}

/** The courier of a chain's settlements: its relayers, client, block watcher and reorg guard (batches and single payments alike). */
export function courierOn(o: Pick<BatcherOptions, 'relayers' | 'inspector' | 'watcher' | 'reorgs' | 'pollMs'>, network: string, log: Courier['log']): Courier {
  return { pool: o.relayers(network), client: o.inspector(network).client, watcher: o.watcher(network), reorgs: o.reorgs?.(network), pollMs: o.pollMs, log };
}

/** Batches are per chain and per scheme of settlement. */
function batchKey(network: string, scheme: SchemeName): string {
  return `${network}|${scheme}`;
}
