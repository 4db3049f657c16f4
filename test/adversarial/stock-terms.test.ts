/**
 * Attacks on the terms of a stock buy, against a real gateway over sockets, checked on the chain afterwards.
 *
 * The buyer's Permit2 signature covers the amount, the desk and a nonce, not what is bought: the gateway signs the
 * rest (stock, amount, recipient, floor) into the quote the official client echoes in `accepted.extra.quote`, and
 * the paid retry takes every term from there. Whoever holds a payment header (a proxy, a log) must not be able to
 * send the shares elsewhere, buy another stock or lower the floor: each attempt is refused before settlement, and
 * nothing moves (the payer's and the desk's balances, the relayer's and the desk's nonces). A payment that moved on
 * chain while its settlement reported failure still ends delivered or refunded, and a refund that cannot be sent
 * at first is retried until it is mined.
 */
import t from 'tap';
import { createHmac, randomBytes } from 'node:crypto';
import { decodeFunctionData, parseEther, parseUnits, toHex, type Address, type Hex, type LocalAccount } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { x402Client } from '@x402/core/client';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import { CAIP2 } from '../../src/chain/canonical.ts';
import { uniswapArtifacts } from '../../src/devnet/contracts/uniswap.ts';
import { rpcCall } from '../../src/chain/rpc.ts';
import { decodePaymentRequiredHeader, encodePaymentSignatureHeader } from '../../src/protocol/x402/headers.ts';
import type { PaymentPayload, PaymentRequirements } from '../../src/protocol/x402/types.ts';
import { signQuote, type SignedQuote } from '../../src/stock/terms.ts';
import { clientsFor, freshAccount, network, tester, testDevnet, TEST_MANIFEST_PATH } from '../helpers/devnet.ts';
import { fundedPayer, officialPayment, stableBalance } from '../helpers/payments.ts';
import { spawnFacilitator } from '../helpers/spawn-facilitator.ts';
import { buyInPool, gassedKey, officialBuyer, tokenBalance } from '../helpers/stock.ts';
import { poolsOf } from '../helpers/stock-pools.ts';
import { exactPermit2ProxyAbi, settleArgs, signWitnessPermit, type WitnessPermit } from '../helpers/permit2.ts';

const manifest = testDevnet();
const n = network(manifest, CAIP2.stockChain);
const funder = tester('attackStock');
const [meta, nflx] = poolsOf(n, 'attackStock');
if (!meta || !nflx || !n.uniswap || !n.exactPermit2Proxy) throw new Error('the devnet lists no META/NFLX pools or no router');
const { pub, wallet } = clientsFor(n, funder);

// A secret the test knows, so that it can make a quote the gateway signed in every respect but its age.
const mppSecret = `stock-terms-${randomBytes(24).toString('hex')}`;
const quoteKey = createHmac('sha256', new TextEncoder().encode(mppSecret)).update('gate402 stock quote').digest();
const deskKey = await gassedKey(n);
const desk = privateKeyToAccount(deskKey).address;
const relayerKey = await gassedKey(n);
const relayer = privateKeyToAccount(relayerKey).address;
const gw = await spawnFacilitator({
  part: 'gateway',
  manifestPath: TEST_MANIFEST_PATH,
  env: {
    GATE402_STOCK_ENABLED: 'true',
    GATE402_STOCK_DESK_KEY: deskKey,
    GATE402_RELAYER_KEYS: relayerKey,
    GATE402_MPP_SECRET: mppSecret,
    GATE402_CONFIRM_DEADLINE_MS: '30000',
    GATE402_STOCK_REFUND_RETRY_MS: '300',
  },
});
t.teardown(() => gw.stop());

type Order = {
  orderId: string;
  status: string;
  payer: Address;
  recipient: Address;
  deliveredAtomic?: string;
  settlementTx?: string;
  swapTx?: Hex;
  refundTx?: Hex;
  refundAttempts?: number;
  failure?: { reason: string };
  error?: string;
};
type Answer = { status: number; body: Order; paymentRequired: string | null; paymentResponse: string | null };

