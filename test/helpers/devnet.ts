import { receiptOf as devnetReceiptOf } from '../../src/devnet/receipt.ts';
import { createServer } from 'node:net';
import { resolve } from 'node:path';
import { privateKeyToAccount, generatePrivateKey, type PrivateKeyAccount } from 'viem/accounts';
import type { Account, Chain, Hash, PublicClient, Transport } from 'viem';
import { DEVNET_ROLES, devnetAccount } from '../../src/devnet/accounts.ts';
import { readManifest, type DevnetManifest } from '../../src/devnet/manifest.ts';
import type { NetworkEntry } from '../../src/chain/network-types.ts';
import { publicClientFor, walletClientFor } from '../../src/chain/clients.ts';

/**
 * The devnet one test run shares, started by test/setup/devnet-start.ts on free ports. GATE402_TEST_DEVNET_DIR
 * gives a run a devnet of its own, so two runs on one machine do not stop each other's chains.
 */
export const TEST_DEVNET_DIR = resolve(process.env.GATE402_TEST_DEVNET_DIR ?? '.tap/devnet');
export const TEST_MANIFEST_PATH = resolve(TEST_DEVNET_DIR, 'manifest.json');
/**
 * The shared devnet's chains as deployed, saved by the `before` script before any test runs: the state files each
 * test's own chains start from (`spawnOwnDevnet`, src/devnet/snapshot.ts).
 */
export const TEST_DEVNET_SNAPSHOT_DIR = resolve(TEST_DEVNET_DIR, 'snapshot');

export function testDevnet(): DevnetManifest {
  return readManifest(TEST_MANIFEST_PATH);
}

export function network(manifest: DevnetManifest, caip2: string): NetworkEntry {
  const n = manifest.networks[caip2];
  if (!n) throw new Error(`the test devnet has no ${caip2}`);
  return n;
}

/**
 * Test files run in parallel against one devnet, so each sends from its own funded account (a "tester",
 * minter of every devnet stablecoin) and nonces never collide. One slot per test file, listed here.
 */
export const TESTER_SLOTS = {
  eip3009: 0,
  permit2: 1,
  interop: 2,
  swaps: 3,
  // testers 4 and 5 are the relayers of test/facilitator.test.ts's facilitator
  facilitator: 6,
  recovery: 7,
  // testers 8 and 9 are the relayers of test/gateway-paid.test.ts's gateway
  gateway: 10,
  // testers 12 and 13 are the relayers of test/metrics.test.ts's gateway
  metrics: 11,
  // the stock API tests' funder and market mover
  stock: 14,
  // test/stock-data.test.ts's funder
  stockData: 15,
  // the web front end's browser tests
  web: 16,
  // test/bench-quick.test.ts
  bench: 17,
  // the settlement batching tests
  batching: 18,
  spare: 19,
  // the adversarial suite (test/adversarial/), a funder each; relayers there are fresh keys given gas by anvil_setBalance
  attackPaid: 20,
  attackMemory: 21,
  attackFacilitator: 22,
  attackMoney: 23,
  attackStock: 24,
  attackMpp: 25,
  fuzz: 26,
  suiteMoney: 27,
  // test/payment-identifier.test.ts
  paymentIds: 28,
  // test/pay-command.test.ts
  payCommand: 29,
  // test/store-postgres-gateway.test.ts's funder
  storePostgres: 30,
  // test/prometheus.test.ts
  operators: 31,
  // test/cluster-nodes.test.ts's funder: the batching tests' account, which only ever funds on their own devnet
  cluster: 18,
  // test/facilitator-failover.test.ts (it shared 'spare' with contract-payer-gas, both funding on Base at once)
  failover: 32,
  // test/cluster-fencing.test.ts and test/cluster-catalog.test.ts
  clusterFencing: 33,
  clusterCatalog: 34,
  // payment channels (batch-settlement): the gateway's door tests, the hostile channel tests, the facilitator's tests
  channels: 35,
  channelsHostile: 36,
  channelsFacilitator: 37,
  // test/batch-settlement-official-server.test.ts: test/batch-settlement-facilitator.test.ts funds with 37 on its own
  // devnet only, so on the shared devnet the account is this file's alone
  officialServer: 37,
  // the cluster's fault tests (a database restarted, connections cut, a node killed between receipt and record)
  clusterFaults: 38,
} as const;

export function tester(slot: keyof typeof TESTER_SLOTS): Account {
  const index = DEVNET_ROLES.testers[TESTER_SLOTS[slot]];
  if (index === undefined) throw new Error(`no tester slot ${slot}`);
  return devnetAccount(index);
}

/** A brand-new key with nothing on any chain. */
export function freshAccount(): PrivateKeyAccount {
  return privateKeyToAccount(generatePrivateKey());
}

export function clientsFor(n: NetworkEntry, account: Account) {
  const pub = publicClientFor(n.chainId, n.rpcUrl, { pollingIntervalMs: 20 });
  // viem's wait reads the receipt again only when it sees a new block: on an automine chain, a head read just before the
  // receipt is stored (a loaded machine widens that gap) leaves it waiting for a block nobody mines, until its 180 s
  // timeout. The receipt is asked for directly instead.
  const waitForTransactionReceipt = (args: { hash: Hash; timeout?: number }) => receiptOf(pub, args.hash, args.timeout);
  return { pub: Object.assign(pub, { waitForTransactionReceipt }) as typeof pub, wallet: walletClientFor(n.chainId, n.rpcUrl, account, { pollingIntervalMs: 20 }) };
}

/** The receipt of `hash`, asked for every 20 ms until the chain has it (at most `timeoutMs`; a failed read is asked again). */
export function receiptOf(pub: PublicClient<Transport, Chain>, hash: Hash, timeoutMs = 120_000) {
  return devnetReceiptOf(pub, hash, { timeoutMs });
}

export async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.once('error', rej);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => res(port));
    });
  });
}
