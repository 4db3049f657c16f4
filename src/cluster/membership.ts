import { createHash } from 'node:crypto';
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { ConfigError, envBool, envInt, envString } from '../config/env.ts';
import type { Logger } from '../log/logger.ts';
import type { LeaseToken } from '../store/fence.ts';
import { type LeaseHeld, type LeaseRow, Leases, nodeLease, type Queryable } from '../store/postgres/leases.ts';

/**
 * A node's place in a cluster: the leases it holds (its own records, its relayer keys, the stock desk key), renewed
 * on a timer well inside their term, and the records of dead nodes it takes over.
 *
 * - Joining takes every lease or none. A lease another live node holds refuses the start, naming the holder; one this
 *   node's previous run holds (a restart after a crash) is waited for, at most one term.
 * - Renewal runs every third of the term. A lease found taken away, or not renewed for most of a term (the store does
 *   not answer), is lost: `onLost` is called and the node must stop signing (the command line exits).
 * - Fencing (`src/store/fence.ts`): each lease is held at an epoch, which a new holder raises. The node's writes
 *   carry its own node lease and epoch ({@link Membership.fence}) and are refused once another node took it over.
 *   Before any new signature or send, the relayer pool asks {@link Membership.signing}: past most of a term since
 *   the last renewal (by this process's monotonic clock, which a pause does not stop), the lease may have expired by
 *   the database's clock, and the node signs and sends nothing (logged once, `fenced`) until a renewal holds it again.
 * - With takeover on, each renewal also looks for node leases that expired: the first node to take one becomes
 *   responsible for that node's records and resumes them (`adopt`); it gives the lease back once they are finished.
 */
export interface ClusterConfig {
  /** This node's name, the same across its restarts (GATE402_NODE_ID, default the host name and a hash of the data directory). */
  nodeId: string;
  /** A lease's term (GATE402_LEASE_MS). */
  leaseMs: number;
  /** Whether this node finishes the records of a node whose lease expired (GATE402_TAKEOVER). */
  takeover: boolean;
  /** Bounds each lease statement: a third of a term, at most 5 s, so a store that does not answer is noticed in time. */
  timeoutMs: number;
}

const NODE_ID = /^[A-Za-z0-9._-]{1,64}$/;

export function clusterConfigFromEnv(env: NodeJS.ProcessEnv = process.env): ClusterConfig {
  // By default the host name and the data directory: the same across restarts, another for each node on one host.
  const dataDir = createHash('sha256')
    .update(resolve(envString(env, 'GATE402_DATA_DIR', 'var/data')))
    .digest('hex')
    .slice(0, 8);
  const nodeId = envString(
    env,
    'GATE402_NODE_ID',
    `${hostname()
      .slice(0, 55)
      .replace(/[^A-Za-z0-9._-]/g, '-')}-${dataDir}`,
  );
  if (!NODE_ID.test(nodeId)) throw new ConfigError(`GATE402_NODE_ID must be 1 to 64 letters, digits, '.', '_' or '-', got '${nodeId}'`);
  const leaseMs = envInt(env, 'GATE402_LEASE_MS', 15_000, { min: 300, max: 600_000 });
  return {
    nodeId,
    leaseMs,
    takeover: envBool(env, 'GATE402_TAKEOVER', true),
    timeoutMs: Math.min(5000, Math.floor(leaseMs / 3)),
  };
}

export interface MembershipOptions {
  db: Queryable;
  config: ClusterConfig;
  /** This run's id (the served claims carry it too). */
  boot: string;
  /** The leases besides the node's own: its relayer keys', the desk key's. */
  leases: readonly string[];
  log: Logger;
  /** A lease was lost: this node must stop signing at once. */
  onLost(why: string): void;
  sleep?: (ms: number) => Promise<void>;
}

/** Why a node may not join: a lease it needs is held by another live node. */
export class LeaseRefused extends Error {
  readonly held: LeaseHeld;
  constructor(held: LeaseHeld) {
    super(`${held.message}: another live node uses it. Give this node other keys (or another GATE402_NODE_ID), or stop node ${held.holder.node} first`);
    this.held = held;
  }
}

