/**
 * Cooperative refunds of payment channels, as durable actors (`refund-machine.ts`), hosted like the claim actors
 * (`DurableHost`): a refund's record is written before its actor starts (`open/{id}`: while it is open, its hold on
 * the channel stands), again with its signed transaction BEFORE that is sent, and moved to `done/{id}` when it ends.
 * A start resumes every open record: a refund broadcast before a crash is carried to its receipt from its trail,
 * never signed again (and its refund nonce would refuse a second one anyway). A refund refused before anything was
 * signed for the chain leaves no record (a flood of refused refunds writes nothing that stays).
 */
import { randomUUID } from 'node:crypto';
import type { Hex } from 'viem';
import { fromPromise } from 'xstate';
import { DurableHost } from '../actors/durable-host.ts';
import { BOOT } from '../cluster/boot.ts';
import type { Logger } from '../log/logger.ts';
import type { Metrics } from '../metrics/metrics.ts';
import type { ChannelConfig } from '../schemes/batch-settlement/channel-config.ts';
import { resend } from '../tx/courier.ts';
import type { DurableCollection } from '../store/durable-collection.ts';
import type { ChannelReader } from './chain-channel.ts';
import type { ChannelLedger } from './channel-ledger.ts';
import { confirmed, type ClaimChain, type SimulationSender } from './claim-steps.ts';
import { REFUND_FINALS, refundFinished, refundMachine, type RefundRecord } from './refund-machine.ts';
import { prepareRefund, recordRefund, releaseHold, sendRefund, type RefundParts } from './refund-steps.ts';

export interface RefundDeskOptions {
  ledger: ChannelLedger;
  /** The refund records: `open/{id}` while unfinished, `done/{id}` after. */
  records: DurableCollection<RefundRecord>;
  /** Each network where channels are refunded: its chain parts (the engine's relayers, one nonce manager). */
  chains: ReadonlyMap<string, ClaimChain>;
  /** Who a refund is simulated as on a network: the relayer that would send it, with its fees. */
  simulateFrom(network: string): Promise<SimulationSender>;
  /** The chain as it is now (unbudgeted: a refund's amount is decided from it). */
  readChannel: ChannelReader;
  live(boot: string): boolean | Promise<boolean>;
  /** The smallest partial refund, in the token's smallest units. */
  minRefund: bigint;
  metrics: Metrics;
  log: Logger;
  now?: () => number;
}

/** What a refund request asks: the channel, the payer's zero-charge voucher, and how much (absent: everything left). */
export interface RefundAsk {
  network: string;
  channelId: Hex;
  config: ChannelConfig;
  voucher: { maxClaimableAmount: bigint; signature: Hex };
  requested?: bigint;
}

/** A refund's record as it ended, or as it stood when the caller's wait ran out (`waiting`: it goes on). */
export type RefundAnswer = { record: RefundRecord; waiting: boolean };

/** How long a refund that stalled while the desk runs waits before it is resumed. */
const RESUME_STALLED_MS = 5_000;
const OPEN = 'open/';
const DONE = 'done/';

export class ChannelRefunds {
  readonly #o: RefundDeskOptions;
  readonly #now: () => number;
  readonly #host: DurableHost<typeof refundMachine, RefundRecord>;
  readonly #stopping = new AbortController();

