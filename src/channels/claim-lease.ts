/**
 * One channel claimer per cluster. Every node accepts vouchers into the shared channel records, but only the node
 * holding the cluster-wide claim lease (a {@link RoleLease}) runs the claimer (`claimer.ts`): one withdrawal watch,
 * one claim per network at a time, so no voucher is in two claims and no claim is sent twice. The claimer's writes
 * (its claim records, the withdrawal watch's scanned heights, its word to the others) carry the claim lease at the
 * epoch it was granted, and its signatures and sends ask the lease first: a holder that paused past its term writes,
 * signs and sends nothing once a standby took over.
 *
 * When the holder dies its lease expires, by the database's clock; the first standby to take it starts its claimer,
 * which resumes every unfinished claim from its record (a claim or sweep written ahead and broadcast is sent again as
 * it was and carried to its receipt, never signed anew) and then claims what every node accepted.
 *
 * The paywall takes a voucher only while claims can be made (`ChannelClaimer.claiming`): the holder answers from its
 * claimer; a standby from what the holder last wrote of each network (on each renewal), while the lease is held by
 * a live node. Between a holder's death and a standby's takeover, no node takes vouchers (503, nothing charged).
 */
import { RoleLease, type RoleLeases } from '../cluster/role-lease.ts';
import type { Logger } from '../log/logger.ts';
import type { DurableCollection } from '../store/durable-collection.ts';
import type { FenceSource } from '../store/fence.ts';
import type { ClaimBlock } from './claim-health.ts';

/** The claim lease's name: one claimer for the cluster. */
export const CLAIM_LEASE = 'channel-claimer';
/** The collection the holder's word to the others is kept in, and its one key. */
export const CLAIMER_WORD = 'channel-claimer';
const WORD_KEY = 'holder';

/** What the claimer node tells the others: on which networks it claims now (vouchers may be accepted there). */
export interface ClaimerWord {
  node: string;
  networks: Record<string, boolean>;
  /** Why not, on the networks where it does not. */
  blocked?: Record<string, ClaimBlock>;
  /** How far each network's chain clock runs ahead of the holder's. */
  aheadMs?: Record<string, number>;
}

/** A claimer as the paywall and the gateway see it. */
export interface Claiming {
  claiming(network: string): boolean;
  /** Why no voucher may be taken on `network` now (absent: `claiming` alone says). */
  blocked?(network: string): ClaimBlock | undefined;
  /** A voucher of `amount` was accepted on `network` (counted into its exposure until the claimer's next round). */
  exposed?(network: string, amount: bigint): void;
  /** A channel or the network reached its exposure cap: claim it now. */
  claimSoon?(network: string): void;
  /** How far `network`'s chain clock runs ahead of this process's (0 if not). */
  chainAheadMs?(network: string): number;
  stop(): Promise<void>;
}

/** The lease's parts this node's claimer is fenced with: its writes carry `fence`, its sends ask `signing`. */
export type ClaimFence = Pick<RoleLease, 'fence' | 'signing'>;

export interface ClaimRoleOptions {
  leases: RoleLeases;
  /** The lease's term (ms), the cluster's. */
  termMs: number;
  /** This node's id (named in its word to the others). */
  node: string;
  /** The networks claimed. */
  networks: readonly string[];
  /** The collection of the holder's word, its writes fenced by `fence`. */
  word(fence: FenceSource): DurableCollection<ClaimerWord>;
  /** Starts this node's claimer (it resumes the unfinished claims first), fenced by the lease. */
  start(lease: ClaimFence): Promise<Claiming>;
  /** The lease was lost while held (the claimer is stopped already). */
  onLost?(why: string): void;
  log: Logger;
}

export class ClaimRole implements Claiming {
  readonly #o: ClaimRoleOptions;
  readonly #lease: RoleLease;
  readonly #word: DurableCollection<ClaimerWord>;
  #claimer: Claiming | undefined;
  /** What this node last read, standing by: whether a live node holds the lease, and its word. */
  #holder: ClaimerWord & { live: boolean } = { live: false, node: '', networks: {} };

  constructor(opts: ClaimRoleOptions) {
    this.#o = opts;
    this.#word = opts.word(() => this.#lease.fence());
    this.#lease = new RoleLease('channel claimer', {
      leases: opts.leases,
      name: CLAIM_LEASE,
      termMs: opts.termMs,
      activate: async () => {
        this.#claimer = await opts.start(this.#lease);
        await this.#tell();
      },
      renewed: () => this.#tell(),
      standingBy: async (live) => {
        const word = live ? await this.#word.get(WORD_KEY) : undefined;
        this.#holder = { live, node: '', networks: {}, ...word };
      },
      onLost: (why) => {
        const claimer = this.#claimer;
        this.#claimer = undefined;
        this.#holder = { live: false, node: '', networks: {} };
        void claimer?.stop();
        opts.onLost?.(why);
      },
      log: opts.log,
    });
  }

  /** Takes the lease if it is free (then resumes and starts the claimer here) or stands by; then tries on every tick. */
  async start(): Promise<void> {
    await this.#lease.start();
    await this.#lease.settled();
    this.#o.log.info(this.#lease.active ? 'this node runs the channel claimer' : 'channel claimer standing by: another node holds the claim lease and claims what this node accepts');
  }

  /** Whether this node runs the claimer now. */
  get active(): boolean {
    return this.#lease.active && this.#claimer !== undefined;
  }

  claiming(network: string): boolean {
    return this.blocked(network) === undefined;
  }

  /**
   * The holder: its claimer's answer, while its lease lets it sign. A standby: the holder's last word, while a live
   * node holds the lease (`no_live_claimer` otherwise: nobody would claim what is accepted).
   */
  blocked(network: string): ClaimBlock | undefined {
    const claimer = this.#claimer;
    if (claimer) {
      if (this.#lease.signing() !== undefined) return 'no_live_claimer';
      return claimer.blocked ? claimer.blocked(network) : claimer.claiming(network) ? undefined : 'claims_behind';
    }
    if (!this.#holder.live) return 'no_live_claimer';
    return this.#holder.networks[network] === true ? undefined : (this.#holder.blocked?.[network] ?? 'claims_behind');
  }

  chainAheadMs(network: string): number {
    const claimer = this.#claimer;
    return (claimer ? claimer.chainAheadMs?.(network) : this.#holder.aheadMs?.[network]) ?? 0;
  }

  exposed(network: string, amount: bigint): void {
    this.#claimer?.exposed?.(network, amount);
  }

  claimSoon(network: string): void {
    this.#claimer?.claimSoon?.(network);
  }

  /** The holder's word: on which networks it claims (a standby reads it on each of its tries). */
  async #tell(): Promise<void> {
    const claimer = this.#claimer;
    if (!claimer) return;
    const blocked: Record<string, ClaimBlock> = {};
    const aheadMs: Record<string, number> = {};
    for (const n of this.#o.networks) {
      const why = claimer.blocked?.(n);
      if (why) blocked[n] = why;
      aheadMs[n] = claimer.chainAheadMs?.(n) ?? 0;
    }
    await this.#word.put(WORD_KEY, { node: this.#o.node, networks: Object.fromEntries(this.#o.networks.map((n) => [n, claimer.claiming(n)])), blocked, aheadMs });
  }

  /** Stops trying, stops the claimer (its records stay for the next holder), and gives the lease back at once. */
  async stop(): Promise<void> {
    await this.#lease.stop();
    await this.#claimer?.stop();
    this.#claimer = undefined;
    await this.#lease.release();
  }
}