export class Membership {
  readonly #o: MembershipOptions;
  readonly #leases: Leases;
  /** Every lease this run holds: its own, and the node leases of dead nodes whose records it is finishing. */
  readonly #held = new Set<string>();
  /** The epoch of each lease held, as granted. */
  readonly #epochs = new Map<string, number>();
  /** Why this node is fenced now (its lease lost or possibly expired), logged once per spell. */
  #fenced: string | undefined;
  /** The last view of the node leases, and when it was read (performance.now()). */
  #view: { rows: LeaseRow[]; at: number } = { rows: [], at: 0 };
  #renewedAt = performance.now();
  #timer: NodeJS.Timeout | undefined;
  #adopter: ((node: string) => Promise<void>) | undefined;
  #stopped = false;
  #lost = false;

  private constructor(opts: MembershipOptions) {
    this.#o = opts;
    this.#leases = new Leases(opts.db, { node: opts.config.nodeId, boot: opts.boot }, { leaseMs: opts.config.leaseMs, timeoutMs: opts.config.timeoutMs });
  }

  /** Takes the node's leases (see the top of this file); throws {@link LeaseRefused} when another live node holds one. */
  static async join(opts: MembershipOptions): Promise<Membership> {
    const m = new Membership(opts);
    const own = nodeLease(opts.config.nodeId);
    const names = [own, ...opts.leases];
    const sleep = opts.sleep ?? ((ms: number) => new Promise((r) => setTimeout(r, ms)));
    const until = performance.now() + opts.config.leaseMs + 1000;
    for (;;) {
      // Its own records' lease first: held by its previous run (a restart after a crash), or by a node finishing
      // them, it frees within a term or once they are finished; the keys are free then too.
      const taken = await m.#leases.take(own);
      let held: LeaseHeld;
      if (taken.ok) {
        const keys = await m.#leases.takeAll(opts.leases);
        if (keys.ok) {
          m.#epochs.set(own, taken.value.epoch);
          for (const [name, epoch] of keys.value) m.#epochs.set(name, epoch);
          break;
        }
        await m.#leases.release([own]);
        held = keys.error;
      } else held = taken.error;
      const waits = held.name === own || held.holder.node === opts.config.nodeId;
      if (!waits || performance.now() > until) throw new LeaseRefused(held);
      opts.log.info('waiting for a lease of this node to be given back or to expire', { lease: held.name, holder: held.holder.node, waitMs: Math.ceil(held.expiresInMs) });
      await sleep(Math.max(100, Math.min(Math.ceil(held.expiresInMs) + 50, opts.config.leaseMs / 3)));
    }
    for (const n of names) m.#held.add(n);
    m.#renewedAt = performance.now();
    await m.#readView().catch(() => {});
    m.#schedule();
    opts.log.info('joined the cluster', { node: opts.config.nodeId, leases: names, leaseMs: opts.config.leaseMs });
    return m;
  }

  get nodeId(): string {
    return this.#o.config.nodeId;
  }

