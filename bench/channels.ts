/**
 * `npm run bench -- channels`: paid requests through x402 `batch-settlement` payment channels against `exact`, on
 * one gateway in one run. Each of `--channels` buyers opens a channel with the official client (`@x402/fetch` and
 * `@x402/evm`'s batch-settlement client: a deposit, then one voucher), and `--vouchers` more cumulative vouchers per
 * channel are signed before the clock starts. One keep-alive connection per channel sends that channel's vouchers in
 * order (a channel's requests are serialized by the gateway), as fast as they are answered. Then the same gateway is
 * paid with `--exact` pre-signed `exact` payments (each settled on chain before it is served). For both: paid 200s
 * per second and the gateway's CPU per paid 200 (user + system from /proc over the timed window).
 *
 * Then what it costs on chain: the deposits' gas from their receipts, one `claimWithSignature` per ten channels
 * (signed by the receiver authorizer, the key the bench gave the gateway) and one `settle` for the merchant, each
 * from its receipt; gas per request at 1, 10, 100 and 1,000 requests per channel is a channel's share of those
 * transactions over its requests (a claim carries one cumulative voucher per channel, whatever it counts). And the
 * ledger: each channel's `totalClaimed` equals what the gateway answered 200 for, and the sweep paid the merchant.
 *
 *   node --import tsx bench/channels.ts [--channels N] [--vouchers N] [--exact N] [--poll-ms N]
 */
import { type Address, erc20Abi, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, sign } from 'viem/accounts';
import { BATCH_SETTLEMENT_ADDRESS, CAIP2 } from '../src/chain/canonical.ts';
import { devnetAccount } from '../src/devnet/accounts.ts';
import { decodePaymentRequiredHeader } from '../src/protocol/x402/headers.ts';
import type { PaymentRequirements } from '../src/protocol/x402/types.ts';
import { batchSettlementAbi } from '../src/schemes/batch-settlement/abi.ts';
import { claimBatchTypedData, voucherClaimArgs, type VoucherClaim } from '../src/schemes/batch-settlement/claim-batch.ts';
import type { ChannelConfig } from '../src/schemes/batch-settlement/channel-config.ts';
import { voucherDigest } from '../src/schemes/batch-settlement/voucher.ts';
import { channelBuyer, decodedCredential, encodedCredential } from '../test/helpers/channel-buyer.ts';
import { clientsFor, receiptOf } from '../test/helpers/devnet.ts';
import { cpuWindow } from './cpu.ts';
import { BENCH_FUNDERS, benchDevnet, fundBuyers, networkOf } from './devnet.ts';
import { load } from './load.ts';
import { benchOptions } from './options.ts';
import { measurePaid } from './paid-run.ts';
import { progress, writeFigures } from './report.ts';
import { SigningPool } from './sign.ts';
import { startAll, startGate402, upstreamServer, type Server } from './stacks.ts';

/** The gateway's own claim actors wait out the run: the bench claims itself, ten channels a claim, to price each request. */
const CLAIMS_WAIT = {
  GATE402_CHANNEL_CLAIM_EXPOSURE: String(10 ** 15),
  GATE402_CHANNEL_CLAIM_MAX_AGE_SECONDS: String(30 * 86_400),
  // The exposure caps out of the way too (a channel or network at its cap is claimed, and its vouchers wait).
  GATE402_CHANNEL_MAX_EXPOSURE: String(10 ** 15),
  GATE402_CHANNEL_MAX_NETWORK_EXPOSURE: String(10 ** 15),
};

const opts = benchOptions({
  full: { channels: '64', vouchers: '300', exact: '400', 'poll-ms': '20' },
  quick: { channels: '16', vouchers: '100', exact: '100', 'poll-ms': '20' },
  tiny: { channels: '2', vouchers: '5', exact: '4', 'poll-ms': '20' },
});
const CHANNELS = opts.number('channels');
const VOUCHERS = opts.number('vouchers');
const EXACT = opts.number('exact', { min: 0 });
const POLL_MS = opts.number('poll-ms', { min: 10 });
const WARM = Math.min(5, Math.floor(VOUCHERS / 10));
const CLAIM_ROWS = 10;
const PER_CHANNEL = [1, 10, 100, 1000] as const;
/** The issue's goals for this bench, each marked met or not in the figures. */
const GOALS = { paidPerSecond: 5_000, gatewayCpuMsPer200: 0.2, gasPerRequestAt1000: 200 } as const;

