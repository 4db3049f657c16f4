import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eip3009NonceKey, permit2NonceKey } from '../src/store/nonce-claims.ts';
import { openStore } from '../src/store/open-store.ts';

const made: string[] = [];
const dir = () => {
  const d = mkdtempSync(join(tmpdir(), 'gate402-store-'));
  made.push(d);
  return d;
};
// Registered first, so it runs after each test's own teardown has closed its store.
t.teardown(() => {
  for (const d of made) rmSync(d, { recursive: true, force: true });
});

t.test('of 50 concurrent claims on one nonce exactly one wins, and all agree who', async (t) => {
  const store = openStore(dir());
  t.teardown(() => store.close());
  const results = await Promise.all(Array.from({ length: 50 }, (_, i) => store.nonces.claim('k', `payment-${i}`)));
  const winners = results.flatMap((r, i) => (r.claimed ? [`payment-${i}`] : []));
  t.equal(winners.length, 1, 'one winner');
  for (const r of results) if (!r.claimed) t.equal(r.holder, winners[0], 'losers learn the winner');
  t.equal(store.nonces.holder('k'), winners[0]);
  t.same(await store.nonces.claim('k', 'late'), { claimed: false, holder: winners[0] }, 'a later claim loses too');
});

t.test('nonce keys name the on-chain uniqueness scope', async (t) => {
  const a = eip3009NonceKey('eip155:8453', '0xAbC0000000000000000000000000000000000001', '0xDef0000000000000000000000000000000000002', '0xAA');
  t.equal(a, eip3009NonceKey('eip155:8453', '0xabc0000000000000000000000000000000000001', '0xdef0000000000000000000000000000000000002', '0xaa'), 'case does not make a new key');
  t.not(a, eip3009NonceKey('eip155:84532', '0xabc0000000000000000000000000000000000001', '0xdef0000000000000000000000000000000000002', '0xaa'), 'another network is another key');
  t.equal(permit2NonceKey('eip155:4663', '0xDef0000000000000000000000000000000000002', 255n), permit2NonceKey('eip155:4663', '0xdef0000000000000000000000000000000000002', '255'));
});

t.test('an acknowledged write survives SIGKILL of the writer', async (t) => {
  const path = dir();
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/store-writer.ts', path, 'pay-1'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const line = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => resolve(d.toString()));
    child.once('exit', (code) => reject(new Error(`writer exited ${code}`)));
  });
  t.match(line, /written true/);
  child.kill('SIGKILL');
  await new Promise((r) => child.once('exit', r));
  const store = openStore(path);
  t.teardown(() => store.close());
  t.same(store.collection('payments').get('pay-1'), { amount: '10000' }, 'the record is there after the crash');
  t.equal(store.nonces.holder('nonce-pay-1'), 'pay-1', 'so is the nonce claim');
});

t.test('records list by prefix in key order', async (t) => {
  const store = openStore(dir());
  t.teardown(() => store.close());
  const c = store.collection<number>('orders');
  await Promise.all([c.put('b:2', 2), c.put('a:1', 1), c.put('b:1', 1), c.put('c:1', 3)]);
  t.same([...c.entries('b:')], [['b:1', 1], ['b:2', 2]]);
  t.equal([...c.entries()].length, 4);
});