  /**
   * The lease this node's writes carry (`Store.fence`): its own node lease at the epoch it was granted. A node
   * finishing a dead node's records writes them under its own lease too: it took the dead node's lease (raising that
   * lease's epoch, which fences the dead node out), and renews every lease it holds in one statement.
   */
  fence = (): LeaseToken | undefined => {
    const name = nodeLease(this.#o.config.nodeId);
    const epoch = this.#epochs.get(name);
    return epoch === undefined ? undefined : { name, epoch };
  };

  /**
   * Undefined while this node may sign and send; else why not (`fenced: ...`). Its leases are lost, or the last
   * renewal is older than the term less a margin of a fifth (the lease may have expired by the database's clock:
   * after a pause, I/O callbacks run before the renewal timer does). Logged once each time it starts.
   */
  signing = (): string | undefined => {
    const since = performance.now() - this.#renewedAt;
    const why = this.#lost ? 'its leases were lost' : since > this.#o.config.leaseMs * 0.8 ? `no renewal for ${Math.round(since)} ms of a ${this.#o.config.leaseMs} ms term` : undefined;
    if (!why) {
      if (this.#fenced) this.#o.log.warn('lease renewed: this node signs and sends again', { lease: nodeLease(this.nodeId) });
      this.#fenced = undefined;
      return undefined;
    }
    if (!this.#fenced) this.#o.log.error(`fenced: this node signs and sends nothing until it holds its lease again (${why})`, { lease: nodeLease(this.nodeId), leases: [...this.#held] });
    this.#fenced = `fenced: ${why}`;
    return this.#fenced;
  };

  /** Every lease this run holds now. */
  get held(): ReadonlySet<string> {
    return this.#held;
  }

  /**
   * Resumes a dead node's records once this node took its lease; until one is given, no takeover is tried. It
   * resolves once they are resumed (not finished: see {@link finished}).
   */
  takeOverWith(adopt: (node: string) => Promise<void>): void {
    this.#adopter = adopt;
  }

  /** The records of `node` (a dead node taken over) are all final: its lease is given back. */
  async finished(node: string): Promise<void> {
    const name = nodeLease(node);
    if (node === this.nodeId || !this.#held.has(name)) return;
    this.#held.delete(name);
    this.#epochs.delete(name);
    await this.#leases.release([name]);
    this.#o.log.info("a dead node's records are all finished: its lease is given back", { node });
  }

  /**
   * Whether `boot` is a live node's run: one whose node lease it holds, unexpired. A boot seen live recently is live
   * (a dead node's claims wait a renewal longer, never the other way round); one not seen is read again first.
   */
  live = async (boot: string): Promise<boolean> => {
    if (boot === this.#o.boot) return true;
    const fresh = performance.now() - this.#view.at < this.#o.config.leaseMs / 3;
    if (fresh && this.#liveIn(boot)) return true;
    await this.#readView();
    return this.#liveIn(boot);
  };

  #liveIn(boot: string): boolean {
    const age = performance.now() - this.#view.at;
    return this.#view.rows.some((r) => r.boot === boot && r.expiresInMs - age > 0);
  }

  async #readView(): Promise<void> {
    const at = performance.now();
    const rows = await this.#leases.list('node:');
    this.#view = { rows, at };
  }

  #schedule(): void {
    if (this.#stopped || this.#lost) return;
    this.#timer = setTimeout(() => void this.#tick(), Math.max(50, Math.floor(this.#o.config.leaseMs / 3)));
    this.#timer.unref();
  }

  async #tick(): Promise<void> {
    const started = performance.now();
    try {
      const still = await this.#leases.renew();
      const gone = [...this.#held].filter((n) => !still.has(n));
      if (gone.length) return this.#lose(`leases taken by another node: ${gone.join(', ')}`);
      this.#renewedAt = started;
      await this.#readView();
      if (this.#o.config.takeover && this.#adopter) await this.#takeOver();
    } catch (error) {
      // Not renewed for most of a term: another node may take the leases any moment now.
      if (performance.now() - this.#renewedAt > this.#o.config.leaseMs * 0.8) return this.#lose(`could not renew the leases: ${(error as Error).message}`);
      this.#o.log.warn('could not renew the leases; trying again', { error });
    } finally {
      this.#schedule();
    }
  }

  async #takeOver(): Promise<void> {
    for (const row of this.#view.rows) {
      if (row.expiresInMs > 0 || this.#held.has(row.name) || this.#stopped) continue;
      const node = row.name.slice('node:'.length);
      const taken = await this.#leases.take(row.name);
      if (!taken.ok) continue;
      this.#held.add(row.name);
      this.#epochs.set(row.name, taken.value.epoch);
      this.#o.log.warn("a node's lease expired: finishing its records", { node, holder: row.node });
      try {
        await this.#adopter?.(node);
      } catch (error) {
        this.#o.log.error("could not resume a dead node's records; giving its lease back", { node, error });
        this.#held.delete(row.name);
        this.#epochs.delete(row.name);
        await this.#leases.release([row.name]).catch(() => {});
      }
    }
  }

  #lose(why: string): void {
    if (this.#lost || this.#stopped) return;
    this.#lost = true;
    this.#o.log.error(`fenced: this node lost its leases and stops signing (${why})`, { why, lease: nodeLease(this.nodeId) });
    this.#o.onLost(why);
  }

  /**
   * Stops renewing. The key leases are given back; the node leases (its own, and any dead node's it was finishing) are
   * expired instead, so that another node takes them at once and finishes whatever was left in flight.
   */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    const nodes = [...this.#held].filter((n) => n.startsWith('node:'));
    const keys = [...this.#held].filter((n) => !n.startsWith('node:'));
    await Promise.all([this.#leases.release(keys), this.#leases.expire(nodes)]).catch((error: unknown) => this.#o.log.warn('could not give the leases back; they expire by themselves', { error }));
    this.#held.clear();
  }
}
