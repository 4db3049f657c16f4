/**
 * `npm start`, Ctrl-C, `npm start`: the second run starts new chains (anvil keeps nothing), so it must not keep the
 * first run's records either. The gasless buyer gets its sponsorship again on the new chain, and every order in the
 * feed names a settlement its chain knows.
 */
import t, { type Test } from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { erc20Abi, maxUint256 } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { CAIP2, PERMIT2_ADDRESS } from '../src/chain/canonical.ts';
import { recordsVerdict } from '../src/devnet/chain-bound-records.ts';
import { readManifest, type DevnetManifest } from '../src/devnet/manifest.ts';
import type { NetworkEntry } from '../src/chain/network-types.ts';
import { rpcCall } from '../src/chain/rpc.ts';
import { clientsFor, freePort, network } from './helpers/devnet.ts';
import { postJson } from './helpers/payments.ts';
import { BIN } from './helpers/spawn-devnet.ts';
import { officialBuyer, tokenBalance } from './helpers/stock.ts';
import { killOnExit, tempDir } from './helpers/temp-dir.ts';

t.test('which records a data directory keeps', async (t) => {
  const chains = { 'eip155:1': '0xaa', 'eip155:2': '0xbb' };
  t.equal(recordsVerdict(chains, { ...chains }, true), 'keep', 'the same chains: the records stay');
  t.equal(recordsVerdict({ ...chains, 'eip155:2': '0xcc' }, chains, true), 'reset', 'one chain is new: the records go');
  t.equal(recordsVerdict({ 'eip155:1': '0xaa' }, chains, true), 'reset', 'a chain more than was written down');
  t.equal(recordsVerdict(undefined, chains, true), 'reset', 'records of chains nobody wrote down');
  t.equal(recordsVerdict(undefined, chains, false), 'first', 'an empty directory is written down');
});

const dir = tempDir('restart');
const manifestPath = join(dir, 'devnet.json');
const dataDir = join(dir, 'data');
const ports = { gateway: await freePort(), facilitator: await freePort(), chains: [await freePort(), await freePort(), await freePort()] };

interface Started {
  child: ChildProcess;
  manifest: DevnetManifest;
  gw: string;
  logPath: string;
}

