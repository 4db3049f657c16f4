// The settlement batch machine, hosted durably as the batcher hosts it, driven with fake steps: no chain, no store.
import t from 'tap';
import { fromPromise, toPromise } from 'xstate';
import type { Address, Hex, TransactionReceipt } from 'viem';
import { DurableHost } from '../../src/actors/durable-host.ts';
import { err, ok } from '../../src/protocol/result.ts';
import { batchMachine, seatedRecords, type BatchActor, type BatchMember, type MinedBatch, type SendResult, type Simulated } from '../../src/engine/batch-machine.ts';
import type { BatchRecord, PaymentRecord } from '../../src/engine/payment-record.ts';
import type { SignedTx } from '../../src/tx/trail.ts';
import type { SettlementCall } from '../../src/schemes/scheme.ts';
import type { VerifyRequest } from '../../src/protocol/x402/types.ts';
import { createLogger } from '../../src/log/logger.ts';
import { statePath } from '../../src/metrics/metrics.ts';

const network = 'eip155:8453';
const multicall = '0xcA11bde05977b3631167028862bE2a173976CA11' as Address;
const tx = (n: number): SignedTx => ({ hash: `0x${n.toString(16).padStart(64, '0')}` as Hex, data: '0x' as Hex }) as SignedTx;
const member = (id: string) => ({
  record: { id, attempt: `a-${id}`, network, payer: '', fingerprint: id, request: {} as VerifyRequest, state: 'simulating', txs: [], createdAt: 0, updatedAt: 0 } as PaymentRecord,
  call: { to: multicall, data: '0x' } as unknown as SettlementCall,
});
const newBatch = (over: Partial<BatchRecord> = {}): BatchRecord => ({ id: 'b1', network, members: [], txs: [], createdAt: 0, updatedAt: 0, ...over });

interface Fakes {
  simulate?: (members: string[]) => Promise<Simulated> | Simulated;
  /** What the node says to the send (after the trail was recorded). */
  node?: 'sent' | 'refused';
  /** Trails the confirm step records before the receipt comes (replacements). */
  replacements?: SignedTx[][];
}

/** A host running the batch machine with fake steps; `log` is everything that happened, in order. */
function hosted(fakes: Fakes = {}, opts: { failWrites?: boolean } = {}) {
  const log: string[] = [];
  const writes: Array<{ batch: BatchRecord; members: PaymentRecord[] }> = [];
  let rejectedTrail: unknown;
  const machine = batchMachine.provide({
    actors: {
      simulate: fromPromise<Simulated, { network: string; members: BatchMember[] }>(async ({ input }) => {
        log.push('simulate');
        return fakes.simulate ? fakes.simulate(input.members.map((m) => m.record.id)) : { refused: [], batch: { multicall, gas: 100_000n } };
      }),
      send: fromPromise<SendResult, { batch: BatchRecord; calls: SettlementCall[]; multicall: Address; gas: bigint }>(async ({ input }) => {
        log.push('sign');
        await host.record(input.batch.id, { type: 'trail', txs: [tx(1)] }); // throws when the write fails: nothing is sent
        log.push('broadcast');
        return fakes.node === 'refused' ? err('broadcast_rejected', 'underpriced') : ok(undefined);
      }),
      confirm: fromPromise<MinedBatch, { batch: BatchRecord }>(async ({ input }) => {
        log.push('confirm');
        let trail = input.batch.txs;
        for (const next of fakes.replacements ?? []) {
          await host.record(input.batch.id, { type: 'trail', txs: next });
          trail = next;
        }
        // A stale trail (an older list) is never taken.
        await host.record(input.batch.id, { type: 'trail', txs: [input.batch.txs[0] as SignedTx] }).catch((err: unknown) => (rejectedTrail = err));
        const last = trail.at(-1) as SignedTx;
        return { receipt: { status: 'success', transactionHash: last.hash } as TransactionReceipt, tx: last, txs: trail, calls: [], settled: [] };
      }),
    },
  });
  const host = new DurableHost({
    machine,
    log: createLogger('test', { write: () => {} }),
    durable: (snapshot, state) => {
      const { batch } = snapshot.context;
      if (batch.txs.length === 0) return undefined;
      const grown = snapshot.matches({ sending: 'signed' }) || snapshot.matches({ sent: 'replaced' });
      return { key: `${state}|${batch.txs.length}`, value: { batch: { ...batch, state }, members: grown ? seatedRecords(snapshot.context, state === 'sending' ? 'broadcasting' : 'inFlight') : [] } };
    },
    write: async (value) => {
      await new Promise((r) => setTimeout(r, 2));
      if (opts.failWrites) throw new Error('disk full');
      log.push(`write ${value.batch.state} ${value.batch.txs.length}`);
      writes.push(value);
    },
  });
  const states: string[] = [];
  const spawn = (batch: BatchRecord, members = [] as ReturnType<typeof member>[], maxSize = 3, windowMs = 20): BatchActor => {
    const actor = host.spawn(batch.id, { batch, members, maxSize, windowMs });
    actor.subscribe((s) => {
      const path = statePath(s.value);
      if (states.at(-1) !== path) states.push(path);
    });
    states.push(statePath(actor.getSnapshot().value));
    return actor;
  };
  const end = async (actor: BatchActor) => {
    await toPromise(actor).catch(() => undefined);
    await host.written('b1');
    await new Promise((r) => setTimeout(r, 10));
    return actor.getSnapshot();
  };
  return { host, spawn, end, log, writes, states, rejected: () => rejectedTrail };
}

