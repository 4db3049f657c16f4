// `gate402 gateway` on the devnet, paid through a payment channel by the official `@x402/fetch` with the official
// `batch-settlement` client, unchanged: the first request deposits (one transaction, settled by the real engine),
// the next N pay with signed vouchers (no transaction each), the upstream is called once per accepted voucher, the
// payer's tokens moved to the channel contract once, and the gateway's channel record charged N x price.
import t from 'tap';
import { decodePaymentResponseHeader } from '@x402/core/http';
import { erc20Abi, parseUnits, type Hex } from 'viem';
import { BATCH_SETTLEMENT_ADDRESS, CAIP2 } from '../src/chain/canonical.ts';
import { ChannelLedger, CHANNEL_RECORDS } from '../src/channels/channel-ledger.ts';
import { batchSettlementAbi } from '../src/schemes/batch-settlement/abi.ts';
import { openStore } from '../src/store/open-store.ts';
import { fromAtomic, money } from '../src/web/client/format.ts';
import { launchChromium, newContext } from './helpers/browser.ts';
import { channelBuyer, countingUpstream, decodedCredential } from './helpers/channel-buyer.ts';
import { clientsFor, freshAccount, network, tester, testDevnet } from './helpers/devnet.ts';
import { relayerTxCount, spawnPaidGateway } from './helpers/paid-gateway.ts';
import { tempDir } from './helpers/temp-dir.ts';
import { fundedPayer, stableBalance } from './helpers/payments.ts';

const manifest = testDevnet();
const upstream = await countingUpstream();
t.teardown(() => upstream.close());
// A data directory of the test's own: the channel record is read from it once the gateway has stopped.
const dataDir = tempDir('channels-door');
// Its claims wait (an exposure threshold above what it charges): what is checked is that vouchers send nothing.
const { gw, relayers } = await spawnPaidGateway(manifest, upstream.origin, { GATE402_CHANNEL_CLAIM_EXPOSURE: '1000000000' }, { dataDir });
t.teardown(() => gw.stop());

const N = 200;
const PRICE = 10_000n; // catjoke/joke: 0.01 USD

