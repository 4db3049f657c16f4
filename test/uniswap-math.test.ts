import t from 'tap';
import { fullRangeTicks, isqrt, sqrtPriceX96ForStockPrice, stockPriceFromSqrtPriceX96 } from '../src/chain/uniswap-math.ts';
import { formatDecimalAmount, parseDecimalAmount } from '../src/protocol/amounts.ts';

t.test('decimal amounts are exact', async (t) => {
  t.equal(parseDecimalAmount('0.005000', 6), 5000n);
  t.equal(parseDecimalAmount('1000', 6), 1_000_000_000n);
  t.equal(parseDecimalAmount('1000.000001', 6), 1_000_000_001n);
  for (const bad of ['', '-1', '1e3', ' 1', '0.0000001', '01', '1.', 'abc', '0x10', '1,5']) t.equal(parseDecimalAmount(bad, 6), undefined, `'${bad}' is refused`);
  t.equal(formatDecimalAmount(5000n, 6), '0.005000');
  t.equal(formatDecimalAmount(1_000_000n, 6), '1.000000');
});

t.test('isqrt is the exact floor square root', async (t) => {
  for (const n of [0n, 1n, 2n, 3n, 4n, 15n, 16n, 17n, (1n << 200n) + 12345n, 10n ** 60n - 1n]) {
    const r = isqrt(n);
    t.ok(r * r <= n && (r + 1n) * (r + 1n) > n, `isqrt(${n})`);
  }
});

t.test('a seeded price reads back from sqrtPriceX96 in either token order', async (t) => {
  for (const stableIsToken0 of [true, false]) {
    const price = 342_150_000n; // 342.15 USD
    const back = stockPriceFromSqrtPriceX96(sqrtPriceX96ForStockPrice(price, 18, stableIsToken0), 18, stableIsToken0);
    t.ok(back >= price - 1n && back <= price + 1n, `${back} ~ ${price} (stable is token${stableIsToken0 ? 0 : 1})`);
  }
  t.same(fullRangeTicks(3000), { tickLower: -887220, tickUpper: 887220 });
});