interface Channel {
  config: ChannelConfig;
  channelId: Hex;
  key: Hex;
  depositTx: Hex;
  /** The official client's voucher credential, decoded: later vouchers change only the voucher in it. */
  template: ReturnType<typeof decodedCredential>;
  /** Cumulative amount charged so far, as the gateway answered 200, and the voucher that carried it. */
  accepted: { amount: bigint; signature: Hex };
  /** Pre-signed vouchers, in order: ceiling and header. */
  next: { amount: bigint; signature: Hex; header: string }[];
  sentAt: number;
}

const devnet = await benchDevnet(opts.manifest);
const n = networkOf(devnet.manifest, CAIP2.base);
const { pub } = clientsFor(n, devnetAccount(BENCH_FUNDERS[0] as number));
const servers: Server[] = [];
const signer = new SigningPool();
try {
  const upstream = await upstreamServer();
  servers.push(upstream);
  const authorizer = generatePrivateKey();
  const [gate402] = await startAll(servers, [
    startGate402(devnet.manifestPath, { upstream: upstream.url, pollMs: POLL_MS, env: { GATE402_CHANNEL_AUTHORIZER_KEY: authorizer, ...CLAIMS_WAIT } }),
  ] as const);
  const offers = await offersOf(gate402.url);
  const price = BigInt(offers.channel.amount);
  progress(`gateway up; ${offers.channel.scheme} at ${price} per request beside exact`);

  const buyers = await fundBuyers(n, CHANNELS, price * BigInt(VOUCHERS + 10) + BigInt(offers.exact.amount) * BigInt(Math.ceil(EXACT / CHANNELS) + 1));
  const channels = await openChannels(gate402.url, buyers, price);
  progress(`${channels.length} channels open (a deposit and a voucher each, by the official client)`);
  await presign(channels, price);
  progress(`${channels.length * VOUCHERS} vouchers signed`);

  const send = (count: number) =>
    load(
      (_, c) => {
        const ch = channels[c];
        const v = ch && ch.sentAt < Math.min(count, ch.next.length) ? ch.next[ch.sentAt] : undefined;
        return v ? { url: gate402.url, headers: { 'payment-signature': v.header } } : undefined;
      },
      600,
      channels.length,
      (status, _body, c) => {
        const ch = channels[c] as Channel;
        const v = ch.next[ch.sentAt++] as Channel['next'][number];
        if (status === 200) ch.accepted = { amount: v.amount, signature: v.signature };
        return String(status);
      },
    );
  await send(WARM); // untimed: JIT and connections
  const cpu = cpuWindow(Object.fromEntries(Object.entries(gate402.processes).map(([role, child]) => [role, child.pid])));
  const run = await send(Number.MAX_SAFE_INTEGER);
  const voucherCpu = cpu.end(run.outcomes['200'] ?? 0);
  const voucher = {
    ...run,
    paidPerSecond: run.seconds > 0 ? Math.round((run.outcomes['200'] ?? 0) / run.seconds) : 0,
    cpu: voucherCpu,
  };
  progress(`vouchers: ${voucher.paidPerSecond} paid/s, ${voucherCpu.msPer200.total} ms gateway CPU per paid 200 (${JSON.stringify(run.outcomes)})`);

  const exact = EXACT > 0 ? await measurePaid(n, signer, { server: gate402, offer: offers.exact }, buyers, { count: EXACT, seconds: 600, concurrency: Math.min(CHANNELS, EXACT) }) : undefined;
  if (exact) progress(`exact: ${exact.paidPerSecond} paid/s, ${exact.cpu.msPer200.total} ms gateway CPU per paid 200`);

  const onChain = await claimAndSweep(channels, authorizer);
  progress(`on chain: ${JSON.stringify(onChain.gasPerRequest)} gas per request at ${PER_CHANNEL.join(', ')} requests per channel`);
  const cpuPer200 = voucherCpu.msPer200.total ?? Number.POSITIVE_INFINITY;
  const gasAt1000 = onChain.gasPerRequest['1000'] ?? Number.POSITIVE_INFINITY;
  const goals = {
    paidPerSecond: { goal: `at least ${GOALS.paidPerSecond}`, measured: voucher.paidPerSecond, met: voucher.paidPerSecond >= GOALS.paidPerSecond },
    gatewayCpuMsPer200: { goal: `at most ${GOALS.gatewayCpuMsPer200}`, measured: cpuPer200, met: cpuPer200 <= GOALS.gatewayCpuMsPer200 },
    gasPerRequestAt1000: { goal: `at most ${GOALS.gasPerRequestAt1000}`, measured: gasAt1000, met: gasAt1000 <= GOALS.gasPerRequestAt1000 },
  };
  progress(
    `goals: ${Object.entries(goals)
      .map(([name, g]) => `${name} ${g.measured} (${g.goal}): ${g.met ? 'met' : 'NOT met'}`)
      .join('; ')}`,
  );
  writeFigures(opts.out, {
    channels: {
      channels: CHANNELS,
      vouchersPerChannel: VOUCHERS,
      price: String(price),
      voucher,
      ...(exact ? { exact } : {}),
      cpuPerPaidExactVsVoucher: exact && voucherCpu.msPer200.total ? Number(((exact.cpu.msPer200.total ?? 0) / (voucherCpu.msPer200.total as number)).toFixed(1)) : undefined,
      onChain,
      goals,
    },
  });
} finally {
  await signer.close();
  await Promise.all(servers.map((s) => s.stop()));
  await devnet.stop();
}