t.test('a full batch is simulated, recorded with its members before it is sent, and mined', async (t) => {
  const h = hosted();
  const batch = h.spawn(newBatch());
  for (const id of ['p1', 'p2', 'p3']) batch.send({ type: 'join', member: member(id) });
  const end = await h.end(batch);
  t.same(h.states, ['open', 'simulating', 'sending.signing', 'sending.signed', 'sent.waiting', 'mined']);
  t.same(
    h.log,
    ['simulate', 'sign', 'write sending 1', 'broadcast', 'confirm', 'write sent 1', 'write mined 1'],
    'the signed trail is on disk before the transaction is sent; one write per durable transition',
  );
  const first = h.writes[0];
  t.same(first?.batch.members, ['p1', 'p2', 'p3'], 'the batch record names its members in call order');
  t.same(
    first?.members.map((r) => [r.id, r.state, r.batch?.id, r.batch?.index, r.batch?.tx]),
    [
      ['p1', 'broadcasting', 'b1', 0, tx(1).hash],
      ['p2', 'broadcasting', 'b1', 1, tx(1).hash],
      ['p3', 'broadcasting', 'b1', 2, tx(1).hash],
    ],
    'written with every member record naming it',
  );
  t.same(
    h.writes.slice(1).map((w) => w.members.length),
    [0, 0],
    'members are written with the batch only when its trail grows',
  );
  t.equal(end.context.mined?.tx.hash, tx(1).hash);
  t.ok(h.rejected(), 'an older trail handed in later is refused');
  t.same(
    end.context.batch.txs.map((x) => x.hash),
    [tx(1).hash],
    'and the trail kept',
  );
});

t.test('the window closes a batch that did not fill up', async (t) => {
  const h = hosted();
  const batch = h.spawn(newBatch(), [], 16, 5);
  batch.send({ type: 'join', member: member('p1') });
  batch.send({ type: 'join', member: member('p2') });
  await h.end(batch);
  t.same(h.states.slice(0, 2), ['open', 'simulating']);
  t.equal(h.states.at(-1), 'mined');
});

t.test('a lone payment is not a batch: it settles alone, nothing written', async (t) => {
  const h = hosted();
  const batch = h.spawn(newBatch(), [], 16, 1000);
  batch.send({ type: 'join', member: member('p1') });
  batch.send({ type: 'close' });
  const end = await h.end(batch);
  t.same(h.states, ['open', 'dissolved']);
  t.same(end.context.alone, ['p1']);
  t.same(h.log, [], 'nothing simulated, signed or written');
});

t.test('a member whose call reverts is refused alone; the rest ride', async (t) => {
  const h = hosted({ simulate: () => ({ refused: [{ id: 'p2', reason: 'invalid_exact_evm_insufficient_balance', message: 'call 1 reverts' }], batch: { multicall, gas: 80_000n } }) });
  const batch = h.spawn(newBatch());
  for (const id of ['p1', 'p2', 'p3']) batch.send({ type: 'join', member: member(id) });
  const end = await h.end(batch);
  t.equal(end.value, 'mined');
  t.same(
    end.context.refused.map((r) => [r.id, r.reason]),
    [['p2', 'invalid_exact_evm_insufficient_balance']],
  );
  t.same(end.context.batch.members, ['p1', 'p3']);
  t.same(
    h.writes[0]?.members.map((r) => [r.id, r.batch?.index]),
    [
      ['p1', 0],
      ['p3', 1],
    ],
    'call indices are those of the transaction sent',
  );
});