/** The gateway's 402 offer (with its signed quote) for a buy. */
async function offerFor(query: string): Promise<PaymentRequirements> {
  const res = await fetch(`${gw.url}/api/stock/buy?${query}`, { method: 'POST' });
  await res.arrayBuffer();
  const required = decodePaymentRequiredHeader(res.headers.get('payment-required') ?? '');
  if (res.status !== 402 || !required.ok || !required.value.accepts[0]) throw new Error(`no 402 terms for ${query}: ${res.status}`);
  return required.value.accepts[0];
}

async function paidPost(query: string, payment: PaymentPayload): Promise<Answer> {
  const res = await fetch(`${gw.url}/api/stock/buy?${query}`, { method: 'POST', headers: { 'payment-signature': encodePaymentSignatureHeader(payment) } });
  return { status: res.status, body: (await res.json()) as Order, paymentRequired: res.headers.get('payment-required'), paymentResponse: res.headers.get('payment-response') };
}

const quoteOf = (offer: PaymentRequirements) => offer.extra?.quote as SignedQuote;
/** The same payment, its echoed quote replaced by `quote` (undefined removes it). */
function withQuote(payment: PaymentPayload, quote: unknown): PaymentPayload {
  const extra: Record<string, unknown> = { ...payment.accepted.extra };
  if (quote === undefined) delete extra.quote;
  else extra.quote = quote;
  return { ...payment, accepted: { ...payment.accepted, extra } };
}

/** What a victim would check: balances of stablecoin B and of the stocks, and the nonces of the desk and the relayer. */
async function snapshot(watch: Address[]) {
  const [deskNonce, relayerNonce, deskStable] = await Promise.all([pub.getTransactionCount({ address: desk }), pub.getTransactionCount({ address: relayer }), stableBalance(n, desk)]);
  const held = await Promise.all(watch.flatMap((a) => [stableBalance(n, a), tokenBalance(n, meta!.address, a), tokenBalance(n, nflx!.address, a)]));
  return { deskNonce, relayerNonce, deskStable, held: held.map(String) };
}

t.test('a tampered signed quote is refused before settlement, and nothing moves', async (t) => {
  const payer = await fundedPayer(n, CAIP2.stockChain, funder, parseUnits('10', 6));
  const attacker = freshAccount().address;
  const query = 'symbol=META&stable_amount=2';
  const offer = await offerFor(query);
  const quote = quoteOf(offer);
  t.same([quote.symbol, quote.amount, quote.recipient], ['META', '2000000', ''], 'the quote names the stock, the amount, and the payer as recipient');
  const payment = await officialPayment(payer, offer);
  const before = await snapshot([payer.address, attacker]);

  const forged = signQuote(randomBytes(32), { ...quote }, { network: CAIP2.stockChain, desk });
  const expired = signQuote(quoteKey, { ...quote, expires: Math.floor(Date.now() / 1000) - 1 }, { network: CAIP2.stockChain, desk });
  const cases: Array<[string, string, unknown, number, RegExp]> = [
    ['the recipient changed to the attacker', `${query}&recipient=${attacker}`, { ...quote, recipient: attacker }, 400, /altered/],
    ['the floor lowered to zero', query, { ...quote, minShares: '0' }, 400, /altered/],
    ['the estimate raised', query, { ...quote, shares: `${BigInt(quote.shares) * 2n}` }, 400, /altered/],
    ['another stock for the same amount', 'symbol=NFLX&stable_amount=2', { ...quote, symbol: 'NFLX' }, 400, /altered/],
    ['its life extended', query, { ...quote, expires: quote.expires + 3600 }, 400, /altered/],
    ['an older block named', query, { ...quote, block: '0' }, 400, /altered/],
    ['signed with another key', query, forged, 400, /altered/],
    ['not an object', query, 'quote', 400, /altered/],
    ['expired (signed with the real key)', query, expired, 402, /expired/],
    ['left out', query, undefined, 402, /no signed quote/],
  ];
  for (const [label, q, echoed, status, why] of cases) {
    const answer = await paidPost(q, withQuote(payment, echoed));
    t.equal(answer.status, status, `${label}: ${status}`);
    t.match(answer.body.error, why, `${label}: says why (${answer.body.error})`);
    t.match(answer.body.error, /nothing was charged/, `${label}: nothing was charged`);
    t.equal(answer.paymentResponse, null, `${label}: no settlement`);
    t.equal(answer.body.orderId, undefined, `${label}: no order`);
    if (status === 402) t.ok(answer.paymentRequired, `${label}: fresh terms to pay against`);
  }
  t.same(await snapshot([payer.address, attacker]), before, 'balances and nonces are as they were: the relayer and the desk sent nothing');

  // The payment itself was good all along: untouched, it buys what it was quoted for.
  const honest = await paidPost(query, payment);
  t.equal(honest.status, 200, `the untampered payment buys (${honest.body.error ?? honest.body.status})`);
  t.equal(honest.body.recipient, payer.address, 'for the payer');
  t.equal(await tokenBalance(n, meta.address, payer.address), BigInt(honest.body.deliveredAtomic ?? -1), 'who holds exactly the delivered META');
  t.equal(await tokenBalance(n, meta.address, attacker), 0n, 'the attacker holds none');
});

