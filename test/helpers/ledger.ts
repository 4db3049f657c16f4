import { parseAbiItem, type Address } from 'viem';
import type { NetworkEntry } from '../../src/chain/network-types.ts';
import { clientsFor, freshAccount } from './devnet.ts';

const TRANSFER = parseAbiItem('event Transfer(address indexed from, address indexed to, uint256 value)');

/** One buyer's payment as the test saw it end: its last answer's status, and whether a refund of it is recorded. */
export interface Purchase {
  payer: Address;
  status: number;
  refunded?: boolean;
}

/** The stablecoin transfers from each of `payers` to `merchant` mined since block `fromBlock`, by payer (lowercase). */
export async function transfersTo(n: NetworkEntry, merchant: Address, payers: Address[], fromBlock: bigint): Promise<Map<string, bigint[]>> {
  const { pub } = clientsFor(n, freshAccount());
  const byPayer = new Map<string, bigint[]>(payers.map((p) => [p.toLowerCase(), []]));
  // One query per 50 payers keeps each topic filter small.
  for (let i = 0; i < payers.length; i += 50) {
    const logs = await pub.getLogs({ address: n.stablecoin.address, event: TRANSFER, args: { from: payers.slice(i, i + 50), to: merchant }, fromBlock, toBlock: 'latest' });
    for (const log of logs) byPayer.get(String(log.args.from).toLowerCase())?.push(log.args.value as bigint);
  }
  return byPayer;
}

export interface LedgerInput {
  n: NetworkEntry;
  merchant: Address;
  /** The block the run started at: transfers before it are not the run's. */
  fromBlock: bigint;
  price: bigint;
  /** One entry per payment of the run (a payer may make several). */
  purchases: Purchase[];
  /** Upstream calls made during the run. */
  upstreamCalls: number;
}

export interface LedgerReport {
  ok: boolean;
  /** What does not add up, one line each. */
  faults: string[];
  served: number;
  transfers: number;
}

/**
 * The ledger check of the cluster's fault tests, read from the chain's logs: every 200 has exactly one transfer (the
 * payer's token Transfer to the merchant, of the price); no transfer without a served answer or a recorded refund;
 * upstream calls equal served answers; each payer charged once per payment it was served (or refunded), never more.
 */
export async function ledger(input: LedgerInput): Promise<LedgerReport> {
  const byPayer = new Map<string, { payer: Address; served: number; refunded: number; statuses: number[] }>();
  for (const p of input.purchases) {
    const key = p.payer.toLowerCase();
    const entry = byPayer.get(key) ?? { payer: p.payer, served: 0, refunded: 0, statuses: [] };
    if (p.status === 200) entry.served++;
    else if (p.refunded) entry.refunded++;
    entry.statuses.push(p.status);
    byPayer.set(key, entry);
  }
  const transfers = await transfersTo(
    input.n,
    input.merchant,
    [...byPayer.values()].map((e) => e.payer),
    input.fromBlock,
  );
  const faults: string[] = [];
  let served = 0;
  let count = 0;
  for (const [key, e] of byPayer) {
    const mine = transfers.get(key) ?? [];
    count += mine.length;
    served += e.served;
    if (mine.some((v) => v !== input.price)) faults.push(`${e.payer}: a transfer of other than the price (${mine.join(', ')})`);
    if (mine.length < e.served) faults.push(`${e.payer}: ${e.served} served answer(s), ${mine.length} transfer(s)`);
    if (mine.length > e.served + e.refunded) faults.push(`${e.payer}: ${mine.length} transfer(s) for ${e.served} served answer(s) and ${e.refunded} refund(s) (answers ${e.statuses.join(',')})`);
  }
  if (input.upstreamCalls !== served) faults.push(`${input.upstreamCalls} upstream calls for ${served} served answers`);
  return { ok: faults.length === 0, faults, served, transfers: count };
}
