/**
 * The real default limits, as `npm start` runs them (every other spawned service lifts them): the facilitator's per-IP
 * bucket on verify/settle and the gas sponsorship's per-IP bucket. What they refuse is a 429 with `Retry-After` and
 * a JSON reason, and it costs nothing: no transfer, no relayer or desk transaction.
 */
import t from 'tap';
import { parseEther, parseUnits, toHex, type Address } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { CAIP2, SUPPORTED_NETWORKS } from '../../src/chain/canonical.ts';
import { stablecoinArtifact } from '../../src/devnet/contracts/artifacts/index.ts';
import { rpcCall } from '../../src/chain/rpc.ts';
import { clientsFor, freshAccount, network, tester, testDevnet, TEST_MANIFEST_PATH } from '../helpers/devnet.ts';
import { fundedPayer, officialPayment, requirementsFor, stableBalance } from '../helpers/payments.ts';
import { spawnFacilitator } from '../helpers/spawn-facilitator.ts';
import { gassedKey } from '../helpers/stock.ts';

const manifest = testDevnet();
const funder = tester('attackFacilitator');
const base = network(manifest, CAIP2.base);
const stock = network(manifest, CAIP2.stockChain);

/** Sum of the pending nonces of `addresses` on `n`: how many transactions they have sent there. */
async function sent(n: typeof base, addresses: Address[]): Promise<number> {
  const { pub } = clientsFor(n, funder);
  const nonces = await Promise.all(addresses.map((address) => pub.getTransactionCount({ address, blockTag: 'pending' })));
  return nonces.reduce((a, b) => a + b, 0);
}

t.test('the facilitator per-IP default: a burst of 100 settles, the excess 429 and free', async (t) => {
  const relayerKeys = [await gassedKey(base), await gassedKey(base)];
  const relayers = relayerKeys.map((k) => privateKeyToAccount(k).address);
  for (const caip2 of SUPPORTED_NETWORKS) {
    if (caip2 !== CAIP2.base) for (const r of relayers) await rpcCall(network(manifest, caip2).rpcUrl, 'anvil_setBalance', [r, toHex(parseEther('10'))]);
  }
  // No rate setting at all: the defaults. The settlement queue's wait bound is lifted: on a loaded machine the burst's
  // first batch can take longer than its default 0.5 s to leave, and the bound would then shed (503 queue_slow, nothing
  // settled) payments this test expects the rate limit alone to decide (seen with two suites sharing 2 cores).
  const fac = await spawnFacilitator({
    manifestPath: TEST_MANIFEST_PATH,
    env: { GATE402_RELAYER_KEYS: relayerKeys.join(','), GATE402_CONFIRM_DEADLINE_MS: '30000', GATE402_SETTLE_QUEUE_WAIT_MS: '60000' },
  });
  t.teardown(() => fac.stop());

  // 5 payers x 20 payments: within the per-payer default, so only the per-IP bucket refuses.
  const payTo = freshAccount().address;
  const payers = [];
  // One after another: they are minted from one funder account.
  for (let i = 0; i < 5; i++) payers.push(await fundedPayer(base, CAIP2.base, funder, parseUnits('1', 6)));
  const req = requirementsFor(CAIP2.base, base, payTo, '1000');
  const payments = (await Promise.all(payers.map((p) => Promise.all(Array.from({ length: 20 }, () => officialPayment(p, req)))))).flat();
  const before = await sent(base, relayers);
  t.equal(before, 0, 'fresh relayers');

  const body = (payment: unknown) => JSON.stringify({ x402Version: 2, paymentPayload: payment, paymentRequirements: req });
  const settle = (payment: unknown) => fetch(`${fac.url}/settle`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: body(payment) });
  const answers = await Promise.all(
    payments.map(async (p) => {
      const res = await settle(p);
      return { payment: p, status: res.status, retryAfter: res.headers.get('retry-after'), json: (await res.json()) as Record<string, unknown> };
    }),
  );
  const limited = answers.filter((a) => a.status === 429);
  const served = answers.filter((a) => a.status === 200);
  t.equal(limited.length + served.length, 100, `every answer is a 200 or a 429 (${JSON.stringify(answers.filter((a) => a.status !== 200 && a.status !== 429).slice(0, 2))})`);
  t.ok(served.length >= 50, `the burst of 50 is served (${served.length})`);
  t.ok(limited.length >= 30, `the excess is refused (${limited.length} of 100)`);
  t.ok(
    limited.every((a) => a.json.error === 'rate limited' && Number(a.retryAfter) >= 1),
    'each refusal is 429 {error: "rate limited"} with Retry-After',
  );

  // Pending answers are asked again (paced, the bucket refills at 20 per second) until final.
  let settled = 0;
  for (const a of served) {
    let json = a.json;
    for (let i = 0; json.errorReason === 'settlement_pending' && i < 60; i++) {
      await new Promise((r) => setTimeout(r, 500));
      const res = await settle(a.payment);
      if (res.status === 200) json = (await res.json()) as Record<string, unknown>;
      else await res.body?.cancel();
    }
    if (json.success === true) settled++;
    else t.fail(`a served payment did not settle: ${JSON.stringify(json)}`);
  }
  t.equal(settled, served.length, 'every served payment settled');
  t.equal(await stableBalance(base, payTo), BigInt(settled) * 1000n, 'the payee got exactly the served payments: refused ones moved nothing');
  const txs = (await sent(base, relayers)) - before;
  t.ok(txs >= 1 && txs <= settled, `the relayers sent ${txs} transactions for ${settled} settlements (batched), none for the refused`);
});

