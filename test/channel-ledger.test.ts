// The channel records' compare-and-set, on LMDB and on PostgreSQL (two stores on one database, as two nodes): of
// many writers that read one version, exactly one moves it; the write-ahead, commit, release and a dead server's
// pending resolved, as pure moves on real stores.
import { SAMPLE_CHANNEL, SAMPLE_CONFIG, SAMPLE_SIGNATURE } from './support/channel-fixture.ts';
import t, { type Test } from 'tap';
import type { Hex } from 'viem';
import { ChannelLedger, CHANNEL_INDEX, CHANNEL_RECORDS } from '../src/channels/channel-ledger.ts';
import { committed, exposureOf, headroom, openedRecord, pendingLive, released, resolvedPending, withChainState, withClaimed, withdrawClosing, withPending } from '../src/channels/channel-record.ts';
import { claimFinished, sweepTargets, type ClaimRow } from '../src/channels/claim-machine.ts';
import { openLmdbStore } from '../src/store/lmdb/open-lmdb-store.ts';
import { openStore } from '../src/store/open-store.ts';
import type { Store } from '../src/store/store.ts';
import { startPostgres } from './helpers/postgres.ts';
import { tempDir } from './helpers/temp-dir.ts';

const CHANNEL = SAMPLE_CHANNEL;
const CONFIG = SAMPLE_CONFIG;
const SIG = SAMPLE_SIGNATURE;
const opened = (balance: bigint) => openedRecord({ channelId: CHANNEL, network: 'eip155:8453', config: CONFIG, balance, totalClaimed: 0n, now: 1 });

t.test("the claim's moves: claimed totals never fall, the chain's view taken, withdrawals closing, sweeps one per receiver and token", async (t) => {
  const charged = { ...committed(withPending({ ...opened(100n), version: 1 }, { cumulative: 30n, signature: SIG }, 'boot-a', 5_000, 2), 3) };
  t.equal(exposureOf(charged), 30n, 'exposure: charged and not claimed');
  const claimed = withClaimed(charged, 30n, 4);
  t.same([claimed.totalClaimed, claimed.version, exposureOf(claimed)], ['30', charged.version + 1, 0n], 'a mined claim raises the total');
  t.equal(withClaimed(claimed, 20n, 5), claimed, 'a lower total (an older claim recorded late) changes nothing');
  const chain = { balance: 60n, totalClaimed: 10n, withdrawRequestedAt: 1_000, refundNonce: 0n };
  const read = withChainState(claimed, chain, 6);
  t.same([read.balance, read.totalClaimed, read.withdrawRequestedAt], ['60', '30', 1_000], "the chain's balance and withdrawal, the claimed total never lowered");
  t.equal(withChainState(read, chain, 7), read, 'the same view: no write');
  // Finalizable at 1000 + 900 s: with a 300 s margin, closing from 1600 s.
  t.equal(withdrawClosing(read, 1_599_000, 300), false, 'before the margin: vouchers taken');
  t.equal(withdrawClosing(read, 1_600_000, 300), true, 'within the margin: none');
  t.equal(withdrawClosing(claimed, 9e12, 300), false, 'no withdrawal pending: never closing');
  const row = (receiver: string, token: string) => ({ config: { ...CONFIG, receiver, token } }) as unknown as ClaimRow;
  t.same(
    sweepTargets([row('0xA', '0xT'), row('0xa', '0xt'), row('0xB', '0xT')]).map((s) => `${s.receiver}/${s.token}`),
    ['0xA/0xT', '0xB/0xT'],
    'one settle per receiver and token, whatever the case of the addresses',
  );
  t.same(['swept', 'empty', 'failed', 'reverted', 'sweepFailed', 'stalled', 'sent'].map(claimFinished), [true, true, true, true, true, false, false], 'a stalled claim is resumed');
});

