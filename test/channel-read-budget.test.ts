// What a flood of vouchers for made-up or empty payment channels can make the gateway read on chain: each channel at
// most once per interval, all channels together within one budget, on a logical clock; honest reads still go through
// once the flood has used its share, and a failed read is not kept.
import t from 'tap';
import { type Hex, toHex } from 'viem';
import { budgetedChannelReader, ChannelReadsExhausted } from '../src/channels/chain-read-budget.ts';
import type { OnchainChannel } from '../src/schemes/batch-settlement/cumulative.ts';

const N = 'eip155:8453';
const id = (i: number) => toHex(i, { size: 32 }) as Hex;
const EMPTY: OnchainChannel = { balance: 0n, totalClaimed: 0n, withdrawRequestedAt: 0, refundNonce: 0n };

function setup(fail = false) {
  const clock = { ms: 1_000_000 };
  const reads: Hex[] = [];
  const reader = budgetedChannelReader(
    async (_network, channelId) => {
      reads.push(channelId);
      if (fail) throw new Error('rpc down');
      return EMPTY;
    },
    { perSecond: 20, burst: 40, perChannelMs: 2_000, now: () => clock.ms },
  );
  return { clock, reads, reader };
}

const outcome = (p: Promise<OnchainChannel>) =>
  p.then(
    () => 'read',
    (e: unknown) => (e instanceof ChannelReadsExhausted ? 'exhausted' : 'failed'),
  );

t.test('one channel asked 10,000 times within its interval is read once', async (t) => {
  const { clock, reads, reader } = setup();
  const answers = await Promise.all(Array.from({ length: 10_000 }, () => reader(N, id(1))));
  t.equal(reads.length, 1, 'one chain read');
  t.ok(
    answers.every((a) => a.balance === 0n),
    'every ask got its answer',
  );
  clock.ms += 2_001;
  await reader(N, id(1));
  t.equal(reads.length, 2, 'read again once the interval has passed');
  await reader('eip155:84532', id(1));
  t.equal(reads.length, 3, 'the same id on another network is another channel');
});

t.test('10,000 made-up channels at once: the burst is read, the rest refused until the budget refills', async (t) => {
  const { clock, reads, reader } = setup();
  const results = await Promise.all(Array.from({ length: 10_000 }, (_, i) => outcome(reader(N, id(1_000 + i)))));
  t.equal(results.filter((r) => r === 'read').length, 40, 'the burst of 40 read');
  t.equal(reads.length, 40, 'and no more chain reads');
  const refused = await reader(N, id(99_999)).catch((e: unknown) => e);
  t.ok(refused instanceof ChannelReadsExhausted && refused.retryAfterSeconds >= 1, 'a refusal says when to come back');
  clock.ms += 1_000;
  const honest = await Promise.all(Array.from({ length: 30 }, (_, i) => outcome(reader(N, id(50_000 + i)))));
  t.equal(honest.filter((r) => r === 'read').length, 20, 'a second later, 20 more channels can be read (the rate)');
  t.equal(reads.length, 60);
});

t.test('a failed read is not kept: the next ask reads again', async (t) => {
  const { clock, reads, reader } = setup(true);
  t.equal(await outcome(reader(N, id(7))), 'failed');
  clock.ms += 10;
  t.equal(await outcome(reader(N, id(7))), 'failed');
  t.equal(reads.length, 2, 'read twice');
});