/** The route's `exact` and `batch-settlement` offers on the bench's network, from its 402. */
async function offersOf(url: string): Promise<{ exact: PaymentRequirements; channel: PaymentRequirements }> {
  const res = await fetch(url, { signal: AbortSignal.timeout(15_000) });
  await res.arrayBuffer();
  const required = decodePaymentRequiredHeader(String(res.headers.get('payment-required')));
  const accepts = required.ok ? required.value.accepts.filter((o) => o.network === CAIP2.base) : [];
  const exact = accepts.find((o) => o.scheme === 'exact');
  // The x402 codec types only the exact scheme; a channel offer is read as what it is on the wire.
  const channel = accepts.find((o) => (o as { scheme: string }).scheme === 'batch-settlement');
  if (res.status !== 402 || !exact || !channel) throw new Error(`${url} answered ${res.status} without exact and batch-settlement offers on ${CAIP2.base}`);
  return { exact, channel };
}

/** Each buyer pays twice with the official client, unchanged: the deposit (its transaction) and a first voucher. */
async function openChannels(url: string, buyers: { key: Hex }[], price: bigint): Promise<Channel[]> {
  const opened: Channel[] = [];
  for (let from = 0; from < buyers.length; from += 8) {
    const slice = buyers.slice(from, from + 8);
    opened.push(
      ...(await Promise.all(
        slice.map(async ({ key }) => {
          const buyer = channelBuyer(n, privateKeyToAccount(key), { depositMultiplier: VOUCHERS + 4 });
          const first = await patiently(() => buyer.pay(url));
          const receipt = first.headers.get('payment-response');
          const firstBody = await first.text();
          const second = await patiently(() => buyer.pay(url));
          const secondBody = await second.text();
          if (first.status !== 200 || second.status !== 200 || !receipt)
            throw new Error(`opening a channel answered ${first.status} (${firstBody.slice(0, 300)}) then ${second.status} (${secondBody.slice(0, 300)})`);
          const deposit = JSON.parse(Buffer.from(receipt, 'base64').toString('utf8')) as { transaction: Hex };
          const template = decodedCredential(buyer.sent[buyer.sent.length - 1] as string);
          const v = template.payload.voucher as { channelId: Hex; maxClaimableAmount: string; signature: Hex };
          if (BigInt(v.maxClaimableAmount) !== 2n * price) throw new Error(`the second voucher's ceiling is ${v.maxClaimableAmount}, not two prices`);
          return {
            config: template.payload.channelConfig as ChannelConfig,
            channelId: v.channelId,
            key,
            depositTx: deposit.transaction,
            template,
            accepted: { amount: 2n * price, signature: v.signature },
            next: [],
            sentAt: 0,
          };
        }),
      )),
    );
  }
  return opened;
}

/** A request asked again after a 503's Retry-After (nothing was charged), as a patient buyer does; at most five times. */
async function patiently(ask: () => Promise<Response>): Promise<Response> {
  for (let attempt = 1; ; attempt++) {
    const res = await ask();
    if (res.status !== 503 || attempt === 5) return res;
    await res.arrayBuffer();
    await new Promise((r) => setTimeout(r, 1000 * Math.max(1, Number(res.headers.get('retry-after')) || 1)));
  }
}