t.test('the query of the paid retry cannot pick another recipient, stock or amount', async (t) => {
  const payer = await fundedPayer(n, CAIP2.stockChain, funder, parseUnits('10', 6));
  const recipient = freshAccount().address;
  const attacker = freshAccount().address;
  const query = `symbol=NFLX&stable_amount=1.5&recipient=${recipient}`;
  const offer = await offerFor(query);
  t.equal(quoteOf(offer).recipient, recipient, 'the quote names the recipient');
  const payment = await officialPayment(payer, offer);
  const before = await snapshot([payer.address, recipient, attacker]);
  const cases: Array<[string, string]> = [
    ['another recipient', `symbol=NFLX&stable_amount=1.5&recipient=${attacker}`],
    ['no recipient (the payer)', 'symbol=NFLX&stable_amount=1.5'],
    ['another stock', `symbol=META&stable_amount=1.5&recipient=${recipient}`],
    ['another amount', `symbol=NFLX&stable_amount=1&recipient=${recipient}`],
    ['an amount that is no amount', `symbol=NFLX&stable_amount=x&recipient=${recipient}`],
  ];
  for (const [label, q] of cases) {
    const answer = await paidPost(q, payment);
    t.equal(answer.status, 400, `${label}: 400`);
    t.match(answer.body.error, /disagrees with the signed quote.*nothing was charged/, `${label}: says why (${answer.body.error})`);
    t.equal(answer.paymentResponse, null, `${label}: no settlement`);
  }
  t.same(await snapshot([payer.address, recipient, attacker]), before, 'nothing moved, nothing was sent');

  const honest = await paidPost(`symbol=nflx&stable_amount=1.500000&recipient=${recipient.toLowerCase()}`, payment);
  t.equal(honest.status, 200, `the same terms written differently buy (${honest.body.error ?? honest.body.status})`);
  t.equal(await tokenBalance(n, nflx.address, recipient), BigInt(honest.body.deliveredAtomic ?? -1), 'the quoted recipient holds the shares');
  t.equal(await tokenBalance(n, nflx.address, attacker), 0n, 'the attacker none');
  t.equal(await tokenBalance(n, nflx.address, payer.address), 0n, 'the payer none');
});

