import t from 'tap';
import { SettlementAdmission } from '../src/engine/settlement-admission.ts';

const idle = { relayers: 2, unminedTxs: 0 };
const limits = { maxQueued: 3, maxWaitMs: 500, maxTxsPerRelayer: 4 };

t.test('admits until the queue is full, and again once a payment is sent', async (t) => {
  const a = new SettlementAdmission(limits);
  const tickets = [a.enter('eip155:1', 0), a.enter('eip155:1', 0)];
  t.equal(a.shed('eip155:1', 10, idle), undefined, 'two queued of three: admitted');
  tickets.push(a.enter('eip155:1', 10));
  t.same(a.shed('eip155:1', 10, idle), { reason: 'queue_full', retryAfterSeconds: 1 }, 'three queued: the fourth waits');
  t.equal(a.shed('eip155:2', 10, idle), undefined, 'another network has a queue of its own');
  tickets[0]?.sent();
  tickets[0]?.sent();
  t.equal(a.queued('eip155:1'), 2, 'a sent payment leaves the queue once, however often it says so');
  t.equal(a.shed('eip155:1', 10, idle), undefined, 'and makes room');
});

t.test('turns payments away while the oldest queued one has waited too long', async (t) => {
  const a = new SettlementAdmission(limits);
  const oldest = a.enter('n', 1000);
  a.enter('n', 1400);
  t.equal(a.shed('n', 1499, idle), undefined, 'within the wait bound: admitted');
  t.equal(a.shed('n', 1500, idle)?.reason, 'queue_slow', 'the oldest waited 500 ms: new payments wait');
  oldest.sent();
  t.equal(a.shed('n', 1500, idle), undefined, 'once it is sent, the next oldest (100 ms) decides');
});

t.test("turns payments away while the relayers' transactions are not being mined", async (t) => {
  const a = new SettlementAdmission(limits);
  t.equal(a.shed('n', 0, { relayers: 2, unminedTxs: 7 }), undefined, '7 unmined for 2 relayers of 4 each: admitted');
  t.same(a.shed('n', 0, { relayers: 2, unminedTxs: 8 }), { reason: 'relayers_busy', retryAfterSeconds: 1 }, '8: new payments wait');
});

t.test('Retry-After is the wait bound in whole seconds, at least one', async (t) => {
  const a = new SettlementAdmission({ ...limits, maxQueued: 1, maxWaitMs: 2500 });
  a.enter('n', 0);
  t.equal(a.shed('n', 0, idle)?.retryAfterSeconds, 3);
});

t.test("a client beyond its share waits once the queue keeps only a share's room for the others", async (t) => {
  const a = new SettlementAdmission({ maxQueued: 8, maxWaitMs: 500, maxTxsPerRelayer: 64, clientShare: 2 });
  t.equal(a.clientShare, 2);
  const flood = [a.enter('n', 0, 'attacker'), a.enter('n', 0, 'attacker')];
  for (let i = 0; i < 4; i++) {
    t.equal(a.shed('n', 0, idle, 'attacker'), undefined, `an idle queue lets a lone client past its share (${flood.length} queued)`);
    flood.push(a.enter('n', 0, 'attacker'));
  }
  t.equal(a.queued('n'), 6);
  t.same(a.shed('n', 0, idle, 'attacker'), { reason: 'client_share', retryAfterSeconds: 1 }, "6 of 8 queued: the last share's room is the others'");
  t.equal(a.shareShed('n', 'attacker')?.reason, 'client_share', 'the door says the same');
  t.equal(a.shed('n', 0, idle, 'honest'), undefined, 'another client within its share is admitted');
  const honest = [a.enter('n', 0, 'honest'), a.enter('n', 0, 'honest')];
  t.same(a.shed('n', 0, idle, 'third')?.reason, 'queue_full', 'a full queue is full for everyone');
  honest[0]?.sent();
  t.equal(a.shed('n', 0, idle, 'third'), undefined, 'a freed place goes to a client within its share');
  t.equal(a.shed('n', 0, idle, 'attacker')?.reason, 'client_share', 'not to the one beyond it');
  t.equal(a.shed('n', 0, idle), undefined, 'a payment of no known client is held to the queue limits only');
  for (const ticket of flood) ticket.sent();
  for (const ticket of flood) ticket.sent();
  t.equal(a.queuedBy('n', 'attacker'), 0, "sent payments leave their client's count once");
  t.equal(a.queuedBy('n', 'honest'), 1);
});

t.test("a client's share is an eighth of the queue, at least 2, unless configured", async (t) => {
  t.equal(new SettlementAdmission({ ...limits, maxQueued: 128 }).clientShare, 16);
  t.equal(new SettlementAdmission({ ...limits, maxQueued: 3 }).clientShare, 2);
  t.equal(new SettlementAdmission({ ...limits, maxQueued: 128, clientShare: 5 }).clientShare, 5);
});