/** Each channel's next VOUCHERS vouchers, one price apart, signed by its payer (who signs for itself). */
async function presign(channels: Channel[], price: bigint): Promise<void> {
  for (const ch of channels) {
    for (let k = 1; k <= VOUCHERS; k++) {
      const amount = ch.accepted.amount + BigInt(k) * price;
      const signature = (await sign({ hash: voucherDigest({ channelId: ch.channelId, maxClaimableAmount: amount }, n.chainId), privateKey: ch.key, to: 'hex' })) as Hex;
      const header = encodedCredential({
        ...ch.template,
        payload: { ...ch.template.payload, voucher: { channelId: ch.channelId, maxClaimableAmount: String(amount), signature } },
      });
      ch.next.push({ amount, signature, header });
    }
  }
}

/**
 * Claims every channel's highest accepted voucher, ten channels per `claimWithSignature`, then sweeps the merchant's
 * claimed balance with one `settle`, all relayed by a bench funder; reads the gas of every transaction from its
 * receipt, and checks the ledger.
 */
async function claimAndSweep(channels: Channel[], authorizerKey: Hex) {
  const funder = devnetAccount(BENCH_FUNDERS[0] as number);
  const { wallet } = clientsFor(n, funder);
  const authorizer = privateKeyToAccount(authorizerKey);
  const depositTxs = [...new Set(channels.map((c) => c.depositTx))];
  const depositGas = (await Promise.all(depositTxs.map(async (hash) => (await receiptOf(pub, hash)).gasUsed))).reduce((a, b) => a + b, 0n);

  const receiver = channels[0]?.config.receiver as Address;
  const token = channels[0]?.config.token as Address;
  const merchantBefore = await pub.readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [receiver] });
  let claimGas = 0n;
  let claims = 0;
  for (let from = 0; from < channels.length; from += CLAIM_ROWS) {
    const rows: VoucherClaim[] = channels
      .slice(from, from + CLAIM_ROWS)
      .map((c) => ({ config: c.config, maxClaimableAmount: c.accepted.amount, signature: c.accepted.signature, totalClaimed: c.accepted.amount }));
    const signature = await authorizer.signTypedData(claimBatchTypedData(rows, n.chainId));
    const hash = await wallet.writeContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: 'claimWithSignature', args: [voucherClaimArgs(rows), signature] });
    const receipt = await receiptOf(pub, hash);
    if (receipt.status !== 'success') throw new Error(`claim ${hash} reverted`);
    claimGas += receipt.gasUsed;
    claims += 1;
  }
  const swept = await receiptOf(pub, await wallet.writeContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: 'settle', args: [receiver, token] }));
  if (swept.status !== 'success') throw new Error('settle reverted');
  const merchantGain = (await pub.readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [receiver] })) - merchantBefore;

  let charged = 0n;
  const wrong: string[] = [];
  for (const c of channels) {
    const [, totalClaimed] = await pub.readContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: 'channels', args: [c.channelId] });
    charged += c.accepted.amount;
    if (totalClaimed !== c.accepted.amount) wrong.push(`${c.channelId}: claimed ${totalClaimed}, answered 200 for ${c.accepted.amount}`);
  }
  const perChannel = {
    deposit: Number(depositGas) / channels.length,
    claim: Number(claimGas) / channels.length,
    settle: Number(swept.gasUsed) / channels.length,
  };
  const fixed = perChannel.deposit + perChannel.claim + perChannel.settle;
  return {
    depositTransactions: depositTxs.length,
    claimTransactions: claims,
    rowsPerClaim: Math.min(CLAIM_ROWS, channels.length),
    gas: { deposits: Number(depositGas), claims: Number(claimGas), settle: Number(swept.gasUsed) },
    gasPerChannel: Object.fromEntries(Object.entries(perChannel).map(([k, v]) => [k, Math.round(v)])),
    gasPerRequest: Object.fromEntries(PER_CHANNEL.map((r) => [String(r), Math.round(fixed / r)])),
    ledger: {
      chargedByGateway: String(charged),
      // Other runs on the same devnet may have left claimed, unswept amounts for this merchant: at least what was charged.
      merchantGain: String(merchantGain),
      holds: wrong.length === 0 && merchantGain >= charged,
      mismatches: wrong.slice(0, 5),
    },
  };
}