  constructor(opts: RefundDeskOptions) {
    this.#o = opts;
    this.#now = opts.now ?? Date.now;
    const chain = (network: string): ClaimChain => {
      const c = opts.chains.get(network);
      if (!c) throw new Error(`channels are not refunded on ${network} here`);
      return c;
    };
    const parts: RefundParts = {
      ledger: opts.ledger,
      readChannel: opts.readChannel,
      live: opts.live,
      open: (id) => this.open(id),
      minRefund: opts.minRefund,
      now: this.#now,
    };
    const persistTrail = (id: string) => (txs: RefundRecord['txs']) => this.#host.record(id, { type: 'trail', txs });
    const machine = refundMachine.provide({
      actors: {
        prepare: fromPromise(async ({ input }) => prepareRefund(chain(input.record.network), parts, input.record, await opts.simulateFrom(input.record.network))),
        send: fromPromise(({ input }) => sendRefund(chain(input.record.network), input.record, input.gas, input.data, persistTrail(input.record.id))),
        confirm: fromPromise(({ input }) => confirmed(chain(input.record.network), input.record.txs, persistTrail(input.record.id), this.#stopping.signal)),
        recordRefund: fromPromise(({ input }) => recordRefund(chain(input.record.network), parts, input.record)),
      },
    });
    this.#host = new DurableHost({
      machine,
      log: opts.log,
      // Written once something is signed (the open record written before the start holds the channel until then).
      durable: (snapshot, state) => {
        const { record } = snapshot.context;
        if (record.txs.length === 0 && state !== 'refused' && state !== 'failed') return undefined;
        const step = state === 'sent' ? 'sending' : state;
        return { key: `${step}|${record.txs.length}|${record.tx ?? ''}`, value: { ...record, state, updatedAt: this.#now() } };
      },
      write: (record) => this.#write(record),
      done: (id, snapshot, state) => void this.#finished(id, snapshot.context.record, state),
    });
  }

  /**
   * Resumes every unfinished refund from its record, but those of another boot still live (a cluster node running
   * them); one taken over names this boot from then on.
   */
  async start(): Promise<void> {
    this.#o.metrics.declareChannelRefunds([...this.#o.chains.keys()], REFUND_FINALS);
    for await (const [, record] of this.#o.records.entries(OPEN)) {
      if (refundFinished(record.state)) {
        await this.#write(record);
        continue;
      }
      if (record.boot !== undefined && record.boot !== BOOT && (await this.#o.live(record.boot))) continue; // another node's, still running it
      if (!this.#o.chains.has(record.network)) {
        this.#o.log.warn('an unfinished channel refund is on a network not refunded here; it is left as it is', { refund: record.id, network: record.network });
        continue;
      }
      this.#o.log.warn('resuming a channel refund', { refund: record.id, network: record.network, state: record.state, txs: record.txs.length, boot: record.boot });
      const taken = { ...record, boot: BOOT };
      await this.#o.records.put(`${OPEN}${record.id}`, taken);
      await this.#resend(taken);
      this.#host.spawn(record.id, { record: taken });
    }
  }

  /**
   * Refunds the channel as asked: the record written (the hold's witness), the actor started, and its end awaited up
   * to `waitMs` (then the answer says it goes on).
   */
  async refund(ask: RefundAsk, waitMs: number): Promise<RefundAnswer> {
    const now = this.#now();
    const record: RefundRecord = {
      id: randomUUID(),
      network: ask.network,
      channelId: ask.channelId,
      config: ask.config,
      voucher: { maxClaimableAmount: ask.voucher.maxClaimableAmount.toString(), signature: ask.voucher.signature },
      ...(ask.requested !== undefined ? { requested: ask.requested.toString() } : {}),
      boot: BOOT,
      state: 'preparing',
      txs: [],
      createdAt: now,
      updatedAt: now,
    };
    await this.#o.records.put(`${OPEN}${record.id}`, record);
    const actor = this.#host.spawn(record.id, { record });
    return this.#host.answer(actor, waitMs, (snapshot, passed) => {
      const state = String(snapshot.value);
      const ended = snapshot.status === 'done';
      if (!ended && !passed) return undefined;
      return { record: { ...snapshot.context.record, state: ended ? state : snapshot.context.record.state }, waiting: !ended };
    });
  }

  /** Whether the refund `id` is still under way (its record open): a channel hold of one that is not is stale. */
  async open(id: string): Promise<boolean> {
    return (await this.#o.records.get(`${OPEN}${id}`)) !== undefined;
  }

  stop(): void {
    this.#stopping.abort();
    this.#host.stop();
  }

  /** A resumed refund's transaction sent again as it was (the node may have lost it), its relayer's nonce read again. */
  async #resend(record: RefundRecord): Promise<void> {
    const tx = record.tx === undefined ? record.txs.at(-1) : undefined;
    const chain = this.#o.chains.get(record.network);
    if (!tx || !chain) return;
    try {
      await resend(chain.courier, record.txs);
      chain.courier.pool.adopt(tx);
      if (chain.courier.pool.addresses.some((a) => a.toLowerCase() === tx.relayer.toLowerCase())) await chain.courier.pool.resync(tx.relayer);
    } catch (error) {
      this.#o.log.warn('could not send a resumed refund transaction again; its courier keeps trying', { refund: record.id, tx: tx.hash, error });
    }
  }

  /** Open while unfinished; finished: under `done/` if anything was signed for the chain, and the open one removed. */
  async #write(record: RefundRecord): Promise<void> {
    if (!refundFinished(record.state)) return this.#o.records.put(`${OPEN}${record.id}`, record);
    if (record.txs.length > 0) await this.#o.records.put(`${DONE}${record.id}`, record);
    await this.#o.records.remove(`${OPEN}${record.id}`);
  }

  async #finished(id: string, record: RefundRecord, state: string): Promise<void> {
    const m = this.#o.metrics;
    m.channelRefunds.labels(record.network, state).inc();
    if (state === 'refunded') m.channelRefunded.labels(record.network).inc(Number(record.refunded ?? 0));
    // A refund that moved nothing lets the channel go (`refunded` let it go as it recorded; `stalled` resumes).
    if (state === 'refused' || state === 'failed' || state === 'reverted') {
      try {
        await this.#host.landed(id);
        const onchain = state === 'reverted' ? await this.#o.readChannel(record.network, record.channelId).catch(() => undefined) : undefined;
        await releaseHold({ ledger: this.#o.ledger, now: this.#now }, record, onchain);
      } catch (error) {
        this.#o.log.error('could not release a channel after its refund ended; it is released when next refunded or paid', { refund: id, channel: record.channelId, error });
      }
    }
    // Stalled while the desk runs (a record write failed): its record is open still, resumed where its trail says.
    if (state === 'stalled' && !this.#stopping.signal.aborted) {
      const again = setTimeout(() => {
        if (!this.#stopping.signal.aborted) this.#host.spawn(id, { record: { ...record, state } });
      }, RESUME_STALLED_MS);
      again.unref();
    }
    const level = state === 'refunded' || state === 'refused' ? 'info' : 'warn';
    this.#o.log[level]('channel refund ended', {
      refund: id,
      network: record.network,
      channel: record.channelId,
      state,
      reason: record.reason,
      refunded: record.refunded,
      tx: record.tx,
      failure: record.failure,
    });
  }
}
