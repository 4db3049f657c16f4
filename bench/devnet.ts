/**
 * The bench's chains: a devnet of its own (or a running one it may drive, `--manifest`), block times, funded
 * buyers, and what a run left on chain.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAbiItem, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { CAIP2 } from '../src/chain/canonical.ts';
import { publicClientFor, walletClientFor } from '../src/chain/clients.ts';
import { stablecoinArtifact } from '../src/devnet/contracts/artifacts/index.ts';
import { DEVNET_ROLES, devnetAccount } from '../src/devnet/accounts.ts';
import { manifestIsLive, startDevnet } from '../src/devnet/run.ts';
import { readManifest, type DevnetManifest } from '../src/devnet/manifest.ts';
import type { NetworkEntry } from '../src/chain/network-types.ts';
import { rpcCall } from '../src/chain/rpc.ts';

export interface BenchDevnet {
  manifest: DevnetManifest;
  manifestPath: string;
  stop(): Promise<void>;
}

/**
 * The devnet at `manifestPath` when given (it must be running; the bench funds buyers from testers 20-27 and sets
 * the block time of its chains, so give it one it may drive), else three fresh chains on free ports, stopped by
 * `stop()`.
 */
export async function benchDevnet(manifestPath?: string): Promise<BenchDevnet> {
  if (manifestPath !== undefined) {
    const manifest = readManifest(manifestPath);
    // A loaded machine can keep the chains from answering within a second: asked 5 times, each probe waiting twice as
    // long as the one before (1 s to 8 s).
    let live = false;
    for (let attempt = 0; attempt < 5 && !live; attempt++) {
      if (attempt > 0) await new Promise((r) => setTimeout(r, 1000));
      live = await manifestIsLive(manifest, Math.min(8000, 1000 * 2 ** attempt));
    }
    if (!live) throw new Error(`the devnet of ${manifestPath} is not running`);
    return { manifest, manifestPath, stop: async () => {} };
  }
  const dir = mkdtempSync(join(tmpdir(), 'gate402-bench-devnet-'));
  const path = join(dir, 'devnet.json');
  // Port 0: each chain takes the port the kernel gives it (a guessed free port can be taken before anvil binds it).
  const ports = { [CAIP2.base]: 0, [CAIP2.baseSepolia]: 0, [CAIP2.stockChain]: 0 };
  const devnet = await startDevnet({ manifestPath: path, host: '127.0.0.1', ports, fresh: true }).catch((err: unknown) => {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  });
  return {
    manifest: devnet.manifest,
    manifestPath: path,
    stop: async () => {
      await devnet.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export function networkOf(manifest: DevnetManifest, caip2: string): NetworkEntry {
  const n = manifest.networks[caip2];
  if (!n) throw new Error(`the devnet has no ${caip2}`);
  return n;
}

/**
 * Mines a block every `seconds` from now on (anvil's interval mining, the mode `--block-time` starts it in), or a
 * block per transaction for 0, mining whatever waits at once.
 */
export async function setBlockTime(n: NetworkEntry, seconds: number): Promise<void> {
  if (seconds > 0) {
    await rpcCall(n.rpcUrl, 'evm_setIntervalMining', [seconds]);
    return;
  }
  await rpcCall(n.rpcUrl, 'evm_setAutomine', [true]);
  await rpcCall(n.rpcUrl, 'evm_mine', []);
}

export interface Buyer {
  key: Hex;
  address: Address;
}

/** The devnet testers that fund bench buyers side by side (minters of every devnet stablecoin). */
export const BENCH_FUNDERS = DEVNET_ROLES.testers.slice(0, 8);

/**
 * `count` fresh buyers holding `amount` of the network's stablecoin each: BENCH_FUNDERS mint side by side, each
 * sending its mints back to back with its own nonces, and every receipt is checked.
 */
export async function fundBuyers(n: NetworkEntry, count: number, amount: bigint): Promise<Buyer[]> {
  const buyers = Array.from({ length: count }, (): Buyer => {
    const key = generatePrivateKey();
    return { key, address: privateKeyToAccount(key).address };
  });
  const pub = publicClientFor(n.chainId, n.rpcUrl, { pollingIntervalMs: 20 });
  const fees = await pub.estimateFeesPerGas();
  const hashes: Hex[] = [];
  await Promise.all(
    BENCH_FUNDERS.map(async (index, f) => {
      const funder = devnetAccount(index);
      const wallet = walletClientFor(n.chainId, n.rpcUrl, funder);
      let nonce = await pub.getTransactionCount({ address: funder.address, blockTag: 'pending' });
      for (let i = f; i < count; i += BENCH_FUNDERS.length) {
        const to = (buyers[i] as Buyer).address;
        hashes.push(await wallet.writeContract({ address: n.stablecoin.address, abi: stablecoinArtifact.abi, functionName: 'mint', args: [to, amount], nonce: nonce++, gas: 200_000n, ...fees }));
      }
    }),
  );
  for (const hash of hashes) {
    const receipt = await pub.waitForTransactionReceipt({ hash, timeout: 60_000 });
    if (receipt.status !== 'success') throw new Error(`funding mint ${hash} reverted`);
  }
  return buyers;
}

export async function blockNumber(n: NetworkEntry): Promise<bigint> {
  return publicClientFor(n.chainId, n.rpcUrl).getBlockNumber();
}

export interface OnChain {
  /** Stablecoin transfers of exactly `amount` to `payTo` mined in the blocks: the payments settled. */
  payments: number;
  /** The transactions that carried them, and how many distinct accounts sent those. */
  transactions: number;
  senders: number;
  /** Gas the chain charged for them (receipts' gasUsed): in all, per payment, and apart for the transactions that carried one payment and those that carried several. */
  gas: SettlementGas;
}

export interface SettlementGas {
  total: number;
  perPayment: number;
  /** Transactions carrying one payment each, and their gas per payment (0 when none). */
  alone: { transactions: number; perPayment: number };
  /** Transactions carrying several payments (a batch), their payments, and gas per member (0 when none). */
  batched: { transactions: number; payments: number; perPayment: number };
}

/** Gas per payment from each settlement transaction's gasUsed and the payments it carried. */
export function settlementGas(txs: { gasUsed: bigint; payments: number }[]): SettlementGas {
  const sum = (xs: typeof txs) => xs.reduce((a, t) => ({ gas: a.gas + Number(t.gasUsed), payments: a.payments + t.payments }), { gas: 0, payments: 0 });
  const per = (x: { gas: number; payments: number }) => (x.payments ? Math.round(x.gas / x.payments) : 0);
  const all = sum(txs);
  const alone = txs.filter((t) => t.payments === 1);
  const batches = txs.filter((t) => t.payments > 1);
  const b = sum(batches);
  return {
    total: all.gas,
    perPayment: per(all),
    alone: { transactions: alone.length, perPayment: per(sum(alone)) },
    batched: { transactions: batches.length, payments: b.payments, perPayment: per(b) },
  };
}

const TRANSFER = parseAbiItem('event Transfer(address indexed from, address indexed to, uint256 value)');

/** What reached the chain for `payTo` in blocks `fromBlock`..`toBlock`: settled payments, their transactions, senders and gas. */
export async function settledOnChain(n: NetworkEntry, payTo: Address, amount: bigint, fromBlock: bigint, toBlock: bigint): Promise<OnChain> {
  const pub = publicClientFor(n.chainId, n.rpcUrl, { timeoutMs: 60_000 });
  const logs = fromBlock > toBlock ? [] : await pub.getLogs({ address: n.stablecoin.address, event: TRANSFER, args: { to: payTo }, fromBlock, toBlock });
  const paid = logs.filter((l) => l.args.value === amount);
  const perTx = new Map<Hex, number>();
  for (const l of paid) perTx.set(l.transactionHash, (perTx.get(l.transactionHash) ?? 0) + 1);
  const txs = [...perTx.keys()];
  const senders = new Set<string>();
  const gasUsed: { gasUsed: bigint; payments: number }[] = [];
  for (let i = 0; i < txs.length; i += 100) {
    const batch = await Promise.all(txs.slice(i, i + 100).map((hash) => pub.getTransactionReceipt({ hash })));
    for (const r of batch) {
      senders.add(r.from.toLowerCase());
      gasUsed.push({ gasUsed: r.gasUsed, payments: perTx.get(r.transactionHash) ?? 0 });
    }
  }
  return { payments: paid.length, transactions: txs.length, senders: senders.size, gas: settlementGas(gasUsed) };
}