/** `gate402 start`, as `npm start` runs it, on this file's ports and directories; resolves once the gateway answers. */
async function start(run: number): Promise<Started> {
  const logPath = join(dir, `start-${run}.log`);
  const log = openSync(logPath, 'w');
  const child = spawn(process.execPath, [BIN, 'start', '--manifest', manifestPath, '--ports', ports.chains.join(','), '--exit-after', '600'], {
    stdio: ['ignore', log, log],
    env: { ...process.env, GATE402_DATA_DIR: dataDir, GATE402_GATEWAY_PORT: String(ports.gateway), GATE402_FACILITATOR_PORT: String(ports.facilitator), GATE402_LOG_LEVEL: 'warn' },
  });
  killOnExit(child, 'SIGTERM');
  const gw = `http://127.0.0.1:${ports.gateway}`;
  const deadline = Date.now() + 180_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`gate402 start exited ${child.exitCode}:\n${readFileSync(logPath, 'utf8')}`);
    const up =
      existsSync(manifestPath) &&
      readManifest(manifestPath).pid === child.pid &&
      (await fetch(`${gw}/health`).then(
        (r) => r.ok,
        () => false,
      ));
    if (up) return { child, manifest: readManifest(manifestPath), gw, logPath };
    if (Date.now() > deadline) throw new Error(`gate402 start did not come up:\n${readFileSync(logPath, 'utf8')}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Ctrl-C: SIGINT, and the process stops its service and its chains and exits 0. */
async function interrupt(s: Started): Promise<number | null> {
  const exited = new Promise<number | null>((r) => s.child.once('exit', (code) => r(code)));
  s.child.kill('SIGINT');
  return exited;
}

/** Ctrl-C, asserted to stop the run with exit code 0; otherwise the run's log says why. */
async function stopsCleanly(t: Test, s: Started, what: string): Promise<void> {
  const code = await interrupt(s);
  t.equal(code, 0, code === 0 ? what : `${what} (exit ${code}; its log ends: ${readFileSync(s.logPath, 'utf8').slice(-1500)})`);
}

type Order = { orderId: string; status: string; settlementTx?: string; error?: string };

/** The gasless buyer's path: sponsored gas, its one approval of Permit2, then a buy of TSLA for 2 stablecoin B. */
async function gaslessBuy(t: Test, s: Started, n: NetworkEntry): Promise<Order> {
  const entry = s.manifest.accounts.buyers.find((b) => b.gasless);
  if (!entry?.privateKey) throw new Error('no gasless buyer in the manifest');
  const buyer = privateKeyToAccount(entry.privateKey);
  const { pub, wallet } = clientsFor(n, buyer);
  t.equal(await pub.getBalance({ address: buyer.address }), 0n, 'the gasless buyer has no gas on this chain');
  const sponsored = await postJson(`${s.gw}/api/gas/sponsor`, { address: buyer.address });
  t.equal(sponsored.status, 200, `the gasless buyer is sponsored (${JSON.stringify(sponsored.json)})`);
  t.ok((await pub.getBalance({ address: buyer.address })) > 0n, 'and has gas');
  const approval = await wallet.writeContract({ address: n.stablecoin.address, abi: erc20Abi, functionName: 'approve', args: [PERMIT2_ADDRESS, maxUint256] });
  t.equal((await pub.waitForTransactionReceipt({ hash: approval })).status, 'success', 'its approval goes through on sponsored gas');
  const tsla = n.stocks?.find((x) => x.symbol === 'TSLA');
  if (!tsla) throw new Error('no TSLA on the stock chain');
  const before = await tokenBalance(n, tsla.address, buyer.address);
  const res = await officialBuyer(buyer)(`${s.gw}/api/stock/buy?symbol=TSLA&stable_amount=2`, { method: 'POST' });
  const order = (await res.json()) as Order;
  t.equal(res.status, 200, `bought (${order.error ?? order.status})`);
  t.ok((await tokenBalance(n, tsla.address, buyer.address)) > before, 'the buyer holds more TSLA');
  return order;
}

/** Every order of the feed names a settlement transaction that its chain has mined. */
async function feedAgreesWithChain(t: Test, s: Started, n: NetworkEntry): Promise<Order[]> {
  const feed = (await (await fetch(`${s.gw}/api/stock/orders?limit=100`)).json()) as { orders: Order[] };
  for (const o of feed.orders) {
    const receipt = o.settlementTx ? await rpcCall<{ status: string } | null>(n.rpcUrl, 'eth_getTransactionReceipt', [o.settlementTx]) : null;
    t.equal(receipt?.status, '0x1', `order ${o.orderId} names settlement ${o.settlementTx ?? '(none)'}, mined on its chain`);
  }
  return feed.orders;
}

t.test('npm start, Ctrl-C, npm start: the records follow the chains', async (t) => {
  const first = await start(1);
  const n1 = network(first.manifest, CAIP2.stockChain);
  const bought = await gaslessBuy(t, first, n1);
  t.same(
    (await feedAgreesWithChain(t, first, n1)).map((o) => o.orderId),
    [bought.orderId],
    'the feed lists the order',
  );
  await stopsCleanly(t, first, 'Ctrl-C stops the first run cleanly');

  const second = await start(2);
  t.teardown(async () => {
    if (second.child.exitCode === null) await interrupt(second);
  });
  const n2 = network(second.manifest, CAIP2.stockChain);
  t.equal(await rpcCall(n2.rpcUrl, 'eth_getTransactionReceipt', [bought.settlementTx]), null, 'the chains are new: the first settlement is not on them');
  t.match(readFileSync(second.logPath, 'utf8'), /records of the previous chains were removed/, 'the operator is told the records started over');
  t.equal((await fetch(`${second.gw}/api/stock/order/${bought.orderId}`)).status, 404, "the first run's order is not served");
  const again = await gaslessBuy(t, second, n2);
  t.same(
    (await feedAgreesWithChain(t, second, n2)).map((o) => o.orderId),
    [again.orderId],
    'the feed lists the new order only',
  );

  await stopsCleanly(t, second, 'Ctrl-C stops the second run');
});
