import { randomUUID } from 'node:crypto';
import type { Address } from 'viem';
import type { BlockWatcher } from '../chain/block-watcher.ts';
import type { NetworkRegistry } from '../chain/networks.ts';
import type { Logger } from '../log/logger.ts';
import type { ChainInspector } from './chain-inspector.ts';
import type { StepResult } from './payment-machine.ts';
import type { BatchRecord, PaymentRecord } from './payment-record.ts';
import type { RelayerPool, SignedTx } from './relayer-pool.ts';
import { aggregateCall, callsOfBatch, indistinguishable, settledCalls } from './settlement-batch.ts';
import type { SchemeName, SettlementCall } from '../schemes/scheme.ts';
import { schemeOfPayload } from '../schemes/registry.ts';
import { awaitMined, sendDurably, type Courier, type Mined } from './tx-courier.ts';

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
  simulateFrom(caip2: string): Address;
  pollMs: number;
  log: Logger;
  /** Writes a batch's record and its members' records in one durable transaction: after a crash, all of them or none. */
  persist(batch: BatchRecord, members: PaymentRecord[]): Promise<void>;
  /** Why a member's call reverts (or reverted), in the reference's terms. */
  revertReason(record: PaymentRecord, call: SettlementCall): Promise<string>;
  /** Aborts every batch transaction awaited (the engine stops). */
  signal: AbortSignal;
}

/** Where a payment stands once its batch has been simulated. */
export type Seat =
  /** Its call is in the batch transaction, which is signed and stored durably with every member's record. */
  | { kind: 'batched'; record: PaymentRecord }
  /** No batch to ride in (it came alone, or the batch fell apart): it settles on its own. */
  | { kind: 'alone' }
  /** Its call reverts. */
  | { kind: 'refused'; reason: string; message: string };

/** A mined batch: its receipt, its calls as the transaction made them, and which of them settled (once for all members). */
export interface MinedBatch extends Mined {
  calls: Array<SettlementCall | undefined>;
  settled: boolean[];
}

export interface Joined {
  seat: Promise<Seat>;
  /** Once seated in a batch: the batch transaction sent (the record with its trail), or why it was not. */
  sent: Promise<StepResult>;
}

interface Member {
  record: PaymentRecord;
  call: SettlementCall;
  seat: (seat: Seat) => void;
  sent: (result: StepResult) => void;
}

interface OpenBatch {
  network: string;
  members: Member[];
  timer: NodeJS.Timeout;
}

/**
 * Batches settlements: verified payments of one chain and one kind (EIP-3009, or Permit2 through the exact-permit
 * proxy) that are ready within `windowMs` of each other go out as one `aggregate3` transaction, each call allowed to
 * fail on its own. The batch is simulated first (an estimate of the whole; when that reverts, one eth_call says which
 * calls would) and a payment whose call reverts is refused alone and left out. Before the transaction is first sent,
 * a batch record (the signed trail) and every member's record naming it (batch id, call index, current transaction)
 * are written in one durable transaction; one courier then carries it to its receipt for every member, and each
 * member reads its own result from that receipt (see `settledCalls`).
 */
export class SettlementBatcher {
  readonly #o: BatcherOptions;
  readonly #open = new Map<string, OpenBatch>();
  /** Payments on their way to a batch (being verified or claiming their nonce), by batch key. */
  readonly #coming = new Map<string, number>();
  readonly #inFlight = new Map<string, { mined: Promise<MinedBatch>; waiting: number }>();
  readonly #warned = new Set<string>();