t.test('the official client: delivered at least the signed floor, and the swap on chain has exactly that floor as amountOutMinimum', async (t) => {
  const payer = await fundedPayer(n, CAIP2.stockChain, funder, parseUnits('10', 6));
  const recipient = freshAccount().address;
  let signed: SignedQuote | undefined;
  // Reads the terms the official client is about to pay, without changing anything it sees.
  const watching: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    const required = res.status === 402 ? decodePaymentRequiredHeader(res.headers.get('payment-required') ?? '') : undefined;
    if (required?.ok && required.value.accepts[0]) signed = quoteOf(required.value.accepts[0]);
    return res;
  };
  const client = registerExactEvmScheme(x402Client.fromConfig({ schemes: [], spendControls: false }), { signer: payer });
  const res = await wrapFetchWithPayment(watching, client)(`${gw.url}/api/stock/buy?symbol=META&stable_amount=3&recipient=${recipient}`, { method: 'POST' });
  const body = (await res.json()) as Order;
  t.equal(res.status, 200, `bought (${body.error ?? body.status})`);
  if (!signed) throw new Error('the official client paid no 402');
  t.equal(signed.recipient, recipient, 'the quote it paid names the recipient');

  const swap = await pub.getTransaction({ hash: body.swapTx as Hex });
  t.equal(swap.to?.toLowerCase(), n.uniswap!.router.toLowerCase(), 'the swap calls the router');
  const call = decodeFunctionData({ abi: uniswapArtifacts.router.abi, data: swap.input });
  t.equal(call.functionName, 'exactInputSingle', 'an exactInputSingle');
  const params = (call.args as readonly [{ tokenIn: Address; tokenOut: Address; recipient: Address; amountIn: bigint; amountOutMinimum: bigint }])[0];
  t.equal(params.amountOutMinimum, BigInt(signed.minShares), `amountOutMinimum is the signed floor, ${signed.minShares}`);
  t.ok(BigInt(signed.minShares) > 0n && BigInt(signed.minShares) < BigInt(signed.shares), 'a floor below the estimate, above zero');
  t.equal(params.tokenOut.toLowerCase(), meta.address.toLowerCase(), 'buys META');
  t.equal(params.recipient.toLowerCase(), recipient.toLowerCase(), 'for the quoted recipient');
  t.equal(params.amountIn, 3_000_000n, 'with exactly the paid amount');
  const delivered = BigInt(body.deliveredAtomic ?? -1);
  t.equal(await tokenBalance(n, meta.address, recipient), delivered, 'the recipient holds exactly what was delivered');
  t.ok(delivered >= BigInt(signed.minShares), `delivered ${delivered} >= the signed floor ${signed.minShares}`);
});

t.test('front-run: the same authorization sent to the chain by someone else first; the order still delivers', async (t) => {
  const payer = await fundedPayer(n, CAIP2.stockChain, funder, parseUnits('10', 6));
  const query = 'symbol=NFLX&stable_amount=2';
  const payment = await officialPayment(payer, await offerFor(query));
  if (!('permit2Authorization' in payment.payload)) throw new Error('not a Permit2 payment');
  const { signature, permit2Authorization: p } = payment.payload;
  const stableBefore = await stableBalance(n, payer.address);
  const deskStableBefore = await stableBalance(n, desk);
  const relayerNonce = await pub.getTransactionCount({ address: relayer });

  // Someone who saw the header (or the call in the mempool) settles it first, from their own account.
  const frontRun = await pub.waitForTransactionReceipt({
    hash: await wallet.writeContract({
      address: n.exactPermit2Proxy!,
      abi: exactPermit2ProxyAbi,
      functionName: 'settle',
      args: [
        { permitted: { token: p.permitted.token as Address, amount: BigInt(p.permitted.amount) }, nonce: BigInt(p.nonce), deadline: BigInt(p.deadline) },
        p.from as Address,
        { to: p.witness.to as Address, validAfter: BigInt(p.witness.validAfter) },
        signature as Hex,
      ],
    }),
  });
  t.equal(frontRun.status, 'success', 'the copied authorization settles for the front-runner');
  t.equal(stableBefore - (await stableBalance(n, payer.address)), 2_000_000n, 'the payer is charged: the desk holds the stablecoin');
  t.equal((await stableBalance(n, desk)) - deskStableBefore, 2_000_000n, 'the desk received it');

  const answer = await paidPost(query, payment);
  t.not(answer.body.status, 'rejected', `not "rejected, nothing charged" (${answer.body.error ?? ''})`);
  t.equal(answer.status, 200, `the order goes on and delivers (${answer.body.error ?? answer.body.status})`);
  t.equal(answer.body.status, 'delivered', 'delivered');
  t.equal(await tokenBalance(n, nflx.address, payer.address), BigInt(answer.body.deliveredAtomic ?? -1), 'the payer holds exactly the delivered NFLX');
  t.equal(stableBefore - (await stableBalance(n, payer.address)), 2_000_000n, 'charged once');
  t.equal(await stableBalance(n, desk), deskStableBefore, 'the desk keeps nothing: the stablecoin went into the swap');
  t.equal(await pub.getTransactionCount({ address: relayer }), relayerNonce, 'our relayer sent nothing for it');
});