t.test(`a deposit, then ${N} vouchers: one transaction, an upstream call per request, charged ${N + 1} x price`, async (t) => {
  const n = network(manifest, CAIP2.base);
  const payer = await fundedPayer(n, CAIP2.base, tester('channels'), parseUnits('5', 6));
  const buyer = channelBuyer(n, payer, { depositMultiplier: 250 });
  const url = `${gw.url}/m/catjoke/joke`;
  const { pub } = clientsFor(n, freshAccount());
  const contractBefore = await pub.readContract({ address: n.stablecoin.address, abi: erc20Abi, functionName: 'balanceOf', args: [BATCH_SETTLEMENT_ADDRESS] });
  const nonceBefore = await pub.getTransactionCount({ address: payer.address });

  const first = await buyer.pay(url);
  t.equal(first.status, 200, await first.clone().text());
  const deposit = decodePaymentResponseHeader(first.headers.get('payment-response') as string);
  t.match(deposit, { success: true, extra: { chargedAmount: '10000', channelState: { chargedCumulativeAmount: '10000' } } }, 'the deposit request is charged one price');
  t.match(deposit.transaction, /^0x[0-9a-f]{64}$/, 'and names its deposit transaction');
  t.equal(decodedCredential(buyer.sent[0] as string).payload.type, 'deposit', 'the first credential deposits');
  const relayerTxAfterDeposit = await relayerTxCount(n, relayers);

  const calls0 = upstream.calls;
  let lastReceipt = '';
  for (let i = 1; i <= N; i++) {
    const res = await buyer.pay(url);
    if (res.status !== 200) {
      t.fail(`voucher ${i}: ${res.status} ${await res.text()}`);
      break;
    }
    lastReceipt = res.headers.get('payment-response') as string;
    await res.arrayBuffer();
  }
  const last = decodePaymentResponseHeader(lastReceipt);
  t.match(last, { success: true, extra: { chargedAmount: '10000', channelState: { chargedCumulativeAmount: String(BigInt(N + 1) * PRICE) } } }, 'the last receipt carries the cumulative charge');
  t.equal(upstream.calls - calls0, N, 'the upstream called once per accepted voucher');
  t.equal(buyer.sent.length, N + 1, 'one credential per request: no corrective round trip');
  t.ok(
    buyer.sent.slice(1).every((h) => decodedCredential(h).payload.type === 'voucher'),
    'every later credential is a voucher',
  );
  t.equal(await relayerTxCount(n, relayers), relayerTxAfterDeposit, 'no relayer transaction for any voucher');
  t.equal(await pub.getTransactionCount({ address: payer.address }), nonceBefore, 'the payer sent no transaction (the deposit is gasless for it)');

  const depositAmount = 250n * PRICE;
  t.equal(await stableBalance(n, payer.address), parseUnits('5', 6) - depositAmount, "the payer's tokens left once, for the deposit");
  const contractAfter = await pub.readContract({ address: n.stablecoin.address, abi: erc20Abi, functionName: 'balanceOf', args: [BATCH_SETTLEMENT_ADDRESS] });
  // Other test files deposit into the same contract at the same time: this channel's own balance is exact.
  t.ok(contractAfter - contractBefore >= depositAmount, 'into the channel contract');
  const channelIdOnChain = (decodedCredential(buyer.sent[0] as string).payload.voucher as { channelId: Hex }).channelId;
  const [onChainBalance, claimed] = await pub.readContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: 'channels', args: [channelIdOnChain] });
  t.same([onChainBalance, claimed], [depositAmount, 0n], "the channel holds the deposit; nothing claimed yet (claims are the claim actor's)");

  // What the payer can look up: the gateway's record of the channel, by its id, over HTTP and on the marketplace page.
  const spent = BigInt(N + 1) * PRICE;
  const viewed = await fetch(`${gw.url}/api/channels/${channelIdOnChain}`);
  t.equal(viewed.headers.get('cache-control'), 'no-store', 'a channel view is never cached');
  t.match(
    await viewed.json(),
    {
      channel: {
        channelId: channelIdOnChain,
        payer: payer.address,
        balance: String(depositAmount),
        spent: String(spent),
        remaining: String(depositAmount - spent),
        claimed: '0',
        decimals: n.stablecoin.decimals,
      },
    },
    'GET /api/channels/:id: balance (the deposit), spent (N + 1 prices), remaining, nothing claimed yet',
  );
  const malformed = await fetch(`${gw.url}/api/channels/0x1234`);
  t.match([malformed.status, await malformed.json()], [400, { error: /64 hex/ }], 'a malformed id: 400 with the reason');
  const unknown = await fetch(`${gw.url}/api/channels/0x${'ab'.repeat(32)}`);
  t.match([unknown.status, await unknown.json()], [404, { error: /no record/ }], 'a channel the gateway does not hold: 404');
  const browser = await launchChromium();
  try {
    const page = await (await newContext(browser, 'desktop')).newPage();
    await page.goto(`${gw.url}/marketplace`);
    await page.locator('#channel-id').fill(channelIdOnChain);
    await page.locator('#channel-show').click();
    const shown = (field: string) => page.locator(`#channel-view dd[data-field="${field}"]`).textContent();
    await t.resolves(page.locator('#channel-view').waitFor(), 'the marketplace page shows the channel');
    // As the page writes amounts: the token's units to the cent (or beyond where not zero), and its symbol.
    const shownAs = (atomic: bigint) => `${money(fromAtomic(atomic, n.stablecoin.decimals))} ${n.stablecoin.symbol}`;
    t.equal(await shown('balance'), shownAs(depositAmount), 'its balance: the deposit');
    t.equal(await shown('spent'), shownAs(spent), 'what was spent');
    t.equal(await shown('remaining'), shownAs(depositAmount - spent), 'and what is left');
  } finally {
    await browser.close();
  }

  await gw.stop();
  const store = await openStore({ dataDir });
  t.teardown(() => store.close());
  const channelId = (decodedCredential(buyer.sent[0] as string).payload.voucher as { channelId: Hex }).channelId;
  const held = await new ChannelLedger(store.claims(CHANNEL_RECORDS)).read(channelId);
  t.same(
    [held?.record.charged, held?.record.signedMaxClaimable, held?.record.balance, held?.record.pending],
    [String(BigInt(N + 1) * PRICE), String(BigInt(N + 1) * PRICE), String(depositAmount), undefined],
    'the record: charged N x price, the highest voucher held, nothing pending',
  );
});
