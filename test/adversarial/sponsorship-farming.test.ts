/**
 * Issue 21, finding 8: sponsorship farming. Addresses holding one atom of stablecoin B were given sponsored gas they
 * could sweep back. Sponsorship now goes only to an address that could buy (at least the smallest stock order of
 * stablecoin B), and only within an hourly budget of native coin. Checked on the chain: what each address received
 * and how many transactions the stock desk sent. Run on a devnet of this file's own (its minting funder is a tester
 * other files use on the shared one).
 */
import t from 'tap';
import type { Address } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { CAIP2 } from '../../src/chain/canonical.ts';
import { stablecoinArtifact } from '../../src/devnet/contracts/artifacts/index.ts';
import { ORDER_LIMITS } from '../../src/stock/terms.ts';
import { clientsFor, freshAccount, network, tester } from '../helpers/devnet.ts';
import { spawnFacilitator } from '../helpers/spawn-facilitator.ts';
import { spawnOwnDevnet } from '../helpers/spawn-devnet.ts';
import { gassedKey } from '../helpers/stock.ts';

const devnet = await spawnOwnDevnet('sponsorship');
t.teardown(() => devnet.stop());
const stock = network(devnet.manifest, CAIP2.stockChain);
const funder = tester('attackStock');
const { pub, wallet } = clientsFor(stock, funder);
const deskKey = await gassedKey(stock);
const desk = privateKeyToAccount(deskKey).address;
// A budget a few sponsorships spend (each is ~55k gas x (2 x base fee + tip), 0.00005-0.0002 native on the devnet).
const BUDGET_WEI = 300_000_000_000_000n; // 0.0003
const gw = await spawnFacilitator({
  manifestPath: devnet.manifestPath,
  part: 'gateway',
  env: {
    GATE402_STOCK_ENABLED: 'true',
    GATE402_STOCK_DESK_KEY: deskKey,
    GATE402_RELAYER_KEYS: await gassedKey(stock),
    GATE402_SPONSOR_BUDGET_PER_HOUR: '0.0003',
    GATE402_SPONSOR_RATE_CAPACITY: '1000',
    GATE402_CONFIRM_DEADLINE_MS: '30000',
  },
});
t.teardown(() => gw.stop());

async function mint(to: Address, amount: bigint): Promise<void> {
  await pub.waitForTransactionReceipt({ hash: await wallet.writeContract({ address: stock.stablecoin.address, abi: stablecoinArtifact.abi, functionName: 'mint', args: [to, amount] }) });
}
const deskTxs = () => pub.getTransactionCount({ address: desk, blockTag: 'pending' });
async function sponsor(address: Address): Promise<{ status: number; retryAfter: string | null; json: Record<string, unknown> }> {
  const res = await fetch(`${gw.url}/api/gas/sponsor`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ address }) });
  return { status: res.status, retryAfter: res.headers.get('retry-after'), json: (await res.json()) as Record<string, unknown> };
}
const metric = async (name: string, labels = ''): Promise<number> => {
  const text = await (await fetch(`${gw.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `));
  return line === undefined ? Number.NaN : Number(line.split(' ')[1]);
};

t.test('the budget and its refusals are exported at zero before any sponsorship', async (t) => {
  t.equal(await metric('gate402_stock_sponsorships_total', '{outcome="sponsor_budget_exhausted"}'), 0);
  t.equal(await metric('gate402_stock_sponsored_native_total'), 0);
  t.equal(await metric('gate402_stock_sponsor_budget_left_native'), 0.0003);
});

t.test('an address holding less than the smallest order gets no gas', async (t) => {
  const before = await deskTxs();
  for (const amount of [1n, ORDER_LIMITS.min - 1n]) {
    const farmer = freshAccount().address;
    await mint(farmer, amount);
    const a = await sponsor(farmer);
    t.match(a, { status: 422, json: { condition: 'no_stablecoin_b', error: /less than the smallest stock order \(1\.000000\)/ } }, `${amount} atoms: refused (${JSON.stringify(a.json)})`);
    t.equal(await pub.getBalance({ address: farmer }), 0n, 'and given nothing');
  }
  t.equal(await deskTxs(), before, 'the desk sent nothing');
});

t.test('an address holding the smallest order is sponsored, until the hourly budget is spent', async (t) => {
  const before = await deskTxs();
  const answers: Array<{ status: number; retryAfter: string | null; json: Record<string, unknown> }> = [];
  let spent = 0n;
  for (let i = 0; i < 10; i++) {
    const buyer = freshAccount().address;
    await mint(buyer, ORDER_LIMITS.min);
    const a = await sponsor(buyer);
    answers.push(a);
    if (a.status === 200) {
      t.equal((await pub.getBalance({ address: buyer })).toString(), a.json.amountWei, `buyer ${i + 1} received exactly the sponsored amount`);
      spent += BigInt(String(a.json.amountWei));
      continue;
    }
    t.match(
      a,
      { status: 503, json: { condition: 'sponsor_budget_exhausted', error: /hourly budget \(0\.0003 native coin\) is spent; nothing was sent, try again in \d+ s/ } },
      `then refused: ${JSON.stringify(a.json)}`,
    );
    t.ok(Number(a.retryAfter) >= 1 && Number(a.retryAfter) <= 3600, `with Retry-After (${a.retryAfter})`);
    t.equal(await pub.getBalance({ address: buyer }), 0n, 'the refused buyer received nothing');
    break;
  }
  const sent = answers.filter((a) => a.status === 200).length;
  t.ok(sent >= 1, `${sent} sponsored before the budget ran out`);
  t.equal(answers.at(-1)?.status, 503, 'the budget refused before ten');
  t.ok(spent <= BUDGET_WEI, `${spent} wei sent, within the ${BUDGET_WEI} wei budget`);
  t.equal((await deskTxs()) - before, sent, 'the desk sent exactly the sponsorships answered 200');
  const late = freshAccount().address;
  await mint(late, ORDER_LIMITS.min);
  t.equal((await sponsor(late)).status, 503, 'a later buyer is refused too while the hour lasts');
  t.equal(await metric('gate402_stock_sponsorships_total', '{outcome="sent"}'), sent, 'counted: sent');
  t.ok((await metric('gate402_stock_sponsorships_total', '{outcome="sponsor_budget_exhausted"}')) >= 1, 'counted: refused for the budget');
  t.ok(Math.abs((await metric('gate402_stock_sponsored_native_total')) - Number(spent) / 1e18) < 1e-12, 'counted: native coin sent');
});
