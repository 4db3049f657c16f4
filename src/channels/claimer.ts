/**
 * Claims what payment channels have earned, and sweeps it to the merchants: every round (`intervalMs`) it reads the
 * settlement contract's withdrawal and refund events (`withdraw-watch.ts`) into the channel records, walks the
 * records, and on each network where it is due starts one claim actor (`claim-machine.ts`) over the channels with
 * accepted-but-unclaimed value (`planClaim`: pending withdrawals first, nearest deadline first, then the largest
 * exposure). Due: a channel with exposure has a payer's withdrawal pending (claimed at once), or holds half its
 * exposure cap, or the network's exposure reaches `exposureThreshold` or half its cap, or waited `maxAgeMs`. Each
 * round also reads what `claim-health.ts` needs to say whether the network may take vouchers (`blocked`).
 * Claim actors are hosted durably (`DurableHost`): a record is written whenever a trail grows or the state moves,
 * BEFORE a signed transaction is sent; a start resumes every unfinished record first (a claim broadcast before a
 * crash is carried to its receipt from its trail, never signed again). One claim at a time per network.
 */
import { randomUUID } from 'node:crypto';
import type { Hex } from 'viem';
import { fromPromise } from 'xstate';
import { DurableHost } from '../actors/durable-host.ts';
import type { Logger } from '../log/logger.ts';
import type { Metrics } from '../metrics/metrics.ts';
import { resend } from '../tx/courier.ts';
import { channelIdOf } from '../schemes/batch-settlement/channel-config.ts';
import { planClaim, type ClaimableChannel } from '../schemes/batch-settlement/claim-plan.ts';
import type { DurableCollection } from '../store/durable-collection.ts';
import type { ChannelReader } from './chain-channel.ts';
import type { ChannelLedger } from './channel-ledger.ts';
import { CLAIM_BLOCKS, claimBlockOf, fundingOf, logFundingChange, newClaimState, reportBlock, type ClaimBlock, type ClaimSafety, type NetworkClaimState } from './claim-health.ts';
import { exposureOf, pendingLive, resolvedPending, withChainState, withdrawFinalizableAt, type ChannelRecord } from './channel-record.ts';
import { CLAIM_FINALS, claimFinished, claimMachine, type ClaimRecord, type ClaimRow } from './claim-machine.ts';
import { confirmed, DROP_REASONS, recordClaimed, sendClaim, sendSweep, simulateClaim, simulationOf, type ClaimChain, type SimulationSender } from './claim-steps.ts';
import { advance, withdrawEvents } from './withdraw-watch.ts';

export interface ClaimerSettings {
  /** How often the records are walked and the withdrawal events read. */
  intervalMs: number;
  /** A network's accepted-but-unclaimed value (tokens' smallest units) at which it is claimed. */
  exposureThreshold: bigint;
  /** Exposure older than this (since the network's last claim, or the start) is claimed whatever its size. */
  maxAgeMs: number;
  /** The most channels one claim transaction carries. */
  maxRows: number;
  /** How far below the head the first scan for withdrawal events starts. */
  withdrawLookbackBlocks: number;
  /** When vouchers stop being taken on a network (see `claim-health.ts`). */
  safety: ClaimSafety;
}

export interface ClaimerOptions {
  settings: ClaimerSettings;
  ledger: ChannelLedger;
  /** The claim records: `open/{id}` while unfinished, `done/{id}` after. */
  records: DurableCollection<ClaimRecord>;
  /** The withdrawal watch's scanned height, by network. */
  cursors: DurableCollection<string>;
  /** Each network where channels are claimed: its chain parts (the engine's relayers, one nonce manager). */
  chains: ReadonlyMap<string, ClaimChain>;
  /** Who a claim is simulated as on a network: the relayer that would send it, with its fees. */
  simulateFrom(network: string): Promise<SimulationSender>;
  readChannel: ChannelReader;
  /** Whose pending write-aheads still stand (a boot: a run of a gateway process); a dead one's is charged here. */
  live(boot: string): boolean | Promise<boolean>;
  metrics: Metrics;
  log: Logger;
  now?: () => number;
}

const SWEEP_OUTCOMES = ['swept', 'failed'] as const;
/** How many times a channel record moved under the claimer is read again in one round. */
const MAX_RACES = 8;
const OPEN = 'open/';
const DONE = 'done/';

