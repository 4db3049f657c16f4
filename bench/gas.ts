/**
 * `npm run bench -- gas`: the gas a settlement costs as the chain reports it (each transaction's receipt gasUsed),
 * for an EIP-3009 payment (eip155:8453) and a Permit2 payment (the stock chain), each settled by gate402 alone, then
 * --batch of them sent to its /settle together and settled in one batch transaction through Multicall3's
 * `aggregate3` (gas per member: the transaction's gasUsed over the payments it carried). Gas bounds what any gateway
 * can settle per block, whatever its CPU: a block of G gas settles at most G / (gas per payment) payments. The
 * payments come from fresh payers (whose balance the payment does not empty) to a payee already holding some of the
 * stablecoin, signed by the official @x402/evm client; gate402 waits a whole window for a batch
 * to fill (GATE402_BATCH_WINDOW_MS 1500, GATE402_BATCH_EAGER false, GATE402_BATCH_MAX --batch), so the batch is the
 * size asked for on a busy machine too.
 *
 *   node --import tsx bench/gas.ts [--batch N]
 */
import { parseUnits, type LocalAccount } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { request } from 'undici';
import { CAIP2 } from '../src/chain/canonical.ts';
import { publicClientFor } from '../src/chain/clients.ts';
import type { NetworkEntry } from '../src/chain/network-types.ts';
import { devnetAccount } from '../src/devnet/accounts.ts';
import type { SettleResponse } from '../src/protocol/x402/types.ts';
import { fundedPayer, officialPayment, requirementsFor } from '../test/helpers/payments.ts';
import { BENCH_FUNDERS, benchDevnet, fundBuyers, networkOf } from './devnet.ts';
import { benchOptions } from './options.ts';
import { progress, writeFigures } from './report.ts';
import { startGate402, type Server } from './stacks.ts';

const opts = benchOptions({
  full: { batch: '32' },
  quick: { batch: '8' },
  tiny: { batch: '3' },
});
const BATCH = opts.number('batch', { min: 2 });
const AMOUNT = '10000';

export interface SettlementGasFigures {
  network: string;
  transferMethod: 'EIP-3009' | 'Permit2';
  /** One payment settled on its own: its transaction and gasUsed. */
  alone: { transaction: string; gasUsed: number };
  /** `payments` sent together: the transactions that carried them, their gasUsed in all, and per payment. */
  batch: { payments: number; transactions: number; gasUsed: number; perPayment: number };
}

/** Fresh payers holding the price a few times over: EIP-3009 buyers minted side by side; Permit2 payers also approve Permit2 (a transaction each). */
async function payers(n: NetworkEntry, caip2: string, count: number): Promise<LocalAccount[]> {
  if (caip2 !== CAIP2.stockChain) return (await fundBuyers(n, count, parseUnits('1', 6))).map((b) => privateKeyToAccount(b.key));
  const out = new Array<LocalAccount>(count);
  await Promise.all(
    BENCH_FUNDERS.map(async (index, f) => {
      for (let i = f; i < count; i += BENCH_FUNDERS.length) out[i] = await fundedPayer(n, caip2, devnetAccount(index), parseUnits('1', 6));
    }),
  );
  return out;
}

/** One /settle, asked again while it answers pending; throws unless it settled. */
async function settle(facilitatorUrl: string, body: string): Promise<SettleResponse> {
  for (let attempt = 0; attempt < 30; attempt++) {
    const res = await request(`${facilitatorUrl}/settle`, { method: 'POST', headers: { 'content-type': 'application/json' }, body, headersTimeout: 60_000, bodyTimeout: 60_000 });
    const answer = (await res.body.json()) as SettleResponse;
    if (answer.status === 'pending') continue;
    if (!answer.success) throw new Error(`settlement refused: ${JSON.stringify(answer)}`);
    return answer;
  }
  throw new Error('settlement still pending after 30 asks');
}

async function measure(n: NetworkEntry, caip2: string, facilitatorUrl: string): Promise<SettlementGasFigures> {
  // A payee that already holds some of the stablecoin, as a merchant's address does after its first sale: a first
  // credit to an empty balance costs a storage write from zero (about 20,000 gas) no later payment pays.
  const [payee] = await fundBuyers(n, 1, 1n);
  const req = requirementsFor(caip2, n, (payee as { address: `0x${string}` }).address, AMOUNT);
  const accounts = await payers(n, caip2, BATCH + 1);
  const bodies = await Promise.all(accounts.map(async (a) => JSON.stringify({ x402Version: 2, paymentPayload: await officialPayment(a, req), paymentRequirements: req })));
  const pub = publicClientFor(n.chainId, n.rpcUrl, { timeoutMs: 30_000 });
  const gasOf = async (hash: string) => Number((await pub.getTransactionReceipt({ hash: hash as `0x${string}` })).gasUsed);

  const lone = await settle(facilitatorUrl, bodies[0] as string);
  const together = await Promise.all(bodies.slice(1).map((b) => settle(facilitatorUrl, b)));
  const txs = [...new Set(together.map((a) => a.transaction))];
  const gasUsed = (await Promise.all(txs.map(gasOf))).reduce((a, b) => a + b, 0);
  return {
    network: caip2,
    transferMethod: caip2 === CAIP2.stockChain ? 'Permit2' : 'EIP-3009',
    alone: { transaction: lone.transaction, gasUsed: await gasOf(lone.transaction) },
    batch: { payments: together.length, transactions: txs.length, gasUsed, perPayment: Math.round(gasUsed / together.length) },
  };
}

const devnet = await benchDevnet(opts.manifest);
progress('devnet up');
let gate402: (Server & { facilitatorUrl: string }) | undefined;
try {
  gate402 = await startGate402(devnet.manifestPath, {
    pollMs: 20,
    // Each payment waits the whole batch window in the settlement queue: its wait bound (default 500 ms) must exceed
    // it, or a batch's later members, reaching a loaded machine later, are shed as queue_slow.
    env: { GATE402_BATCH_WINDOW_MS: '1500', GATE402_BATCH_EAGER: 'false', GATE402_BATCH_MAX: String(BATCH), GATE402_STOCK_ENABLED: 'false', GATE402_SETTLE_QUEUE_WAIT_MS: '60000' },
  });
  progress('gate402 up');
  // Both networks side by side: batches form per network, so neither run changes what the other measures.
  const facilitatorUrl = gate402.facilitatorUrl;
  const settlements = await Promise.all([CAIP2.base, CAIP2.stockChain].map((caip2) => measure(networkOf(devnet.manifest, caip2), caip2, facilitatorUrl)));
  for (const f of settlements) {
    progress(`${f.transferMethod} on ${f.network}: ${f.alone.gasUsed} gas alone, ${f.batch.perPayment} per payment in ${f.batch.transactions} transaction(s) of ${f.batch.payments} payments`);
  }
  writeFigures(opts.out, { gas: { batch: BATCH, amount: AMOUNT, settlements } });
} finally {
  await gate402?.stop();
  await devnet.stop();
}
