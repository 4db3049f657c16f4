/**
 * When a block watcher reads the chain head next, from when it saw heads arrive: a pure object, told the times of
 * its caller's clock.
 *
 * It is told the block time (the watcher learns it from block timestamps), and learns the block's phase as a window
 * of arrival: the current head came after the last read that did not see it and by the first read that did.
 * The next block is due one block time later, in the same window moved on. It reads at the middle of that window,
 * then (not there yet) at its end: a new block costs one or two head reads, and is seen at most half a window late.
 * A hit at the middle narrows the window from above, a miss from below, so the window follows the chain's own clock
 * as it drifts; it is kept no narrower than {@link floorMs} so that the reads keep probing either side of the phase.
 * A block that is not there by the end of its window is late (a skipped slot, a stall, a chain that mines only when
 * sent to): the reads then back off, each wait half the time it has been late, from the window's width up to `maxMs`.
 * While the block time is not known (a young chain, or one whose blocks come only when sent to, all in one second),
 * it waits a quarter of the time since the last new head, from `pollMs` up to `maxMs`: soon after a block, seldom
 * after a long quiet.
 */
export interface HeadPaceOptions {
  /** The shortest wait between reads, and the wait while the block time is not known yet. */
  pollMs: number;
  /** The longest wait between reads outside the window in which the next block is due (a late block, an unknown block time). */
  maxMs: number;
}

interface Window {
  /** The head arrived after this time... */
  lo: number;
  /** ...and by this one (ms, on the caller's clock). */
  hi: number;
}

/** A block time longer than this is not taken for a rhythm (a chain mined only when sent to, long quiet). */
const LONGEST_BLOCK_MS = 30_000;
/** Blocks that arrived in their projected windows, in a row, before the chain counts as keeping time. */
const STEADY_BLOCKS = 3;

export class HeadPace {
  readonly #o: HeadPaceOptions;
  #head: bigint | undefined;
  /** When the current head arrived, as far as the reads tell. */
  #window: Window | undefined;
  /** The start of the latest read that saw no block after the current head. */
  #missedAt = Number.NEGATIVE_INFINITY;
  #blockMs: number | undefined;
  #steady = 0;

  constructor(opts: HeadPaceOptions) {
    this.#o = opts;
  }

  /** The block time (ms), or undefined while it is not known. */
  get blockMs(): number | undefined {
    return this.#blockMs;
  }

  set blockMs(ms: number | undefined) {
    this.#blockMs = ms !== undefined && ms > 0 && ms <= LONGEST_BLOCK_MS ? ms : undefined;
  }

  /**
   * The chain has kept its block time for the last few blocks: the next block is not expected before its window, so
   * quick looks between reads (for a chain that mines as it is sent to) would find nothing.
   */
  get steady(): boolean {
    return this.#steady >= STEADY_BLOCKS;
  }

  /** The width below which the arrival window is not narrowed: the finest phase worth reading for. */
  floorMs(): number {
    return Math.max(this.#o.pollMs, (this.#blockMs ?? 0) / 16);
  }

  /** A head read started at `startedAt` and answered at `answeredAt` said `head`. */
  saw(head: bigint, startedAt: number, answeredAt: number): void {
    if (this.#head === undefined || head < this.#head) {
      // The first read, or a chain that went back (a reorg to a shorter chain, a restarted node): learn the phase again.
      this.#head = head;
      this.#window = undefined;
      this.#missedAt = startedAt;
      this.#steady = 0;
      return;
    }
    if (head === this.#head) {
      this.#missedAt = Math.max(this.#missedAt, startedAt);
      return;
    }
    const blocks = Number(head - this.#head);
    const seen: Window = { lo: this.#missedAt, hi: answeredAt };
    const before = this.#window;
    let now = seen;
    if (before && this.#blockMs !== undefined) {
      const projected = { lo: before.lo + blocks * this.#blockMs, hi: before.hi + blocks * this.#blockMs };
      const both = { lo: Math.max(seen.lo, projected.lo), hi: Math.min(seen.hi, projected.hi) };
      if (both.lo < both.hi) {
        now = both;
        this.#steady++;
      } else this.#steady = 0;
    }
    const floor = this.floorMs();
    const widest = this.#blockMs ?? Number.POSITIVE_INFINITY;
    this.#window = { lo: Math.max(now.hi - widest, Math.min(now.lo, now.hi - floor)), hi: now.hi };
    this.#head = head;
    this.#missedAt = startedAt;
  }

  /** How long to wait, from `now`, before the next head read. */
  nextDelayMs(now: number): number {
    const { pollMs, maxMs } = this.#o;
    const window = this.#window;
    const blockMs = this.#blockMs;
    if (window === undefined) return pollMs;
    if (blockMs === undefined) return Math.min(maxMs, Math.max(pollMs, (now - window.hi) / 4));
    const floor = this.floorMs();
    const lo = Math.max(window.lo + blockMs, this.#missedAt);
    const hi = window.hi + blockMs;
    if (this.#missedAt < hi) {
      // Due in (lo, hi]: read at its middle, or at its end once the middle was read (and missed); at once if overdue.
      const target = hi - lo > (3 * floor) / 4 && now < (lo + hi) / 2 ? (lo + hi) / 2 : hi;
      return Math.max(1, target - now);
    }
    // Read after its window and not there: late. Back off, each wait half the time it has been late.
    return Math.min(maxMs, Math.max(floor, (now - hi) / 2));
  }
}