t.test('a refund that cannot be sent at first (the desk is out of gas) is retried until it is mined', async (t) => {
  const payer = await fundedPayer(n, CAIP2.stockChain, funder, parseUnits('30', 6));
  const before = await stableBalance(n, payer.address);
  const deskNonce = await pub.getTransactionCount({ address: desk });
  const deskGas = await pub.getBalance({ address: desk });
  // After the 402 and before the paid retry: a trader moves META far above the floor, and the desk runs dry of gas.
  const moveAndDrain = async () => {
    t.equal((await buyInPool(n, funder, meta, parseUnits('400000', 6))).status, 'success', 'a trader buys META in size');
    await rpcCall(n.rpcUrl, 'anvil_setBalance', [desk, '0x0']);
  };
  const buying = (async () => {
    const res = await officialBuyer(payer as LocalAccount, moveAndDrain)(`${gw.url}/api/stock/buy?symbol=META&stable_amount=20`, { method: 'POST' });
    return { status: res.status, body: (await res.json()) as Order };
  })();
  try {
    let seen: Order | undefined;
    for (let i = 0; i < 600 && !(seen && (seen.refundAttempts ?? 0) >= 2); i++) {
      await new Promise((r) => setTimeout(r, 100));
      const feed = (await (await fetch(`${gw.url}/api/stock/orders?payer=${payer.address}`)).json()) as { orders: Order[] };
      seen = feed.orders[0];
    }
    t.ok(seen && (seen.refundAttempts ?? 0) >= 2, `the refund failed and was tried again (${seen?.status}, ${seen?.refundAttempts} attempts)`);
    t.equal(seen?.refundTx, undefined, 'nothing was mined meanwhile');
    t.equal(await pub.getTransactionCount({ address: desk }), deskNonce, 'nor sent');
  } finally {
    await rpcCall(n.rpcUrl, 'anvil_setBalance', [desk, toHex(deskGas > 0n ? deskGas : parseEther('10'))]);
  }
  const { status, body } = await buying;
  t.equal(status, 502, 'delivery failed');
  t.equal(body.status, 'refunded', `refunded (${body.error})`);
  t.equal(body.failure?.reason, 'below_slippage_floor', 'because the price moved below the floor');
  t.equal((await pub.getTransactionReceipt({ hash: body.refundTx as Hex })).status, 'success', 'the refund is on chain');
  t.equal(await stableBalance(n, payer.address), before, "the payer's stablecoin B is back");
  t.equal(await tokenBalance(n, meta.address, payer.address), 0n, 'no META was delivered');
  t.equal(await pub.getTransactionCount({ address: desk }), deskNonce + 1, 'the desk sent one transaction in all: the refund');
});

t.test('a payment whose nonce was spent elsewhere first is rejected: the desk received nothing, so nothing was charged', async (t) => {
  const payer = await fundedPayer(n, CAIP2.stockChain, funder, parseUnits('10', 6));
  const elsewhere = freshAccount().address;
  const query = 'symbol=NFLX&stable_amount=2';
  const payment = await officialPayment(payer, await offerFor(query));
  if (!('permit2Authorization' in payment.payload)) throw new Error('not a Permit2 payment');
  const p = payment.payload.permit2Authorization;
  // The payer spends the same Permit2 nonce on another payment (1 stablecoin B to someone else) before the buy settles.
  const other: WitnessPermit = {
    permitted: { token: n.stablecoin.address, amount: 1_000_000n },
    spender: n.exactPermit2Proxy!,
    nonce: BigInt(p.nonce),
    deadline: BigInt(p.deadline),
    witness: { to: elsewhere, validAfter: 0n },
  };
  const spent = await pub.waitForTransactionReceipt({
    hash: await wallet.writeContract({
      address: n.exactPermit2Proxy!,
      abi: exactPermit2ProxyAbi,
      functionName: 'settle',
      args: settleArgs(payer.address, other, await signWitnessPermit(payer, n.chainId, other)),
    }),
  });
  t.equal(spent.status, 'success', 'the nonce is spent on the other payment');
  const before = await snapshot([payer.address, elsewhere]);

  const answer = await paidPost(query, payment);
  t.equal(answer.status, 402, `refused (${answer.body.error})`);
  t.equal(answer.body.status, 'rejected', 'the order is rejected');
  t.match(answer.body.error, /nothing was charged/, 'saying nothing was charged');
  t.same(await snapshot([payer.address, elsewhere]), before, 'and truly nothing moved: balances and nonces as they were');
  t.equal(await stableBalance(n, elsewhere), 1_000_000n, 'the other payment is the only one the nonce made');
});
