import t from 'tap';
import { gatewayOnOwnDevnet } from '../helpers/paid-gateway.ts';
import { decodePaymentRequiredHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import { Agent, request } from 'undici';
import { parseUnits, type Address, type Hex, type LocalAccount } from 'viem';
import { CAIP2 } from '../../src/chain/canonical.ts';
import type { NetworkEntry } from '../../src/chain/network-types.ts';
import { rpcCall } from '../../src/chain/rpc.ts';
import { stablecoinArtifact } from '../../src/devnet/contracts/artifacts/index.ts';
import type { Eip3009Payload, PaymentPayload, PaymentRequirements } from '../../src/protocol/x402/types.ts';
import { clientsFor, freshAccount, tester } from '../helpers/devnet.ts';
import { fundedPayer, officialPayment, stableBalance } from '../helpers/payments.ts';

// Blocks every second on chains of this file's own (the shared devnet automines), and 1,000 buyers at once.
const BUYERS = 1000;
const PAYERS = 100;
const BLOCK_SECONDS = 1;

const { devnet, fixtures, gw } = await gatewayOnOwnDevnet(t, 'backpressure', {
  GATE402_UPSTREAM_ALLOWLIST: '127.0.0.1',
  GATE402_BREAKER_THRESHOLD: '1000',
  // A thousand buyers on their own connections from one address: above the per-client default of 512.
  GATE402_MAX_CONNECTIONS_PER_CLIENT: '2048',
  // A block's receipts are read within 50 ms of it (the advice of docs/configuration.md, GATE402_RECEIPT_POLL_MS, where latency matters; default 200).
  GATE402_RECEIPT_POLL_MS: '50',
});

const n = devnet.manifest.networks[CAIP2.base] as NetworkEntry;
const url = `${gw.url}/m/catjoke/joke`;
const agent = new Agent({ connections: BUYERS + 16, pipelining: 1, headersTimeout: 60_000, bodyTimeout: 60_000 });
t.teardown(() => agent.close());

interface Answer {
  status: number;
  ms: number;
  retryAfter: string | undefined;
  body: string;
}

async function send(headers: Record<string, string>): Promise<Answer> {
  const started = performance.now();
  const res = await request(url, { dispatcher: agent, headers });
  const body = await res.body.text();
  const retry = res.headers['retry-after'];
  return { status: res.statusCode, ms: performance.now() - started, retryAfter: typeof retry === 'string' ? retry : undefined, body };
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;

async function authorizationUsed(payer: Address, nonce: Hex): Promise<boolean> {
  const { pub } = clientsFor(n, freshAccount());
  return pub.readContract({ address: n.stablecoin.address, abi: stablecoinArtifact.abi, functionName: 'authorizationState', args: [payer, nonce] }) as Promise<boolean>;
}

t.test(`${BUYERS} buyers at once on ${BLOCK_SECONDS}-second blocks: each answer is a 200 or a 503 that charged nothing`, async (t) => {
  const unpaid = await send({});
  t.equal(unpaid.status, 402, 'unpaid: 402');
  const first = await request(url, { dispatcher: agent });
  const offer = decodePaymentRequiredHeader(first.headers['payment-required'] as string).accepts.find((o) => o.network === CAIP2.base) as PaymentRequirements | undefined;
  await first.body.text();
  if (!offer) throw new Error('no eip155:8453 offer');
  const price = BigInt(offer.amount);
  const merchant = offer.payTo as Address;

  // Funded and signed while the chain still automines: 100 payers, 10 payments each.
  const funder = tester('gateway');
  const payers: LocalAccount[] = [];
  for (let i = 0; i < PAYERS; i++) payers.push(await fundedPayer(n, CAIP2.base, funder, parseUnits('1', 6)));
  const payments: Array<{ payer: Address; nonce: Hex; headers: Record<string, string> }> = [];
  for (let i = 0; i < BUYERS; i++) {
    const payer = payers[i % PAYERS] as LocalAccount;
    const payload: PaymentPayload = await officialPayment(payer, offer);
    const nonce = (payload.payload as Eip3009Payload).authorization.nonce;
    payments.push({ payer: payer.address, nonce, headers: { 'payment-signature': encodePaymentSignatureHeader(payload as Parameters<typeof encodePaymentSignatureHeader>[0]) } });
  }
  // A gateway that has been running: one payment served before, and the buyers' connections open.
  const warm = await officialPayment(payers[0] as LocalAccount, offer);
  t.equal((await send({ 'payment-signature': encodePaymentSignatureHeader(warm as Parameters<typeof encodePaymentSignatureHeader>[0]) })).status, 200, 'a first payment is served');
  await Promise.all(payments.map(() => send({})));
  const balancesBefore = await Promise.all(payers.map((p) => stableBalance(n, p.address)));
  const merchantBefore = await stableBalance(n, merchant);
  const callsBefore = fixtures.calls;

  await rpcCall(n.rpcUrl, 'evm_setIntervalMining', [BLOCK_SECONDS]);
  t.teardown(async () => {
    await rpcCall(n.rpcUrl, 'evm_setAutomine', [true]);
  });

  // Unpaid buyers keep getting their 402 while the paid ones crowd in.
  const unpaidDuring = Promise.all(Array.from({ length: 20 }, () => send({})));
  const answers = await Promise.all(payments.map((p) => send(p.headers)));
  const unpaidAnswers = await unpaidDuring;

  const byStatus = new Map<number, number>();
  for (const a of answers) byStatus.set(a.status, (byStatus.get(a.status) ?? 0) + 1);
  const served = answers.filter((a) => a.status === 200);
  const shed = answers.filter((a) => a.status === 503);
  const latencies = served.map((a) => a.ms).sort((a, b) => a - b);
  const p99 = percentile(latencies, 99);
  t.comment(`answers: ${JSON.stringify(Object.fromEntries(byStatus))}; 200s p50 ${percentile(latencies, 50).toFixed(0)} ms, p99 ${p99.toFixed(0)} ms`);
  const shedMs = shed.map((a) => a.ms).sort((a, b) => a - b);
  t.comment(
    `503s: min ${shedMs[0]?.toFixed(0)} p50 ${percentile(shedMs, 50).toFixed(0)} max ${shedMs.at(-1)?.toFixed(0)}; 200s min ${latencies[0]?.toFixed(0)}; reasons ${JSON.stringify(shed.slice(0, 3).map((a) => a.body))}`,
  );

  t.equal(served.length + shed.length, BUYERS, 'every answer is a 200 or a 503 (no 202, no 402, no 5xx else)');
  t.ok(served.length >= 32, `at least a batch's worth is served (${served.length})`);
  t.ok(shed.length > 0, `and the rest is turned away before charging (${shed.length})`);
  // The admitted batch lands in the next block or the one after, by the phase of the storm against the block clock:
  // the same code measured p99 1,240 and 2,410 ms back to back (and 2,188 / 2,210 at the next commit), all 200s within
  // tens of ms of each other. Bounded at two blocks and a second: the 200s come in a batch's first blocks, not later.
  t.ok(p99 < (2 * BLOCK_SECONDS + 1) * 1000, `p99 of the 200s (${p99.toFixed(0)} ms) is under two blocks plus one second`);
  t.ok(
    shed.every((a) => Number(a.retryAfter) >= 1 && /nothing was charged/.test(a.body)),
    'each 503 says nothing was charged and when to come back (Retry-After)',
  );
  t.ok(
    unpaidAnswers.every((a) => a.status === 402),
    'unpaid requests got their 402 all along',
  );

  // Charged exactly the 200s: per payer, at the merchant, and not one turned-away authorization used on chain.
  await rpcCall(n.rpcUrl, 'evm_setAutomine', [true]);
  await rpcCall(n.rpcUrl, 'evm_mine', []);
  const balancesAfter = await Promise.all(payers.map((p) => stableBalance(n, p.address)));
  const servedPerPayer = payers.map((_, i) => answers.filter((a, j) => j % PAYERS === i && a.status === 200).length);
  t.same(
    balancesAfter.map((b, i) => (balancesBefore[i] as bigint) - b),
    servedPerPayer.map((count) => BigInt(count) * price),
    'each payer paid for its 200s, and for nothing else',
  );
  t.equal((await stableBalance(n, merchant)) - merchantBefore, BigInt(served.length) * price, 'the merchant received exactly the 200s');
  t.equal(fixtures.calls - callsBefore, served.length, 'and the upstream was called once per 200');
  const shedPayments = payments.filter((_, i) => answers[i]?.status === 503);
  const used: boolean[] = [];
  for (let i = 0; i < shedPayments.length; i += 50) {
    used.push(...(await Promise.all(shedPayments.slice(i, i + 50).map((p) => authorizationUsed(p.payer, p.nonce)))));
  }
  t.equal(used.filter(Boolean).length, 0, 'no authorization of a 503 was used on chain');

  // A turned-away credential is still good: sent again once the storm has passed, it is served and charged once.
  const again = shedPayments.slice(0, 3);
  const retried = await Promise.all(again.map((p) => send(p.headers)));
  t.same(
    retried.map((a) => a.status),
    again.map(() => 200),
    'a 503 credential sent again later is served',
  );
  t.equal((await stableBalance(n, merchant)) - merchantBefore, BigInt(served.length + again.length) * price, 'and charged once');
});