t.test('the moves: write-ahead, commit, release; headroom counts a pending voucher', async (t) => {
  const r = { ...opened(100n), version: 1 };
  const ahead = withPending(r, { cumulative: 10n, signature: SIG }, 'boot-a', 5_000, 2);
  t.same([ahead.version, ahead.signedMaxClaimable, ahead.signature, ahead.charged, headroom(ahead)], [2, '10', SIG, '0', 90n], 'the voucher is durable and held back from the balance');
  const done = committed(ahead, 3);
  t.same([done.version, done.charged, done.pending, headroom(done)], [3, '10', undefined, 90n], 'committed: charged');
  const back = released(ahead, 3);
  t.same([back.version, back.charged, back.pending, back.signedMaxClaimable, headroom(back)], [3, '0', undefined, '10', 100n], 'released: nothing charged, the signature kept');
  t.equal(resolvedPending(ahead, 4).charged, '10', "a dead server's pending is committed (the voucher is kept)");
  t.equal(await pendingLive(ahead.pending!, () => true, 4_999), true, 'live while its boot is and its bound is not passed');
  t.equal(await pendingLive(ahead.pending!, () => true, 5_001), false, 'past its bound: dead, whoever holds it');
  t.equal(await pendingLive(ahead.pending!, () => false, 10), false, 'its boot gone: dead');
});

async function raceOn(t: Test, stores: Store[]): Promise<void> {
  const ledgers = stores.map((s) => new ChannelLedger(s.claims(CHANNEL_RECORDS), s.collection<string>(CHANNEL_INDEX)));
  const creators = await Promise.all(ledgers.flatMap((l) => [l.create(opened(1_000n)), l.create(opened(1_000n))]));
  t.equal(creators.filter(Boolean).length, 1, 'of concurrent creators, one wins');
  const listed: Array<{ channelId: Hex; network: string }> = [];
  for await (const c of ledgers[ledgers.length - 1]!.channels()) listed.push(c);
  t.same(listed, [{ channelId: CHANNEL.toLowerCase(), network: 'eip155:8453' }], 'the channel is listed once, with its creation, for the claim actors');
  // 24 writers read version 1 and race to write version 2: exactly one wins on every step.
  let held = await ledgers[0]!.read(CHANNEL);
  for (let step = 1; step <= 5; step++) {
    const reads = await Promise.all(ledgers.map((l) => l.read(CHANNEL)));
    const attempts = Array.from({ length: 24 }, (_, i) => {
      const read = reads[i % reads.length]!;
      return ledgers[i % ledgers.length]!.replace(read, withPending(read.record, { cumulative: BigInt(step * 10), signature: SIG }, `w${i}`, Date.now() + 60_000, step));
    });
    const won = (await Promise.all(attempts)).filter(Boolean);
    t.equal(won.length, 1, `step ${step}: one of 24 concurrent writers wins`);
    const afterWin = won[0]!;
    held = await ledgers[1 % ledgers.length]!.replace(afterWin, committed(afterWin.record, step));
    t.ok(held, `step ${step}: the winner commits`);
  }
  const last = await ledgers[ledgers.length - 1]!.read(CHANNEL);
  t.same([last?.record.version, last?.record.charged, last?.record.pending], [11, '50', undefined], 'five steps, each charged once, read back from another store');
  t.equal(await ledgers[0]!.replace(held!, { ...held!.record, version: held!.record.version + 1 }).then(Boolean), true, 'the current holder may move it');
  t.equal(await ledgers[0]!.replace(held!, { ...held!.record, version: held!.record.version + 1 }).then(Boolean), false, 'a stale copy may not');
}

t.test('LMDB: compare-and-set on the version', async (t) => {
  const dir = tempDir('channel-ledger');
  const store = openLmdbStore(dir);
  t.teardown(() => store.close());
  await raceOn(t, [store]);
});

t.test('PostgreSQL: two stores on one database (two nodes) race on one channel', async (t) => {
  const db = await startPostgres();
  t.teardown(() => db.stop());
  const stores = await Promise.all([0, 1].map(() => openStore({ dataDir: '/nonexistent', url: db.url }, { poolSize: 4 })));
  t.teardown(() => Promise.all(stores.map((s) => s.close())));
  await raceOn(t, stores);
});
