/**
 * The revert budget (src/engine/revert-budget.ts): the pure judgement of a contract payer on a logical clock, and
 * its records in a real LMDB store, reopened as after a restart.
 */
import { rmSync } from 'node:fs';
import t from 'tap';
import { openStore } from '../src/store/open-store.ts';
import { DEFAULT_REVERT_BUDGET, HOUR_MS, judgeContractPayer, RevertBudget, type RevertBudgetLimits, type RevertEvent } from '../src/engine/revert-budget.ts';
import { tempDir } from './helpers/temp-dir.ts';

const LIMITS: RevertBudgetLimits = { banMs: 24 * HOUR_MS, gasPerPayerHour: 100_000n, gasPerCodeHour: 150_000n, gasTotalHour: 300_000n, trialLeaseMs: 60_000 };
const CODE_A = `0x${'aa'.repeat(32)}` as const;
const CODE_B = `0x${'bb'.repeat(32)}` as const;
const PAYER = '0x00000000000000000000000000000000000000A1';
const T0 = 1_800_000_000_000;

const revert = (at: number, payer: string, codeHash: string | undefined, gas: number): RevertEvent => ({
  at,
  network: 'eip155:8453',
  payer,
  gas: String(gas),
  tx: `0x${at.toString(16)}`,
  ...(codeHash ? { codeHash } : {}),
});

t.test('the judgement: bans first, then the three hourly bounds, then the turn of an unproven code', async (t) => {
  const judge = (over: Partial<Parameters<typeof judgeContractPayer>[0]>) => judgeContractPayer({ payer: PAYER, codeHash: CODE_A, recent: [], codeProven: true, now: T0, limits: LIMITS, ...over });
  t.same(judge({}), { ok: true, trial: false }, 'a proven code, nothing reverted: goes');
  t.same(judge({ codeProven: false }), { ok: true, trial: true }, 'an unproven code: goes on its turn');
  const banned = judge({ payerBan: { until: T0 + 1000, tx: '0x01', network: 'eip155:8453' } });
  t.match(banned, { ok: false, kind: 'payer_banned', reason: 'payer_reverted_before', retryAfterSeconds: 1 });
  t.match(banned.ok ? '' : banned.message, /nothing was charged/, 'the refusal says nothing was charged');
  t.same(judge({ payerBan: { until: T0, tx: '0x01', network: 'eip155:8453' } }), { ok: true, trial: false }, 'a ban that ended refuses nothing');
  t.match(judge({ codeBan: { until: T0 + HOUR_MS, tx: '0x01', network: 'eip155:8453' } }), { ok: false, kind: 'code_banned', retryAfterSeconds: 3600 });
  // Gas: another payer of the same code, over the code's bound.
  t.match(judge({ recent: [revert(T0 - 10_000, '0xother', CODE_A, 150_000)] }), { ok: false, kind: 'code_gas', reason: 'revert_gas_budget_spent' });
  t.same(judge({ recent: [revert(T0 - 10_000, '0xother', CODE_A, 149_999)] }), { ok: true, trial: false }, 'below the bound: goes');
  t.match(judge({ recent: [revert(T0 - 10_000, PAYER.toLowerCase(), CODE_B, 100_000)] }), { ok: false, kind: 'payer_gas' }, "the payer's own gas, whatever its code then");
  const total = [revert(T0 - 3_000_000, '0x1', CODE_B, 200_000), revert(T0 - 1000, '0x2', undefined, 100_000)];
  const spent = judge({ recent: total });
  t.match(spent, { ok: false, kind: 'total_gas' }, "everyone's reverted gas over the total: every contract payer refused");
  t.equal(spent.ok ? 0 : spent.retryAfterSeconds, 600, 'until the oldest revert counted leaves the hour');
  t.same(judge({ recent: total, now: T0 + 600_000 }), { ok: true, trial: false }, 'an hour after it, the total has recovered');
  t.same(judge({ recent: [revert(T0 - HOUR_MS, PAYER, CODE_A, 10_000_000)] }), { ok: true, trial: false }, 'a revert an hour old counts for nothing');
  t.ok(DEFAULT_REVERT_BUDGET.gasPerCodeHour < 2n * 37_088n * 3n, 'the default per-code bound allows only a few reverts of the measured size');
});