  constructor(opts: BatcherOptions) {
    this.#o = opts;
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

  /** Puts a verified payment (its nonce claimed) into the open batch of its chain and kind. */
  join(record: PaymentRecord, call: SettlementCall): Joined {
    let seat!: (s: Seat) => void;
    let sent!: (r: StepResult) => void;
    const joined: Joined = { seat: new Promise((r) => (seat = r)), sent: new Promise((r) => (sent = r)) };
    const key = this.#count(record, -1);
    let open = this.#open.get(key);
    if (open?.members.some((m) => indistinguishable(m.call, call))) {
      this.#close(key, open);
      open = undefined;
    }
    if (!open) {
      const batch: OpenBatch = { network: record.network, members: [], timer: setTimeout(() => this.#close(key, batch), this.#o.windowMs) };
      this.#open.set(key, (open = batch));
    }
    open.members.push({ record, call, seat, sent });
    if (open.members.length >= this.#o.maxSize || (this.#o.eager && !this.#coming.has(key))) this.#close(key, open);
    return joined;
  }

  /** The receipt of a batch transaction in flight, for one of its members (each asks once). */
  mined(batchId: string): Promise<MinedBatch> {
    const entry = this.#inFlight.get(batchId);
    if (!entry) return Promise.reject(new Error(`batch ${batchId} is not in flight here`));
    if (--entry.waiting <= 0) this.#inFlight.delete(batchId);
    return entry.mined;
  }

  /** After a restart: carries a batch transaction to its receipt for its unfinished members. */
  resume(batch: BatchRecord, members: PaymentRecord[]): void {
    this.#carry(batch, members);
  }

  /** Open batches are dropped (their members' actors stop with the engine). */
  stop(): void {
    for (const open of this.#open.values()) clearTimeout(open.timer);
    this.#open.clear();
  }

  #close(key: string, open: OpenBatch): void {
    clearTimeout(open.timer);
    if (this.#open.get(key) === open) this.#open.delete(key);
    this.#settle(open.network, open.members).catch((err: unknown) => {
      // Only reached before anything was signed (sending reports its own failures): nothing is in flight.
      this.#o.log.error('batch failed before it was sent', { network: open.network, error: err });
      for (const m of open.members) {
        m.seat({ kind: 'refused', reason: 'simulation_error', message: String(err) });
        m.sent({ ok: false, reason: 'broadcast_error', message: String(err) });
      }
    });
  }

  async #settle(network: string, members: Member[]): Promise<void> {
    const alone = (ms: Member[]) => ms.forEach((m) => m.seat({ kind: 'alone' }));
    if (members.length < 2) return alone(members);
    const multicall = this.#o.networks.find(network)?.multicall;
    const inspector = this.#o.inspector(network);
    if (!multicall || !(await inspector.hasCode(multicall))) {
      if (!this.#warned.has(network)) this.#o.log.warn('no aggregate3 contract on this network: payments are settled one by one', { network, multicall });
      this.#warned.add(network);
      return alone(members);
    }
    const from = this.#o.simulateFrom(network);
    const all = members.map((m) => m.call);
    // Usually every call goes through: then one estimate of the batch (which reverts if any call does) is all.
    const whole = await inspector.simulate(aggregateCall(multicall, all, false), from);
    if (whole.ok) return this.#send(network, multicall, members, whole.gas);
    const passes = await inspector.simulateBatch(multicall, all, from);
    const ok = members.filter((_, i) => passes[i] === true);
    const refused = members.filter((_, i) => passes[i] !== true);
    await Promise.all(
      refused.map(async (m) => {
        const reason = await this.#o.revertReason(m.record, m.call);
        m.seat({ kind: 'refused', reason, message: `simulation reverted (call ${members.indexOf(m)} of a batch of ${members.length})` });
      }),
    );
    if (ok.length < 2) return alone(ok);
    const estimate = await inspector.simulate(aggregateCall(multicall, ok.map((m) => m.call), false), from);
    // The chain moved between the reads: each payment is simulated again on its own.
    if (!estimate.ok) return alone(ok);
    await this.#send(network, multicall, ok, estimate.gas);
  }

  /** Signs the batch, stores its record and every member's record naming it in one durable write, and only then sends it. */
  async #send(network: string, multicall: Address, members: Member[], gasEstimate: bigint): Promise<void> {
    const id = randomUUID();
    const now = Date.now();
    const batchOf = (txs: SignedTx[]): BatchRecord => ({ id, network, members: members.map((m) => m.record.id), txs, createdAt: now, updatedAt: now });
    const records = (txs: SignedTx[]) => members.map((m, index): PaymentRecord => ({ ...m.record, state: 'broadcasting', batch: { id, index, tx: (txs.at(-1) as SignedTx).hash } }));
    const call = { ...aggregateCall(multicall, members.map((m) => m.call), true), gas: (gasEstimate * 13n) / 10n + 10_000n };
    let seated = false;
    let sent: Awaited<ReturnType<typeof sendDurably>>;
    try {
      sent = await sendDurably(this.#courier(network, id), call, [], async (txs) => {
        const written = records(txs);
        await this.#o.persist(batchOf(txs), written);
        if (seated) return;
        seated = true;
        members.forEach((m, i) => m.seat({ kind: 'batched', record: written[i] as PaymentRecord }));
      });
    } catch (err) {
      // Signing or the first durable write failed: nothing was sent.
      const failure = { ok: false as const, reason: 'broadcast_error', message: String(err) };
      for (const m of members) {
        if (!seated) m.seat({ kind: 'refused', ...failure });
        m.sent(failure);
      }
      return;
    }
    if (!sent.ok) {
      for (const m of members) m.sent({ ok: false, reason: 'broadcast_rejected', message: sent.message });
      return;
    }
    const final = records(sent.txs);
    this.#o.log.debug('batch sent', { network, batch: id, tx: sent.txs.at(-1)?.hash, payments: members.length });
    this.#carry(batchOf(sent.txs), final);
    members.forEach((m, i) => m.sent({ ok: true, record: final[i] as PaymentRecord }));
  }

  /** One courier per batch transaction; a replacement is written into the batch record and its members' at once. */
  #carry(batch: BatchRecord, members: PaymentRecord[]): void {
    const persist = (trail: SignedTx[]) =>
      this.#o.persist(
        { ...batch, txs: trail, updatedAt: Date.now() },
        members.map((r) => ({ ...r, state: 'inFlight', batch: { ...(r.batch as NonNullable<PaymentRecord['batch']>), tx: (trail.at(-1) as SignedTx).hash } })),
      );
    const mined = awaitMined(this.#courier(batch.network, batch.id), batch.txs, persist, this.#o.signal).then((m) => {
      const calls = callsOfBatch(m.tx.data);
      return { ...m, calls, settled: settledCalls(m.receipt, calls) };
    });
    mined.catch(() => {}); // each member hears of a failure through `mined()`
    this.#inFlight.set(batch.id, { mined, waiting: members.length });
  }

  #courier(network: string, batch: string): Courier {
    return { pool: this.#o.relayers(network), client: this.#o.inspector(network).client, watcher: this.#o.watcher(network), pollMs: this.#o.pollMs, log: this.#o.log.child({ batch }) };
  }
}

/** Batches are per chain and per scheme of settlement. */
function batchKey(network: string, scheme: SchemeName): string {
  return `${network}|${scheme}`;
}