t.test('too few left after the simulation: dissolved, the rest settle alone', async (t) => {
  const h = hosted({
    simulate: () => ({
      refused: [
        { id: 'p1', reason: 'invalid_exact_evm_insufficient_balance', message: 'm' },
        { id: 'p3', reason: 'invalid_exact_evm_insufficient_balance', message: 'm' },
      ],
    }),
  });
  const batch = h.spawn(newBatch());
  for (const id of ['p1', 'p2', 'p3']) batch.send({ type: 'join', member: member(id) });
  const end = await h.end(batch);
  t.same(h.states, ['open', 'simulating', 'dissolved']);
  t.same(end.context.alone, ['p2']);
  t.same(h.writes, []);
});

t.test('a simulation that throws refuses every member; nothing is signed', async (t) => {
  const h = hosted({ simulate: () => Promise.reject(new Error('rpc down')) });
  const batch = h.spawn(newBatch());
  for (const id of ['p1', 'p2', 'p3']) batch.send({ type: 'join', member: member(id) });
  const end = await h.end(batch);
  t.same(h.states, ['open', 'simulating', 'dissolved']);
  t.same(
    end.context.refused.map((r) => r.reason),
    ['simulation_error', 'simulation_error', 'simulation_error'],
  );
  t.notOk(h.log.includes('sign'));
});

t.test('a send the node refuses fails the batch after its trail was written', async (t) => {
  const h = hosted({ node: 'refused' });
  const batch = h.spawn(newBatch());
  for (const id of ['p1', 'p2', 'p3']) batch.send({ type: 'join', member: member(id) });
  const end = await h.end(batch);
  t.same(h.states, ['open', 'simulating', 'sending.signing', 'sending.signed', 'failed']);
  t.same(end.context.failure, { reason: 'broadcast_rejected', message: 'underpriced' });
  t.notOk(h.log.includes('confirm'), 'nothing awaited');
});

t.test('a trail that cannot be written is never sent', async (t) => {
  const h = hosted({}, { failWrites: true });
  const batch = h.spawn(newBatch());
  for (const id of ['p1', 'p2', 'p3']) batch.send({ type: 'join', member: member(id) });
  const end = await h.end(batch);
  t.equal(end.value, 'failed');
  t.equal(end.context.failure?.reason, 'broadcast_error');
  t.notOk(h.log.includes('broadcast'), 'not broadcast');
});

t.test('a replacement is written with every member naming it, before it is sent', async (t) => {
  const h = hosted({ replacements: [[tx(1), tx(2)]] });
  const batch = h.spawn(newBatch());
  for (const id of ['p1', 'p2', 'p3']) batch.send({ type: 'join', member: member(id) });
  const end = await h.end(batch);
  t.same(h.states, ['open', 'simulating', 'sending.signing', 'sending.signed', 'sent.waiting', 'sent.replaced', 'mined']);
  const replaced = h.writes.find((w) => w.batch.txs.length === 2);
  t.same(
    replaced?.members.map((r) => [r.state, r.batch?.tx]),
    [
      ['inFlight', tx(2).hash],
      ['inFlight', tx(2).hash],
      ['inFlight', tx(2).hash],
    ],
  );
  t.same(
    end.context.batch.txs.map((x) => x.hash),
    [tx(1).hash, tx(2).hash],
    'the trail only grew',
  );
});

t.test('a restored batch with a trail is carried to its receipt, never signed anew; a failed one stays failed', async (t) => {
  const h = hosted();
  const batch = h.spawn(newBatch({ members: ['p1', 'p2'], txs: [tx(1)], state: 'sent' }), [member('p1'), member('p2')]);
  const end = await h.end(batch);
  t.same(h.states, ['sent.waiting', 'mined']);
  t.same(
    h.log.filter((l) => !l.startsWith('write')),
    ['confirm'],
  );
  t.equal(end.context.mined?.tx.hash, tx(1).hash);

  const failed = hosted();
  const f = failed.spawn(newBatch({ members: ['p1', 'p2'], txs: [tx(1)], state: 'failed' }));
  await failed.end(f);
  t.same(failed.states, ['failed']);
  t.same(
    failed.log.filter((l) => !l.startsWith('write')),
    [],
  );
});
