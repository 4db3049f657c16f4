/**
 * When the block watcher reads the head next: a chain that makes blocks at a steady interval is left alone until
 * shortly before its next block is due, then read every `pollMs` until that block shows (so a receipt is noticed
 * as promptly as by reading every `pollMs` all along). A chain without a steady interval (one that mines a block per
 * transaction sent, or one not learnt yet) is read every `pollMs`.
 *
 * Pure: it is told of each head read (the head, and when the read started and was answered) and asked how long to
 * wait, on whatever clock the caller keeps.
 */

/** Intervals between blocks kept (the newest ones), and how many are needed before the pace is trusted. */
const SAMPLES = 7;
const MIN_SAMPLES = 3;
/** The pace is steady when at least this share of the intervals kept lie within `STEADY_SPREAD` of their median. */
const STEADY_SHARE = 2 / 3;
const STEADY_SPREAD = 0.25;
/** Recent blocks whose arrival was seen closely: the next one is due an interval after the earliest they foretell. */
const ANCHORS = 4;
/** An arrival is seen closely when the reads around it are this close (or `CLOSE_POLLS` reads apart, if more). */
const CLOSE_MS = 150;
const CLOSE_POLLS = 4;
/** Reading starts this share of an interval (at least `LEAD_POLLS` reads) before the next block is due. */
const LEAD_SHARE = 1 / 20;
const LEAD_POLLS = 2;
/** Below this many reads per interval, pacing saves nothing: read every `pollMs`. */
const PACED_ABOVE_POLLS = 4;

interface Arrival {
  block: bigint;
  /** The arrival lies after this (a read that started then still saw the block before). */
  afterMs: number;
  /** Midway between the read that did not see it and the one that did: for intervals. */
  midMs: number;
}

export class BlockPace {
  readonly #pollMs: number;
  /** Intervals between blocks seen closely, ms per block, newest last. */
  #intervals: number[] = [];
  #anchors: Arrival[] = [];
  /** The last head read: its block and when the read started. */
  #last: { block: bigint; startMs: number } | undefined;
  /** The chain mines a block per transaction sent (a new hash was mined by its first lookup): no pace of its own. */
  #minesOnSend = false;

  constructor(pollMs: number) {
    this.#pollMs = pollMs;
  }

  /** The steady interval between blocks learnt (ms), or undefined while none is (or the chain mines on send). */
  get intervalMs(): number | undefined {
    if (this.#minesOnSend || this.#intervals.length < MIN_SAMPLES) return undefined;
    const sorted = [...this.#intervals].sort((a, b) => a - b);
    const median = sorted[Math.floor(sorted.length / 2)] as number;
    const near = sorted.filter((ms) => Math.abs(ms - median) <= median * STEADY_SPREAD).length;
    return near >= sorted.length * STEADY_SHARE ? median : undefined;
  }

  /** Whether new transactions were mined by their first lookup (true) or not (false). */
  minedOnSend(mined: boolean): void {
    this.#minesOnSend = mined;
  }

  /** A head read that started at `startMs` and was answered at `endMs` saw `head`. */
  read(head: bigint, startMs: number, endMs: number): void {
    const last = this.#last;
    this.#last = { block: head, startMs };
    if (last === undefined || head <= last.block) return;
    // Shown before it was due, while no read was looking for it: the pace foretold it late; it is learnt anew.
    const due = this.dueMs(head);
    const interval = this.intervalMs;
    if (due !== undefined && interval !== undefined && endMs < due && last.startMs < due - this.#leadMs(interval)) this.#forget();
    if (endMs - last.startMs > Math.max(CLOSE_MS, CLOSE_POLLS * this.#pollMs)) return;
    const arrival = { block: head, afterMs: last.startMs, midMs: (last.startMs + endMs) / 2 };
    const before = this.#anchors.at(-1);
    if (before) {
      this.#intervals.push((arrival.midMs - before.midMs) / Number(arrival.block - before.block));
      if (this.#intervals.length > SAMPLES) this.#intervals.shift();
    }
    this.#anchors.push(arrival);
    if (this.#anchors.length > ANCHORS) this.#anchors.shift();
  }

  /** When `block` is due at the earliest, by the steady pace learnt; undefined without one. */
  dueMs(block: bigint): number | undefined {
    const interval = this.intervalMs;
    if (interval === undefined || this.#anchors.length === 0) return undefined;
    return Math.min(...this.#anchors.map((a) => a.afterMs + Number(block - a.block) * interval));
  }

  /**
   * Until when `head` stays the chain's head by the steady pace learnt (reading for the block after it starts then);
   * undefined without a pace.
   */
  quietUntilMs(head: bigint): number | undefined {
    const interval = this.intervalMs;
    const next = this.dueMs(head + 1n);
    return interval === undefined || next === undefined ? undefined : next - this.#leadMs(interval);
  }

  /** How long to wait, at `nowMs`, before the next head read. */
  waitMs(nowMs: number): number {
    const interval = this.intervalMs;
    const quietUntil = this.#last === undefined ? undefined : this.quietUntilMs(this.#last.block);
    if (interval === undefined || quietUntil === undefined || interval < PACED_ABOVE_POLLS * this.#pollMs) return this.#pollMs;
    // Past the moment reading was to start, the block has not shown yet: read every pollMs until it does.
    return Math.max(this.#pollMs, Math.round(quietUntil - nowMs));
  }

  #leadMs(intervalMs: number): number {
    return Math.max(LEAD_POLLS * this.#pollMs, intervalMs * LEAD_SHARE);
  }

  #forget(): void {
    this.#intervals = [];
    this.#anchors = [];
  }
}