t.test('the gas sponsorship per-IP default: 5 sponsorships, then 429 and nothing sent', async (t) => {
  const deskKey = await gassedKey(stock);
  const desk = privateKeyToAccount(deskKey).address;
  const gw = await spawnFacilitator({
    manifestPath: TEST_MANIFEST_PATH,
    part: 'gateway',
    env: { GATE402_STOCK_ENABLED: 'true', GATE402_STOCK_DESK_KEY: deskKey, GATE402_RELAYER_KEYS: await gassedKey(stock), GATE402_CONFIRM_DEADLINE_MS: '30000' },
  });
  t.teardown(() => gw.stop());
  const { pub, wallet } = clientsFor(stock, funder);
  // Six wallets that qualify: stablecoin B, no gas, no Permit2 allowance.
  const wallets = Array.from({ length: 6 }, () => freshAccount().address);
  for (const w of wallets) {
    await pub.waitForTransactionReceipt({ hash: await wallet.writeContract({ address: stock.stablecoin.address, abi: stablecoinArtifact.abi, functionName: 'mint', args: [w, 1_000_000n] }) });
  }
  const deskBefore = await sent(stock, [desk]);
  const sponsor = async (address: Address) => {
    const res = await fetch(`${gw.url}/api/gas/sponsor`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ address }) });
    return { status: res.status, retryAfter: res.headers.get('retry-after'), json: (await res.json()) as Record<string, unknown> };
  };
  for (const w of wallets.slice(0, 5)) {
    const a = await sponsor(w);
    t.equal(a.status, 200, `sponsored ${w} (${JSON.stringify(a.json)})`);
    t.equal((await pub.getBalance({ address: w })).toString(), a.json.amountWei, 'received exactly the sponsored amount');
  }
  const last = wallets[5] as Address;
  const refused = await sponsor(last);
  t.equal(refused.status, 429, 'the sixth request from this address is refused');
  t.match(refused.json.error, /too many sponsorship requests/, 'saying why');
  t.ok(Number(refused.retryAfter) >= 1, `with Retry-After (${refused.retryAfter})`);
  t.equal(await pub.getBalance({ address: last }), 0n, 'the sixth wallet received nothing');
  t.equal((await sent(stock, [desk])) - deskBefore, 5, 'the desk sent exactly the five sponsorships');
});
