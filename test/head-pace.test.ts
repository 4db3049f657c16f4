import t from 'tap';
import { HeadPace } from '../src/tx/head-pace.ts';

// A chain on the test's own clock: a block every `blockMs`, the first at `phase`, each `jitter(i)` late; the pace is
// asked when to read next, and each read sees the blocks mined by then. Reads take `rttMs`.
function run(opts: { blockMs: number; phase: number; untilMs: number; pollMs?: number; known?: number; jitter?: (i: number) => number; rttMs?: number }) {
  const pace = new HeadPace({ pollMs: opts.pollMs ?? 20, maxMs: 1000 });
  pace.blockMs = opts.known ?? opts.blockMs;
  const minedAt = (i: number) => opts.phase + i * opts.blockMs + (opts.jitter?.(i) ?? 0);
  const headAt = (time: number) => {
    let h = 0;
    while (minedAt(h) <= time) h++;
    return BigInt(h); // blocks 0..h-1 are mined: the head is block h (block 0 the genesis, before the clock)
  };
  const reads: number[] = [];
  const seenAt = new Map<bigint, number>();
  let now = 0;
  let last = -1n;
  while (now < opts.untilMs) {
    const answered = now + (opts.rttMs ?? 0);
    const head = headAt(now);
    pace.saw(head, now, answered);
    reads.push(now);
    if (head > last) {
      for (let b = last + 1n; b <= head; b++) if (b > 0n) seenAt.set(b, answered);
      last = head;
    }
    now = answered + pace.nextDelayMs(answered);
  }
  /** How long after its block each head was seen, from block `from` on. */
  const lateness = (from: number) => [...seenAt].filter(([b]) => Number(b) >= from).map(([b, at]) => at - minedAt(Number(b) - 1));
  const readsBetween = (a: number, b: number) => reads.filter((r) => r >= a && r < b).length;
  return { pace, lateness, readsBetween, blocks: Number(last) };
}

t.test('a 1 s chain: after a few blocks, one or two head reads per block, each block seen within a few tens of ms', async (t) => {
  const r = run({ blockMs: 1000, phase: 370, untilMs: 60_000, rttMs: 3 });
  const perBlock = r.readsBetween(10_000, 60_000) / 50;
  t.ok(perBlock <= 2, `${perBlock} head reads per block (a fixed 20 ms poll: 50)`);
  const late = r.lateness(10);
  t.ok(Math.max(...late) <= 1000 / 16 + 3, `seen at most ${Math.max(...late)} ms after its block`);
  t.ok(r.pace.steady, 'the chain counts as keeping time');
});

t.test('the phase is found from any start, and followed when the block time is a little off either way', async (t) => {
  for (const [known, blockMs] of [
    [1000, 1010],
    [1000, 990],
    [2000, 2000],
  ] as const) {
    for (const phase of [1, 499, 998]) {
      const r = run({ blockMs, known, phase, untilMs: 80 * blockMs, rttMs: 2 });
      const late = r.lateness(20);
      t.ok(Math.max(...late) <= blockMs / 8, `${blockMs} ms blocks thought ${known}, phase ${phase}: seen at most ${Math.max(...late)} ms late`);
      // Thought a little off, the block comes now and then after its window, and a read more finds it.
      const perBlock = r.readsBetween(20 * blockMs, 80 * blockMs) / 60;
      t.ok(perBlock <= (known === blockMs ? 2 : 2.5), `${perBlock} reads per block`);
    }
  }
});

t.test('a jittery chain and a late block: the late one is looked for ever less often, the rhythm is found again', async (t) => {
  const r = run({ blockMs: 1000, phase: 100, untilMs: 60_000, rttMs: 2, jitter: (i) => (i === 30 ? 5000 : (i * 7919) % 23) });
  // Block 30 (and so every later one) comes 5 s late: a stalled chain.
  const stall = r.readsBetween(31_200, 35_000);
  t.ok(stall >= 3 && stall <= 12, `${stall} reads while the chain stalled 3.8 s (a fixed 20 ms poll: 190)`);
  t.ok(Math.max(...r.lateness(45)) <= 1000 / 16 + 23 + 2, `after it, seen at most ${Math.max(...r.lateness(45))} ms late`);
});

t.test('unknown block time (blocks only when sent to): soon after a block, seldom after a long quiet, at least once a second', async (t) => {
  const pace = new HeadPace({ pollMs: 20, maxMs: 1000 });
  pace.saw(5n, 0, 0);
  t.equal(pace.nextDelayMs(0), 20, 'no block seen arrive yet: the shortest wait');
  pace.saw(6n, 10, 12);
  t.equal(pace.nextDelayMs(20), 20, 'just after a block: the shortest wait');
  t.equal(pace.nextDelayMs(412), 100, 'a quarter of the time since');
  t.equal(pace.nextDelayMs(60_000), 1000, 'never longer than maxMs');
});

t.test('a head that goes back (a reorg to a shorter chain) resets the phase', async (t) => {
  const r = run({ blockMs: 1000, phase: 370, untilMs: 20_000 });
  r.pace.saw(3n, 20_000, 20_000);
  t.notOk(r.pace.steady);
  t.equal(r.pace.nextDelayMs(20_000), 20, 'reads at the shortest wait until it sees the next block arrive');
});
