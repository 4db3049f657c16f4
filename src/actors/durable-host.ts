import { createActor, type Actor, type AnyStateMachine, type EventFrom, type InputFrom, type SnapshotFrom, type StateValue } from 'xstate';
import type { Logger } from '../log/logger.ts';
import { isFenced } from '../store/fence.ts';
import { statePath } from '../metrics/metrics.ts';

/** What a snapshot stands for in the store: written whenever `key` changes; `undefined` when nothing is to be written. */
export interface Durable<V> {
  key: string;
  value: V;
}

export interface DurableHostOptions<M extends AnyStateMachine, V> {
  /** The machine with its steps provided: every actor of this host runs it. */
  machine: M;
  /**
   * What the snapshot makes durable, if anything. The key says when it changed (the state, the length of a trail):
   * one write per durable transition, never one per snapshot.
   */
  durable(snapshot: SnapshotFrom<M>, state: string): Durable<V> | undefined;
  /** The one place records are written. */
  write(value: V): Promise<void>;
  log: Logger;
  /** Each actor as it starts (metrics watch it). */
  started?(actor: Actor<M>): void;
  /** Each actor once it is done, after its last write was started. */
  done?(id: string, snapshot: SnapshotFrom<M>, state: string): void;
}

/** A failed durable write is tried again after this long, then twice as long each time, up to {@link RETRY_MAX_MS}. */
const RETRY_FIRST_MS = 250;
const RETRY_MAX_MS = 5000;

interface Hosted<M extends AnyStateMachine> {
  actor: Actor<M>;
  /** Durable writes caused so far: a failed write is tried again only while it is the latest. */
  count: number;
  /** The last write under way (or done, or failed): writes of one actor land in the order of its transitions. */
  writes: Promise<void>;
  /** The latest write on disk: after a failure, once tried again until it lands (or it is superseded, or fenced). */
  landed: Promise<void>;
  /** The latest write's first try failed (set as it settles). */
  unlanded?: boolean;
  /** The write the snapshot being handled caused, if any. */
  caused?: Promise<void>;
  /** The write of the state the actor started in, if it is durable: it fails as the write does. */
  first?: Promise<void>;
}

/** The state an actor is in, named by its top-level state (`inFlight` for `inFlight.confirming`). */
export function topState(value: StateValue): string {
  return statePath(value).split('.')[0] ?? '';
}

/**
 * Runs durable actors (payments, stock orders, settlement batches): spawns each from its record, fresh or resumed;
 * is the only writer of what they make durable, through one subscriber per actor that writes once per durable
 * transition, in order; lets a step hand the machine an event and wait until what it changed is on disk (a signed
 * transaction is recorded before it is sent); and answers a caller when the actor ends or by a deadline.
 */
export class DurableHost<M extends AnyStateMachine, V> {
  readonly #o: DurableHostOptions<M, V>;
  readonly #hosted = new Map<string, Hosted<M>>();
  /** Actors that ended while their last writes are under way (or failed, tried again): what a reader is shown meanwhile. */
  readonly #finishing = new Map<string, { snapshot: SnapshotFrom<M>; writes: Promise<void>; landed: Promise<void> }>();
  /** Set by {@link stop}: failed writes are no longer tried again. */
  #stopped = false;

  constructor(opts: DurableHostOptions<M, V>) {
    this.#o = opts;
  }

  /** Actors running now. */
  get size(): number {
    return this.#hosted.size;
  }

  /** The running actor under `id`. */
  get(id: string): Actor<M> | undefined {
    return this.#hosted.get(id)?.actor;
  }

  /** The latest snapshot of the actor under `id`: running, or ended with its last write not yet on disk. */
  snapshot(id: string): SnapshotFrom<M> | undefined {
    const hosted = this.#hosted.get(id);
    return hosted ? (hosted.actor.getSnapshot() as SnapshotFrom<M>) : this.#finishing.get(id)?.snapshot;
  }