t.test('in the store: a revert bans the payer and its code, a restart keeps it, one turn per unproven code', async (t) => {
  const dir = tempDir('revert-budget');
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  let now = T0;
  const clock = () => now;
  const refused: string[] = [];
  const burnt: bigint[] = [];
  const observer = { refused: (k: string) => refused.push(k), reverted: (_n: string, gas: bigint) => burnt.push(gas) };
  let store = await openStore({ dataDir: dir });
  let budget = new RevertBudget({ store, limits: LIMITS, clock, observer });

  const first = await budget.admit(PAYER, CODE_A, { id: 'p1', attempt: 'a1' });
  t.match(first, { ok: true, turn: /^p1\|a1\|/ }, 'the first payment of an unproven code takes its turn');
  t.match(
    await budget.admit('0x00000000000000000000000000000000000000A2', CODE_A, { id: 'p2', attempt: 'a2' }),
    { ok: false, kind: 'code_busy', reason: 'contract_payer_one_at_a_time' },
    'a second of the same code waits',
  );
  t.same(await budget.admit(PAYER, CODE_B, { id: 'p3', attempt: 'a3' }).then((a) => a.ok), true, 'another code has a turn of its own');
  // The first one's settlement reverts on chain.
  await budget.reverted({ network: 'eip155:8453', payer: PAYER, codeHash: CODE_A, gas: '37088', tx: '0xdead' });
  if (first.ok && first.turn) await budget.release(CODE_A, first.turn);
  t.same(burnt, [37_088n], 'the gas is told to the metrics');
  await store.close();

  store = await openStore({ dataDir: dir });
  budget = new RevertBudget({ store, limits: LIMITS, clock, observer });
  now += 1000;
  t.match(await budget.admit(PAYER, CODE_A, { id: 'p4', attempt: 'a4' }), { ok: false, kind: 'payer_banned' }, 'after a restart, the payer is still refused');
  t.match(await budget.admit('0x00000000000000000000000000000000000000A3', CODE_A, { id: 'p5', attempt: 'a5' }), { ok: false, kind: 'code_banned' }, 'and so is a new contract of the same code');
  t.match(await budget.judge('0x00000000000000000000000000000000000000A3', CODE_A), { ok: false, kind: 'code_banned' }, '/verify says so too');

  // A proven code: no turn, any number at once.
  await budget.settled(CODE_B, '0xbeef');
  const many = await Promise.all(Array.from({ length: 5 }, (_, i) => budget.admit(`0x00000000000000000000000000000000000000${(0xb0 + i).toString(16)}`, CODE_B, { id: `q${i}`, attempt: 'x' })));
  t.same(
    many.map((m) => m.ok && m.turn === undefined),
    [true, true, true, true, true],
    'a proven code settles without taking turns',
  );

  // A turn whose holder died lapses.
  const code = `0x${'cc'.repeat(32)}` as const;
  t.match(await budget.admit('0x00000000000000000000000000000000000000C1', code, { id: 'r1', attempt: 'x' }), { ok: true, turn: /^r1/ });
  t.match(await budget.admit('0x00000000000000000000000000000000000000C2', code, { id: 'r2', attempt: 'x' }), { ok: false, kind: 'code_busy' });
  now += LIMITS.trialLeaseMs + 1;
  t.match(await budget.admit('0x00000000000000000000000000000000000000C2', code, { id: 'r2', attempt: 'y' }), { ok: true, turn: /^r2\|y\|/ }, 'a lapsed turn is taken over');

  // Past the ban, the hour's gas still counts; past the hour, nothing does.
  now = T0 + LIMITS.banMs + 10;
  t.same(await budget.judge(PAYER, CODE_A).then((j) => j.ok), true, 'the ban ends');
  t.ok(refused.includes('payer_banned') && refused.includes('code_banned') && refused.includes('code_busy'), `refusals told to the metrics (${refused.join(',')})`);
  await store.close();
});
