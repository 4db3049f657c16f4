import t from 'tap';
import { maxUint256, parseUnits, type Address } from 'viem';
import { CAIP2 } from '../src/chain/canonical.ts';
import { stablecoinArtifact, stockTokenArtifact } from '../src/devnet/contracts/artifacts/index.ts';
import { uniswapArtifacts } from '../src/devnet/contracts/uniswap.ts';
import { parseDecimalAmount } from '../src/protocol/amounts.ts';
import { clientsFor, network, tester, testDevnet } from './helpers/devnet.ts';
import { poolsOf } from './helpers/stock-pools.ts';

const manifest = testDevnet();
const n = network(manifest, CAIP2.stockChain);
const { pub, wallet } = clientsFor(n, tester('swaps'));
const stable = n.stablecoin.address;
const uni = n.uniswap;
const stocks = poolsOf(n, 'seedPrice');

t.equal(n.stocks?.length, 14, 'fourteen stocks are listed');
t.ok(uni, 'uniswap is deployed');

// Only on the pools no other file trades on: each is still at its seed price, and nothing moves it between the quote and the swap.
t.test('stablecoin B buys each stock of its pools through the router for exactly the QuoterV2 quote', async (t) => {
  if (!uni) return;
  const me = wallet.account.address;
  const amountIn = parseUnits('1000', 6); // the largest order size
  await pub.waitForTransactionReceipt({ hash: await wallet.writeContract({ address: stable, abi: stablecoinArtifact.abi, functionName: 'mint', args: [me, amountIn * BigInt(stocks.length)] }) });
  await pub.waitForTransactionReceipt({ hash: await wallet.writeContract({ address: stable, abi: stablecoinArtifact.abi, functionName: 'approve', args: [uni.router, maxUint256] }) });
  for (const stock of stocks) {
    const fee = stock.fee;
    const { result } = await pub.simulateContract({
      address: uni.quoter,
      abi: uniswapArtifacts.quoterV2.abi,
      functionName: 'quoteExactInputSingle',
      args: [{ tokenIn: stable, tokenOut: stock.address, amountIn, fee, sqrtPriceLimitX96: 0n }],
    });
    const quoted = (result as readonly [bigint, bigint, number, bigint])[0];
    const before = (await pub.readContract({ address: stock.address, abi: stockTokenArtifact.abi, functionName: 'balanceOf', args: [me] })) as bigint;
    const block = await pub.getBlock();
    const hash = await wallet.writeContract({
      address: uni.router,
      abi: uniswapArtifacts.router.abi,
      functionName: 'exactInputSingle',
      args: [{ tokenIn: stable, tokenOut: stock.address, fee, recipient: me as Address, deadline: block.timestamp + 60n, amountIn, amountOutMinimum: quoted, sqrtPriceLimitX96: 0n }],
    });
    t.equal((await pub.waitForTransactionReceipt({ hash })).status, 'success', `${stock.symbol} swap succeeds`);
    const received = ((await pub.readContract({ address: stock.address, abi: stockTokenArtifact.abi, functionName: 'balanceOf', args: [me] })) as bigint) - before;
    t.equal(received, quoted, `${stock.symbol}: received exactly the quote`);
    // Sanity of the seeded price: 1000 USD buys 1000/price shares, less the 0.3% fee and a little price impact.
    const price = parseDecimalAmount(stock.seedPriceUsd, 6) as bigint;
    const ideal = (amountIn * 10n ** 18n) / price;
    t.ok(received < ideal && received > (ideal * 9950n) / 10000n, `${stock.symbol}: ${received} shares is within 0.5% of ${ideal}`);
  }
});