  /** Starts an actor under `id` (a new record, or one read back from the store). */
  spawn(id: string, input: InputFrom<M>): Actor<M> {
    const actor = createActor(this.#o.machine, { input });
    const hosted: Hosted<M> = { actor, count: 0, writes: Promise.resolve(), landed: Promise.resolve() };
    this.#hosted.set(id, hosted);
    const log = this.#o.log;
    let lastKey: string | undefined;
    actor.subscribe({
      next: (snapshot: SnapshotFrom<M>) => {
        const state = topState((snapshot as { value: StateValue }).value);
        const durable = this.#o.durable(snapshot, state);
        hosted.caused = undefined;
        if (durable && durable.key !== lastKey) {
          lastKey = durable.key;
          const write = hosted.writes.then(() => this.#o.write(durable.value));
          hosted.caused = write;
          hosted.first ??= write;
          // A failed write (disk full, the database restarting) fails the step waiting on it (nothing is sent on an
          // unwritten trail), and is tried again until it lands while no later write has been caused: an actor that
          // ended while the store was away still leaves its end on disk once the store is back, its answer kept in
          // memory meanwhile (`snapshot`). The store reports itself unhealthy meanwhile; a later write still goes.
          const nth = ++hosted.count;
          hosted.writes = write.then(
            () => {
              hosted.unlanded = false;
            },
            (err: unknown) => {
              hosted.unlanded = true;
              log.error('could not write a durable record; trying again', { id, state, error: err });
            },
          );
          hosted.landed = write.catch(() => this.#again(hosted, nth, durable.value, { id, state }));
        }
        if ((snapshot as { status: string }).status === 'done') {
          if (this.#hosted.get(id) === hosted) {
            this.#hosted.delete(id);
            const finishing = { snapshot, writes: hosted.writes, landed: hosted.landed };
            this.#finishing.set(id, finishing);
            const forget = () => {
              if (this.#finishing.get(id) === finishing) this.#finishing.delete(id);
            };
            // Let go once its last write is on disk: at once if it landed, else once tried again until it did.
            void hosted.writes.then(() => (hosted.unlanded ? void hosted.landed.then(forget) : forget()));
          }
          this.#o.done?.(id, snapshot, state);
        }
      },
      error: (err: unknown) => log.error('durable actor failed', { id, error: err }),
    });
    this.#o.started?.(actor);
    actor.start();
    return actor;
  }

  /**
   * Writes `value` again, with backoff, until it lands, a later write of the actor supersedes it (a record is written
   * whole: the later one carries it), the writer is fenced (another node holds its records now) or the host stops.
   */
  async #again(hosted: Hosted<M>, nth: number, value: V, at: { id: string; state: string }): Promise<void> {
    for (let waitMs = RETRY_FIRST_MS; ; waitMs = Math.min(RETRY_MAX_MS, waitMs * 2)) {
      await new Promise((r) => setTimeout(r, waitMs).unref()); // a process stopping does not wait for it
      if (hosted.count !== nth || this.#stopped) return;
      // In the actor's order of writes: a later write caused meanwhile goes after this one.
      const attempt = hosted.writes.then(() => this.#o.write(value));
      hosted.writes = attempt.catch(() => {});
      try {
        await attempt;
        this.#o.log.info('a durable record that could not be written is written now', at);
        return;
      } catch (err) {
        if (isFenced(err)) return this.#o.log.warn('a durable record is not written: this node is fenced, another finishes it', { ...at, error: err });
      }
    }
  }

  /** The write of the state the actor under `id` started in: rejects when that write failed. */
  firstWrite(id: string): Promise<void> {
    return this.#hosted.get(id)?.first ?? this.#finishing.get(id)?.writes ?? Promise.resolve();
  }

  /**
   * Hands the actor `event` and resolves once what it changed is on disk. Rejects when the machine did not take the
   * event (nothing was written: a step must not act on it) or the write failed.
   */
  async record(id: string, event: EventFrom<M>): Promise<void> {
    // A step that calls this as it starts runs inside the actor's own transition: let that finish first, so the
    // event is processed now, not queued, and the write it causes is known here.
    await Promise.resolve();
    const hosted = this.#hosted.get(id);
    if (!hosted) throw new Error(`no actor ${id} is running here`);
    hosted.caused = undefined;
    hosted.actor.send(event);
    const caused = hosted.caused as Promise<void> | undefined;
    if (!caused) throw new Error(`actor ${id} did not take '${(event as { type: string }).type}'`);
    await caused;
  }

  /** Resolves once every write the actor has caused so far is on disk (or has failed). */
  written(id: string): Promise<void> {
    return this.#hosted.get(id)?.writes ?? this.#finishing.get(id)?.writes ?? Promise.resolve();
  }

  /** Resolves once the actor's latest write is on disk: a failed one tried again until it lands (see `#again`). */
  landed(id: string): Promise<void> {
    return this.#hosted.get(id)?.landed ?? this.#finishing.get(id)?.landed ?? Promise.resolve();
  }

  /**
   * The answer for a caller: `outcome` of the actor's snapshot as soon as it gives one, else at `deadlineMs` the
   * `outcome` with the deadline passed (which may still be none: then the caller waits on).
   */
  answer<T>(actor: Actor<M>, deadlineMs: number, outcome: (snapshot: SnapshotFrom<M>, deadlinePassed: boolean) => T | undefined): Promise<T> {
    return new Promise((resolve) => {
      let passed = false;
      let answered = false;
      const check = (snapshot: SnapshotFrom<M>) => {
        if (answered) return;
        const out = outcome(snapshot, passed);
        if (out === undefined) return;
        answered = true;
        clearTimeout(timer);
        sub?.unsubscribe();
        resolve(out);
      };
      const timer = setTimeout(() => {
        passed = true;
        check(actor.getSnapshot() as SnapshotFrom<M>);
      }, deadlineMs);
      let sub: { unsubscribe(): void } | undefined;
      sub = actor.subscribe((snapshot: SnapshotFrom<M>) => check(snapshot));
      check(actor.getSnapshot() as SnapshotFrom<M>);
    });
  }

  /** Stops every actor (their records stay as last written, for the next start to resume). */
  stop(): void {
    this.#stopped = true;
    for (const { actor } of this.#hosted.values()) actor.stop();
    this.#hosted.clear();
  }
}