export class ChannelClaimer {
  readonly #o: ClaimerOptions;
  readonly #now: () => number;
  readonly #host: DurableHost<typeof claimMachine, ClaimRecord>;
  /** The claim running on each network. */
  readonly #busy = new Map<string, string>();
  /** When each network was last claimed (or the claimer started). */
  readonly #lastClaim = new Map<string, number>();
  /** What each network's rounds found: scan, failing claims, a claim running, exposure, relayer funding. */
  readonly #state = new Map<string, NetworkClaimState>();
  /** Networks asked to be claimed at the next round (a channel or the network reached its exposure cap). */
  readonly #asked = new Set<string>();
  /** A claim that stalled while the claimer runs (a record write kept racing): resumed at the network's next round. */
  readonly #stalled = new Map<string, ClaimRecord>();
  readonly #stopping = new AbortController();
  #timer: NodeJS.Timeout | undefined;
  #round: Promise<void> | undefined;

  constructor(opts: ClaimerOptions) {
    this.#o = opts;
    this.#now = opts.now ?? Date.now;
    for (const network of opts.chains.keys()) this.#state.set(network, newClaimState());
    const chain = (network: string): ClaimChain => {
      const c = opts.chains.get(network);
      if (!c) throw new Error(`channels are not claimed on ${network} here`);
      return c;
    };
    const persistTrail = (id: string, type: 'trail' | 'sweepTrail') => (txs: ClaimRecord['txs']) => this.#host.record(id, { type, txs });
    const machine = claimMachine.provide({
      actors: {
        simulate: fromPromise(async ({ input }) => simulateClaim(simulationOf(chain(input.record.network)), input.record.rows, await opts.simulateFrom(input.record.network))),
        send: fromPromise(({ input }) => sendClaim(chain(input.record.network), input.record, input.gas, input.authorizerSignature, persistTrail(input.record.id, 'trail'))),
        confirm: fromPromise(({ input }) => confirmed(chain(input.record.network), input.record.txs, persistTrail(input.record.id, 'trail'), this.#stopping.signal)),
        recordClaimed: fromPromise(({ input }) => recordClaimed(opts.ledger, input.record.rows, this.#now)),
        sweep: fromPromise(async ({ input }) => sendSweep(chain(input.record.network), input.record, await opts.simulateFrom(input.record.network), persistTrail(input.record.id, 'sweepTrail'))),
        confirmSweep: fromPromise(({ input }) => confirmed(chain(input.record.network), input.record.sweepTxs, persistTrail(input.record.id, 'sweepTrail'), this.#stopping.signal)),
      },
    });
    this.#host = new DurableHost({
      machine,
      log: opts.log,
      // Written once something is signed: whenever a trail grows (before that version is sent) or the state moves.
      durable: (snapshot, state) => {
        const { record } = snapshot.context;
        if (record.txs.length === 0) return undefined;
        // `sending` and `sent` of one trail share a key (the record written before the send already resumes at `sent`).
        const step = state === 'sent' ? 'sending' : state === 'sweepSent' ? 'sweeping' : state;
        return { key: `${step}|${record.txs.length}|${record.sweepTxs.length}|${record.claimTx ?? ''}`, value: { ...record, state, updatedAt: this.#now() } };
      },
      write: (record) => this.#write(record),
      done: (id, snapshot, state) => this.#finished(id, snapshot.context.record, state),
    });
  }

  /** Resumes every unfinished claim from its record, then claims every `intervalMs`. */
  async start(): Promise<void> {
    const started = this.#now();
    for (const network of this.#o.chains.keys()) this.#lastClaim.set(network, started);
    this.#o.metrics.declareChannelClaims([...this.#o.chains.keys()], { claimOutcomes: CLAIM_FINALS, sweepOutcomes: SWEEP_OUTCOMES, dropReasons: DROP_REASONS, blockReasons: CLAIM_BLOCKS });
    for await (const [key, record] of this.#o.records.entries(OPEN)) {
      if (claimFinished(record.state)) {
        await this.#write(record);
        continue;
      }
      if (!this.#o.chains.has(record.network)) {
        this.#o.log.warn('an unfinished channel claim is on a network not claimed here; it is left as it is', { claim: record.id, network: record.network, key });
        continue;
      }
      this.#o.log.info('resuming a channel claim', { claim: record.id, network: record.network, state: record.state, txs: record.txs.length });
      await this.#reclaimNonce(record);
      this.#spawn(record);
    }
    this.#timer = setInterval(() => void this.round(), this.#o.settings.intervalMs);
    this.#timer.unref();
    // The first round before any voucher is taken: the withdrawals pending now are known, the claims are healthy.
    await this.round();
  }

  /** Why vouchers may not be accepted on `network` now (`claim-health.ts`): the paywall takes none until it clears. */
  blocked(network: string): ClaimBlock | undefined {
    return claimBlockOf(this.#state.get(network), this.#o.settings.safety, { now: this.#now(), intervalMs: this.#o.settings.intervalMs });
  }

  claiming = (network: string): boolean => this.blocked(network) === undefined;
  /** How far the network's chain clock ran ahead of this process's at the last round (withdrawal deadlines are in it). */
  chainAheadMs = (network: string): number => this.#stateOf(network).aheadMs;

  /** A voucher of `amount` accepted on `network`: counted into its exposure until the next round reads it. */
  exposed(network: string, amount: bigint): void {
    const s = this.#stateOf(network);
    s.acceptedSince += amount;
    if (s.exposure + s.acceptedSince >= this.#o.settings.safety.maxNetworkExposure) this.claimSoon(network);
  }

  /** Claims `network` at a round now (a channel or the network reached its cap): vouchers wait for it. */
  claimSoon(network: string): void {
    if (!this.#o.chains.has(network) || this.#asked.has(network)) return;
    this.#asked.add(network);
    void this.round();
  }

  /** A network's state (a network not claimed here: a fresh one, kept nowhere). */
  #stateOf = (network: string): NetworkClaimState => this.#state.get(network) ?? newClaimState();

  /**
   * A resumed claim's transaction in flight is sent again as it was (the node may have lost it in the crash) and
   * counted against its relayer, whose nonce is read again: no settlement signed after this reuses its nonce.
   */
  async #reclaimNonce(record: ClaimRecord): Promise<void> {
    const trail = record.sweepTxs.length > 0 ? record.sweepTxs : record.claimTx === undefined ? record.txs : [];
    const tx = trail.at(-1);
    const chain = this.#o.chains.get(record.network);
    if (!tx || !chain) return;
    try {
      await resend(chain.courier, trail);
      chain.courier.pool.adopt(tx);
      if (chain.courier.pool.addresses.some((a) => a.toLowerCase() === tx.relayer.toLowerCase())) await chain.courier.pool.resync(tx.relayer);
    } catch (error) {
      this.#o.log.warn('could not send a resumed claim transaction again; its courier keeps trying', { claim: record.id, tx: tx.hash, error });
    }
  }

  /** One round now (rounds never overlap: a round asked for while one runs is that one). */
  round(): Promise<void> {
    this.#round ??= this.#claimRound()
      .catch((error: unknown) => this.#o.log.warn('a channel claim round failed; the next one tries again', { error }))
      .finally(() => (this.#round = undefined));
    return this.#round;
  }

  /** Stops the rounds and every claim actor (their records stay as written, for the next start to resume). */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#stopping.abort();
    await this.#round;
    this.#host.stop();
  }

  async #claimRound(): Promise<void> {
    if (this.#stopping.signal.aborted) return;
    const changed = new Map<string, { channels: Set<string>; scannedTo: bigint | undefined }>();
    // What is accepted from here on is in the records this round reads, or counted again after it (never lost).
    const acceptedBefore = new Map([...this.#o.chains.keys()].map((network) => [network, this.#stateOf(network).acceptedSince]));
    const lookback = BigInt(this.#o.settings.withdrawLookbackBlocks);
    for (const [network, chain] of this.#o.chains) {
      const watch = { network, client: chain.courier.client, cursors: this.#o.cursors, lookbackBlocks: lookback, maxBlocksPerRound: lookback > 5_000n ? lookback : 5_000n };
      try {
        const seen = await withdrawEvents(watch);
        changed.set(network, seen);
        if (seen.caughtUp) this.#stateOf(network).scannedAt = this.#now();
      } catch (error) {
        this.#o.log.warn('could not read channel withdrawal events', { network, error });
      }
    }
    const byNetwork = new Map<string, ChannelRecord[]>();
    const unrecorded = new Set<string>();
    for await (const { channelId, network } of this.#o.ledger.channels()) {
      if (!this.#o.chains.has(network)) continue;
      let held = await this.#o.ledger.read(channelId);
      if (!held) continue;
      if (changed.get(network)?.channels.has(channelId.toLowerCase())) {
        const moved = await this.#readChain(network, channelId);
        // Not recorded (the record kept moving): the scan is not advanced, the next round reads the events again.
        if (moved) held = moved;
        else unrecorded.add(network);
      }
      held = (await this.#resolveDead(held)) ?? held;
      const list = byNetwork.get(network) ?? [];
      list.push(held.record);
      byNetwork.set(network, list);
    }
    for (const [network, seen] of changed) if (!unrecorded.has(network)) await advance({ network, cursors: this.#o.cursors }, seen.scannedTo);
    for (const network of this.#o.chains.keys()) {
      const records = byNetwork.get(network) ?? [];
      const s = this.#stateOf(network);
      s.acceptedSince -= acceptedBefore.get(network) ?? 0n;
      await this.#readFunding(network, records.filter((r) => exposureOf(r) > 0n).length);
      this.#consider(network, records);
    }
  }

  /** Whether the relayers can pay for the pending claims (`claim-health.ts`); a failed reading counts as not funded. */
  async #readFunding(network: string, rows: number): Promise<void> {
    const s = this.#stateOf(network);
    const f = await fundingOf(this.#o.chains.get(network) as ClaimChain, rows, this.#o.settings.maxRows, this.#o.settings.safety.gasHeadroom, this.#now());
    logFundingChange(this.#o.log, network, s.funded, f);
    s.aheadMs = f.aheadMs ?? s.aheadMs;
    s.funded = f.ok;
    reportBlock(this.#o.metrics.channelVouchersBlocked, network, this.blocked(network));
  }

  #spawn(record: ClaimRecord): void {
    this.#busy.set(record.network, record.id);
    this.#stateOf(record.network).busySince = this.#now();
    this.#host.spawn(record.id, { record });
  }

  /** The record moved to the chain's view of the channel (a withdrawal or refund happened); undefined if it kept racing. */
  async #readChain(network: string, channelId: Hex) {
    const chain = await this.#o.readChannel(network, channelId);
    for (let race = 0; race < MAX_RACES; race++) {
      const held = await this.#o.ledger.read(channelId);
      if (!held) return undefined;
      const next = withChainState(held.record, chain, this.#now());
      if (next === held.record) return held;
      const moved = await this.#o.ledger.replace(held, next);
      if (moved) {
        this.#o.log.info('a payment channel changed on chain', { channel: channelId, balance: chain.balance, withdrawRequestedAt: chain.withdrawRequestedAt });
        return moved;
      }
    }
    return undefined;
  }

  /**
   * A voucher written ahead by a process that died before charging it is charged now, as the paywall would when the
   * channel is next paid (see `channel-record.ts`): it may have been served, and a payer who pays no more must not
   * keep it out of the claim. Undefined when the record moved meanwhile.
   */
  async #resolveDead(held: NonNullable<Awaited<ReturnType<ChannelLedger['read']>>>) {
    const pending = held.record.pending;
    if (!pending || (await pendingLive(pending, this.#o.live, this.#now()))) return held;
    return this.#o.ledger.replace(held, resolvedPending(held.record, this.#now()));
  }

  /** Updates the network's gauges, and starts a claim there if one is due and none runs. */
  #consider(network: string, records: readonly ChannelRecord[]): void {
    let exposure = 0n;
    const { safety } = this.#o.settings;
    // Asked (a cap reached), or a channel half way to its cap: claimed now, before vouchers must wait.
    let urgent = this.#asked.has(network);
    let nearest: number | undefined;
    const claimable: ClaimableChannel[] = [];
    let open = 0;
    for (const r of records) {
      if (BigInt(r.balance) > BigInt(r.totalClaimed)) open++;
      const deadline = withdrawFinalizableAt(r);
      if (deadline !== undefined && (nearest === undefined || deadline < nearest)) nearest = deadline;
      // What can still be claimed: the charges, up to the balance (a finalized withdrawal or a refund may have
      // lowered it below them; what is left is claimed rather than a row that would revert forever).
      const reachable = BigInt(r.charged) < BigInt(r.balance) ? BigInt(r.charged) : BigInt(r.balance);
      const e = exposureOf({ charged: reachable.toString(), totalClaimed: r.totalClaimed });
      if (e === 0n) continue;
      exposure += e;
      if (deadline !== undefined || e * 2n >= safety.maxChannelExposure) urgent = true;
      claimable.push({
        config: r.config,
        charged: reachable,
        signedMaxClaimable: BigInt(r.signedMaxClaimable),
        signature: r.signature,
        totalClaimed: BigInt(r.totalClaimed),
        withdrawRequestedAt: r.withdrawRequestedAt,
      });
    }
    this.#stateOf(network).exposure = exposure;
    if (exposure * 2n >= safety.maxNetworkExposure) urgent = true;
    this.#o.metrics.channelsOpen.labels(network).set(open);
    this.#o.metrics.channelUnclaimedExposure.labels(network).set(Number(exposure));
    this.#o.metrics.channelWithdrawDeadline.labels(network).set(nearest ?? 0);
    if (this.#busy.has(network) || this.#stopping.signal.aborted) return;
    const stalled = this.#stalled.get(network);
    if (stalled) {
      this.#stalled.delete(network);
      this.#spawn(stalled);
      return;
    }
    if (exposure === 0n) {
      // Nothing unclaimed: a failed claim protects nothing now (else, no claim ever due, it refused vouchers for good).
      this.#stateOf(network).failing = false;
      return;
    }
    const aged = this.#now() - (this.#lastClaim.get(network) ?? 0) >= this.#o.settings.maxAgeMs;
    if (!urgent && !aged && !this.#stateOf(network).failing && exposure < this.#o.settings.exposureThreshold) return;
    const plan = planClaim(claimable, this.#o.settings.maxRows);
    for (const r of plan.refused) this.#o.log.error('a channel record cannot be claimed as it stands', { network, payer: r.config.payer, reason: r.reason });
    const chainId = this.#o.chains.get(network)?.chainId as number;
    const byId = new Map(records.map((r) => [r.channelId.toLowerCase(), r]));
    const rows: ClaimRow[] = plan.rows.map((row) => {
      const channelId = channelIdOf(row.config, chainId);
      const record = byId.get(channelId.toLowerCase());
      return {
        channelId,
        config: row.config,
        maxClaimableAmount: row.maxClaimableAmount.toString(),
        signature: row.signature,
        totalClaimed: row.totalClaimed.toString(),
        exposure: (record ? row.totalClaimed - BigInt(record.totalClaimed) : 0n).toString(),
      };
    });
    if (rows.length === 0) return;
    const now = this.#now();
    const record: ClaimRecord = { id: randomUUID(), network, state: 'simulating', rows, dropped: [], txs: [], sweepTxs: [], createdAt: now, updatedAt: now };
    this.#o.log.info('claiming payment channels', { network, claim: record.id, rows: rows.length, exposure, urgent });
    this.#asked.delete(network);
    this.#spawn(record);
  }

  /** Writes a claim's record: under `open/` while unfinished, then under `done/` (and the open one removed). */
  async #write(record: ClaimRecord): Promise<void> {
    if (!claimFinished(record.state)) return this.#o.records.put(`${OPEN}${record.id}`, record);
    await this.#o.records.put(`${DONE}${record.id}`, record);
    await this.#o.records.remove(`${OPEN}${record.id}`);
  }

  #finished(id: string, record: ClaimRecord, state: string): void {
    const { network } = record;
    if (this.#busy.get(network) === id) {
      this.#busy.delete(network);
      this.#stateOf(network).busySince = undefined;
    }
    const m = this.#o.metrics;
    m.channelClaims.labels(network, state).inc();
    for (const d of record.dropped) m.channelClaimRowsDropped.labels(network, d.reason).inc();
    if (record.claimTx && state !== 'reverted') {
      m.channelClaimedVouchers.labels(network).inc(record.rows.length);
      this.#lastClaim.set(network, this.#now());
      this.#stateOf(network).failing = false;
    } else if (state === 'failed' || state === 'reverted' || state === 'stalled') {
      this.#stateOf(network).failing = true;
    }
    // Its record is open still: resumed where its trails say, with the same transactions.
    if (state === 'stalled' && !this.#stopping.signal.aborted && record.txs.length > 0) this.#stalled.set(network, { ...record, state });
    if (state === 'swept') m.channelSweeps.labels(network, 'swept').inc();
    if (state === 'sweepFailed') m.channelSweeps.labels(network, 'failed').inc();
    const level = state === 'swept' || state === 'empty' ? 'info' : 'warn';
    this.#o.log[level]('channel claim ended', {
      claim: id,
      network,
      state,
      rows: record.rows.length,
      dropped: record.dropped,
      claimTx: record.claimTx,
      sweepTx: record.sweepTx,
      failure: record.failure,
    });
  }
}
