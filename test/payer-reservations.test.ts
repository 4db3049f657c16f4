import t from 'tap';
import { PayerReservations } from '../src/engine/payer-reservations.ts';

const payer = { network: 'eip155:31337', token: '0xToken', payer: '0xAttacker' };
const at = (block: bigint, value: bigint) => ({ block, value });

t.test('a payer has in flight at most what its balance covers', async (t) => {
  const r = new PayerReservations();
  const first = r.reserve(payer, 10n, at(5n, 25n));
  const second = r.reserve(payer, 10n, at(5n, 25n));
  t.ok(first && second, 'two payments of 10 from 25: both admitted');
  t.equal(r.reserve(payer, 10n, at(5n, 25n)), undefined, 'a third would overdraw: refused');
  t.equal(r.available(payer, at(5n, 25n)), 5n);
  t.ok(r.reserve(payer, 5n, at(5n, 25n)), 'what is left is still admitted');
  t.equal(r.reserve({ ...payer, payer: '0xOther' }, 25n, at(5n, 25n)) !== undefined, true, 'another payer has a balance of its own');
  t.equal(r.reserve({ ...payer, token: '0xOtherToken' }, 10n, at(5n, 0n)), undefined, 'and another token too');
});

t.test('a payer with no balance is refused; so is a zero or negative amount', async (t) => {
  const r = new PayerReservations();
  t.equal(r.reserve(payer, 1n, at(1n, 0n)), undefined);
  t.equal(r.reserve(payer, 0n, at(1n, 100n)), undefined);
  t.equal(r.reserve(payer, -1n, at(1n, 100n)), undefined);
  t.equal(r.size, 0, 'nothing is kept for a refused payer');
});

t.test('a failed payment gives its amount back at once', async (t) => {
  const r = new PayerReservations();
  const p = r.reserve(payer, 10n, at(7n, 10n));
  t.equal(r.reserve(payer, 10n, at(7n, 10n)), undefined, 'balance taken');
  p?.release();
  p?.release(9n);
  t.ok(r.reserve(payer, 10n, at(7n, 10n)), 'released (once: the second release changes nothing)');
});

t.test('a settled payment stays counted until a balance read at a block that shows its transfer', async (t) => {
  const r = new PayerReservations();
  // Funded for 10 at block 7; the payment settles, seen mined by head 9.
  r.reserve(payer, 10n, at(7n, 10n))?.release(9n);
  t.equal(r.reserve(payer, 10n, at(7n, 10n)), undefined, 'the balance read at block 7 still holds the spent 10: refused');
  t.equal(r.reserve(payer, 10n, at(8n, 10n)), undefined, 'at block 8 too (the transfer is only known by 9)');
  t.equal(r.reserve(payer, 1n, at(9n, 0n)), undefined, 'at block 9 the balance shows it: 0 left, refused');
  t.equal(r.size, 0, 'and the hold is dropped once a read shows it');
  t.ok(r.reserve(payer, 10n, at(10n, 10n)), 'funded again at block 10: admitted');
});

t.test('a settled payment whose head is not known is held past the block it was reserved at', async (t) => {
  const r = new PayerReservations();
  r.reserve(payer, 10n, at(7n, 10n))?.release(0n);
  t.equal(r.reserve(payer, 10n, at(7n, 10n)), undefined, 'the same block: held');
  t.ok(r.reserve(payer, 10n, at(8n, 20n)), 'the next block is read afresh');
});

t.test('holds of payers that never come back are swept once many payers have them', async (t) => {
  const r = new PayerReservations();
  for (let i = 0; i < 5000; i++) r.reserve({ ...payer, payer: `0xa${i}` }, 1n, at(1n, 1n))?.release(2n);
  t.equal(r.size, 5000, 'held: no read at block 2 yet');
  t.ok(r.reserve({ ...payer, network: 'eip155:1', payer: '0xA' }, 1n, at(1n, 1n)), 'a payment on another network');
  // Reads at block 3 (of other payers of the network) show every transfer by block 2.
  for (let i = 0; i < 5000; i++) r.reserve({ ...payer, payer: `0xb${i}` }, 1n, at(3n, 1n))?.release(4n);
  t.equal(r.size, 5001, 'swept: the first 5,000 are gone; the new 5,000 and the other network stay');
  t.equal(r.reserve({ ...payer, network: 'eip155:1', payer: '0xA' }, 1n, at(50n, 1n)), undefined, "another network's reservation is not swept by this network's blocks");
});
