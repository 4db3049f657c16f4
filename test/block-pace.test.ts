// The block watcher's read schedule on a logical clock: a simulated chain makes blocks at given times, the watcher's
// loop reads its head when BlockPace says (each read taking RPC_MS), and the test counts the reads and how late each
// block was seen. Steady blocks: a few reads per block instead of one every pollMs, none seen later than by reading
// every pollMs. Blocks that stop, speed up, or come with each send: read every pollMs until the pace is learnt again.
import t from 'tap';
import { BlockPace } from '../src/tx/block-pace.ts';

const POLL_MS = 20;
const RPC_MS = 5;
/** How late a block can be seen by reading every POLL_MS (a read each POLL_MS + RPC_MS, the head as of mid-call). */
const AS_POLLING_MS = POLL_MS + 2 * RPC_MS;

interface Run {
  reads: number;
  /** Per block (from the one given on), how long after it was made the first read that saw it was answered. */
  lateMs: number[];
  /** Reads after which the pace said the head would stay until a time by which the next block had been made. */
  wrongQuiet: number;
}

/** Reads the head of a chain whose blocks are made at `blockTimes` (ms, rising) from 0 to `untilMs`, as the watcher's loop does. */
function watch(blockTimes: number[], untilMs: number, from: { ms: number } = { ms: 0 }, pace = new BlockPace(POLL_MS)): Run {
  const headAt = (ms: number) => BigInt(blockTimes.filter((b) => b <= ms).length);
  const firstSeen = new Map<bigint, number>();
  let now = 0;
  let reads = 0;
  let wrongQuiet = 0;
  while (now < untilMs) {
    const start = now;
    // The node answers with the head as it was midway through the call.
    const head = headAt(start + RPC_MS / 2);
    now += RPC_MS;
    pace.read(head, start, now);
    if (start >= from.ms) reads++;
    for (let b = 1n; b <= head; b++) if (!firstSeen.has(b)) firstSeen.set(b, now);
    const quiet = pace.quietUntilMs(head);
    const next = blockTimes[Number(head)];
    if (start >= from.ms && quiet !== undefined && next !== undefined && quiet > next) wrongQuiet++;
    now += pace.waitMs(now);
  }
  const lateMs = blockTimes
    .map((made, i) => ({ made, seen: firstSeen.get(BigInt(i + 1)) }))
    .filter((b) => b.made >= from.ms && b.seen !== undefined)
    .map((b) => (b.seen as number) - b.made);
  return { reads, lateMs, wrongQuiet };
}

const steady = (intervalMs: number, count: number, phaseMs = 337) => Array.from({ length: count }, (_, i) => phaseMs + i * intervalMs);
const worst = (xs: number[]) => Math.max(...xs);

t.test('one-second blocks: a few head reads a block, each block seen within a poll interval of being made', async (t) => {
  const blocks = steady(1000, 60);
  const run = watch(blocks, 60_000, { ms: 10_000 });
  const perBlock = run.reads / 50;
  t.ok(perBlock <= 6, `${perBlock.toFixed(1)} reads per block (every ${POLL_MS} ms would be ${1000 / POLL_MS})`);
  t.ok(worst(run.lateMs) <= AS_POLLING_MS, `every block seen within ${AS_POLLING_MS} ms (worst ${worst(run.lateMs)} ms)`);
  t.equal(run.lateMs.length, 50);
  t.equal(run.wrongQuiet, 0, 'the head read is never said to stay past the moment the next block is made');
});

t.test('blocks a second apart give or take 30 ms: still seen within a poll interval, still a few reads a block', async (t) => {
  let seed = 7;
  const jitter = () => {
    seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
    return (seed / 2 ** 31) * 60 - 30;
  };
  const blocks = steady(1000, 60).map((ms) => Math.round(ms + jitter()));
  const run = watch(blocks, 60_000, { ms: 10_000 });
  t.ok(run.reads / 50 <= 8, `${(run.reads / 50).toFixed(1)} reads per block`);
  t.ok(worst(run.lateMs) <= AS_POLLING_MS, `worst ${worst(run.lateMs)} ms late`);
  t.equal(run.wrongQuiet, 0);
});

t.test('a chain that stops for five seconds is read every poll interval until it goes on, then paced again', async (t) => {
  const blocks = [...steady(1000, 20), ...steady(1000, 20, 337 + 24_000)];
  const stalled = watch(blocks, 24_000, { ms: 20_400 });
  t.ok(stalled.reads >= (3600 / (POLL_MS + RPC_MS)) * 0.9, `${stalled.reads} reads while no block came for 3.6 s`);
  const after = watch(blocks, 44_000, { ms: 30_000 });
  t.ok(after.reads / 14 <= 6, `${(after.reads / 14).toFixed(1)} reads per block once blocks come again`);
  t.ok(worst(after.lateMs) <= AS_POLLING_MS, `worst ${worst(after.lateMs)} ms late`);
});

t.test('blocks that come twice as fast: at most a few are seen late while the pace is learnt again', async (t) => {
  const blocks = [...steady(2000, 15), ...steady(1000, 30, 337 + 15 * 2000)];
  const run = watch(blocks, 60_000, { ms: 30_000 });
  const late = run.lateMs.filter((ms) => ms > AS_POLLING_MS);
  t.ok(late.length <= 2, `${late.length} of ${run.lateMs.length} blocks seen late (${late.join(', ')} ms)`);
  t.ok(worst(run.lateMs) < 1000, 'none by a whole block');
  const settled = watch(blocks, 60_000, { ms: 40_000 });
  t.ok(worst(settled.lateMs) <= AS_POLLING_MS, 'then every block within a poll interval');
});

t.test('a chain that mines each transaction as it is sent has no pace: read every poll interval', async (t) => {
  const pace = new BlockPace(POLL_MS);
  // Even blocks that happen to come at a steady rate (a steady load) are not taken for a pace.
  for (let i = 1; i < 20; i++) {
    pace.minedOnSend(true);
    pace.read(BigInt(i - 1), i * 500 - 20, i * 500 - 20 + RPC_MS);
    pace.read(BigInt(i), i * 500, i * 500 + RPC_MS);
  }
  t.equal(pace.intervalMs, undefined);
  pace.minedOnSend(false);
  t.equal(pace.intervalMs, 500, 'the same blocks, their transactions not mined as sent: a pace');
  t.equal(pace.waitMs(10_000), POLL_MS);
  t.equal(new BlockPace(POLL_MS).waitMs(0), POLL_MS, 'nor before any block is seen');
});
