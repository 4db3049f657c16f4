/**
 * Part of `npm run bench -- verify`. Signature verification throughput: viem (pure JS) against this project's digest + native-recovery path, single
 * thread and through the batched worker pool, and the reference x402 facilitator's `verify` with its chain reads
 * answered by a fake signer (so only the scheme's own CPU cost is measured).
 *
 *   node --import tsx bench/verify-signatures.ts [--seconds N] [--count N] [--threads N]
 *
 * --seconds: length of each timed phase (default 3); --count: payloads signed beforehand, half EIP-3009 and half
 * Permit2 (default 20000; signing runs before any timing); --threads: pool size (default 0: cores).
 * Prints a table, and its figures as JSON (to --out, see options.ts).
 */
import { transferWithAuthorizationTypes } from '../test/helpers/eip3009.ts';
import { permitWitnessTypes } from '../test/helpers/permit2.ts';
import { EXACT_PERMIT2_PROXY_ADDRESS, PERMIT2_ADDRESS, USDC_BASE_ADDRESS } from '../src/chain/canonical.ts';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { randomBytes } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import { bytesToHex, getAddress, recoverTypedDataAddress, verifyTypedData, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { ExactEvmScheme } from '@x402/evm/exact/facilitator';
import { jobDigest, recoverJobSync, type VerifyJob } from '../src/verify/signature/jobs.ts';
import { recoverSigner, secp256k1Backend } from '../src/verify/signature/recover.ts';
import { SignatureVerifier } from '../src/verify/signature/pool.ts';
import { benchOptions } from './options.ts';
import { writeFigures } from './report.ts';

const opts = benchOptions({
  full: { seconds: '3', count: '20000', threads: '0' },
  quick: { seconds: '0.5', count: '2000', threads: '0' },
  tiny: { seconds: '0.1', count: '200', threads: '0' },
});
const SECONDS = opts.number('seconds', { fraction: true, min: 0.01 });
const COUNT = opts.number('count', { min: 2 });
const THREADS = opts.number('threads', { min: 0 }) || availableParallelism();

// ---- payloads ---------------------------------------------------------------------------------------------------

const PERMIT2: Address = PERMIT2_ADDRESS;
const PROXY: Address = EXACT_PERMIT2_PROXY_ADDRESS;
const USDC_BASE: Address = USDC_BASE_ADDRESS;
const TOKEN_B: Address = getAddress(bytesToHex(randomBytes(20)));
const EIP3009_DOMAIN = { name: 'USD Coin', version: '2', chainId: 8453, verifyingContract: USDC_BASE } as const;
const PERMIT2_CHAIN = 4663;
const PERMIT2_DOMAIN = { name: 'Permit2', chainId: PERMIT2_CHAIN, verifyingContract: PERMIT2 } as const;

// The EIP-712 types, written out once for every test and bench (independently of the code under test).
const eip3009Types = transferWithAuthorizationTypes;
const permit2Types = permitWitnessTypes;

type X402Requirements = Parameters<ExactEvmScheme['verify']>[1];

interface Payload {
  signer: Address;
  /** This project's job, in wire form (decimal strings), as it arrives in a PAYMENT-SIGNATURE header. */
  job: VerifyJob;
  /** viem's `recoverTypedDataAddress` arguments for the same message. */
  viemArgs: Parameters<typeof recoverTypedDataAddress>[0];
  /** The reference facilitator's arguments. */
  x402: { payload: Parameters<ExactEvmScheme['verify']>[0]; requirements: X402Requirements };
}

const randomAddress = (): Address => getAddress(bytesToHex(randomBytes(20)));
const log = (s: string) => process.stderr.write(`${s}\n`);

/**
 * Signs typed data with viem's `privateKeyToAccount(key).signTypedData`, spread over `threads` worker threads
 * (signing is pure JS, about 1,000 per second per core here). The worker is a few lines of plain JavaScript that
 * imports viem by URL, so it needs no TypeScript loader.
 */
async function signAll(tasks: { key: Hex; typedData: unknown }[], threads: number): Promise<Hex[]> {
  const code = `
    const { parentPort, workerData } = require('node:worker_threads');
    (async () => {
      const { privateKeyToAccount } = await import(workerData.viemAccounts);
      const accounts = new Map();
      const out = [];
      for (const { key, typedData } of workerData.tasks) {
        let account = accounts.get(key);
        if (account === undefined) accounts.set(key, (account = privateKeyToAccount(key)));
        out.push(await account.signTypedData(typedData));
      }
      parentPort.postMessage(out);
    })().catch((error) => { throw error; });
  `;
  const viemAccounts = import.meta.resolve('viem/accounts');
  const chunk = Math.ceil(tasks.length / threads);
  const parts = await Promise.all(
    Array.from({ length: threads }, (_, t) => {
      const slice = tasks.slice(t * chunk, (t + 1) * chunk);
      return new Promise<Hex[]>((resolve, reject) => {
        const worker = new Worker(code, { eval: true, workerData: { viemAccounts, tasks: slice }, execArgv: [] });
        worker.once('message', (m: Hex[]) => {
          resolve(m);
          void worker.terminate();
        });
        worker.once('error', reject);
      });
    }),
  );
  return parts.flat();
}

async function signPayloads(count: number): Promise<Payload[]> {
  const accounts: PrivateKeyAccount[] = [];
  const keys: Hex[] = [];
  for (let i = 0; i < Math.min(1000, count); i++) {
    const key = generatePrivateKey();
    keys.push(key);
    accounts.push(privateKeyToAccount(key));
  }
  const now = BigInt(Math.floor(Date.now() / 1000));
  type Draft = { account: PrivateKeyAccount; payTo: Address; amount: bigint } & (
    | { kind: 'eip3009'; message: { from: Address; to: Address; value: bigint; validAfter: bigint; validBefore: bigint; nonce: Hex } }
    | { kind: 'permit2'; message: { permitted: { token: Address; amount: bigint }; spender: Address; nonce: bigint; deadline: bigint; witness: { to: Address; validAfter: bigint } } }
  );
  const drafts: Draft[] = [];
  const tasks: { key: Hex; typedData: unknown }[] = [];
  for (let i = 0; i < count; i++) {
    const account = accounts[i % accounts.length] as PrivateKeyAccount;
    const key = keys[i % keys.length] as Hex;
    const payTo = randomAddress();
    const amount = BigInt(1 + (i % 100_000));
    if (i % 2 === 0) {
      const message = { from: account.address, to: payTo, value: amount, validAfter: 0n, validBefore: now + 3600n, nonce: bytesToHex(randomBytes(32)) };
      drafts.push({ kind: 'eip3009', account, payTo, amount, message });
      tasks.push({ key, typedData: { domain: EIP3009_DOMAIN, types: eip3009Types, primaryType: 'TransferWithAuthorization', message } });
    } else {
      const message = { permitted: { token: TOKEN_B, amount }, spender: PROXY, nonce: BigInt(bytesToHex(randomBytes(32))), deadline: now + 3600n, witness: { to: payTo, validAfter: 0n } };
      drafts.push({ kind: 'permit2', account, payTo, amount, message });
      tasks.push({ key, typedData: { domain: PERMIT2_DOMAIN, types: permit2Types, primaryType: 'PermitWitnessTransferFrom', message } });
    }
  }
  const signatures = await signAll(tasks, availableParallelism());

  return drafts.map((d, i): Payload => {
    const signature = signatures[i] as Hex;
    const { account, payTo, amount } = d;
    if (d.kind === 'eip3009') {
      const { message } = d;
      const authorization = { ...message, value: String(message.value), validAfter: String(message.validAfter), validBefore: String(message.validBefore) };
      const requirements: X402Requirements = {
        scheme: 'exact',
        network: 'eip155:8453',
        amount: String(amount),
        asset: USDC_BASE,
        payTo,
        maxTimeoutSeconds: 3600,
        extra: { name: EIP3009_DOMAIN.name, version: EIP3009_DOMAIN.version },
      };
      return {
        signer: account.address,
        job: { kind: 'eip3009', domain: EIP3009_DOMAIN, authorization, signature },
        viemArgs: { domain: EIP3009_DOMAIN, types: eip3009Types, primaryType: 'TransferWithAuthorization', message, signature },
        x402: { payload: { x402Version: 2, accepted: requirements, payload: { signature, authorization } }, requirements },
      };
    }
    const { message } = d;
    const permit2Authorization = {
      from: account.address,
      permitted: { token: TOKEN_B, amount: String(amount) },
      spender: PROXY,
      nonce: String(message.nonce),
      deadline: String(message.deadline),
      witness: { to: payTo, validAfter: String(message.witness.validAfter) },
    };
    const requirements: X402Requirements = {
      scheme: 'exact',
      network: `eip155:${PERMIT2_CHAIN}`,
      amount: String(amount),
      asset: TOKEN_B,
      payTo,
      maxTimeoutSeconds: 3600,
      extra: { assetTransferMethod: 'permit2' },
    };
    return {
      signer: account.address,
      job: { kind: 'permit2', domain: { chainId: PERMIT2_CHAIN }, permit: permit2Authorization, signature },
      viemArgs: { domain: PERMIT2_DOMAIN, types: permit2Types, primaryType: 'PermitWitnessTransferFrom', message, signature },
      x402: { payload: { x402Version: 2, accepted: requirements, payload: { signature, permit2Authorization } }, requirements },
    };
  });
}

// ---- measurement helpers -----------------------------------------------------------------------------------------

interface Row {
  name: string;
  perSecond: number;
  operations: number;
  seconds: number;
  threads: number;
  wrong: number;
  note?: string;
  latencyMs?: { p50: number; p99: number; max: number };
  /** Process CPU time over wall time during the phase (all threads): about `cores` when the machine is not shared. */
  cpuCores?: number;
  /** Share of the phase the main thread's event loop was busy (submitting jobs, resolving results). */
  mainThreadBusy?: number;
}

/** Runs `op` over the payloads, round robin, for `seconds` (after a short warm-up); counts results that are not the expected signer. */
async function timeLoop(name: string, seconds: number, op: (p: Payload) => unknown, payloads: Payload[], note?: string): Promise<Row> {
  // Untimed warm-up, so that the JIT has settled before the clock starts.
  const warmEnd = performance.now() + Math.min(300, seconds * 100);
  for (let i = 0; performance.now() < warmEnd; i++) await op(payloads[(i * 7919) % payloads.length] as Payload);
  let wrong = 0;
  let n = 0;
  const start = performance.now();
  const end = start + seconds * 1000;
  let now = start;
  while (now < end) {
    for (let k = 0; k < 16; k++, n++) {
      const p = payloads[n % payloads.length] as Payload;
      let r = op(p);
      if (r instanceof Promise) r = await r;
      if (r === false || (typeof r === 'string' && r !== p.signer)) wrong++;
    }
    now = performance.now();
  }
  const elapsed = (now - start) / 1000;
  return { name, perSecond: n / elapsed, operations: n, seconds: elapsed, threads: 1, wrong, ...(note ? { note } : {}) };
}

function percentile(sorted: Float64Array, q: number): number {
  return sorted.length === 0 ? 0 : (sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number);
}

/** Closed loop: `concurrency` callers, each awaiting one `verify()` after another, for `seconds`. */
async function timePool(verifier: SignatureVerifier, concurrency: number, seconds: number, payloads: Payload[]): Promise<Row> {
  let next = 0;
  let done = 0;
  let wrong = 0;
  const latencies: number[] = [];
  const cpu0 = process.cpuUsage();
  const elu0 = performance.eventLoopUtilization();
  const start = performance.now();
  const end = start + seconds * 1000;
  async function caller(): Promise<void> {
    while (performance.now() < end) {
      const p = payloads[next++ % payloads.length] as Payload;
      const t0 = performance.now();
      const r = await verifier.verify(p.job);
      if ((done & 7) === 0) latencies.push(performance.now() - t0);
      done++;
      if (r !== p.signer) wrong++;
    }
  }
  await Promise.all(Array.from({ length: concurrency }, caller));
  const elapsed = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const elu = performance.eventLoopUtilization(elu0);
  const sorted = Float64Array.from(latencies).sort();
  const round = (x: number) => Math.round(x * 100) / 100;
  return {
    name: `(c) SignatureVerifier pool, ${concurrency} concurrent verify()`,
    perSecond: done / elapsed,
    operations: done,
    seconds: elapsed,
    threads: verifier.threads,
    wrong,
    latencyMs: { p50: round(percentile(sorted, 0.5)), p99: round(percentile(sorted, 0.99)), max: round(percentile(sorted, 1)) },
    cpuCores: round((cpu.user + cpu.system) / 1e6 / elapsed),
    mainThreadBusy: round(elu.utilization),
  };
}

/** A facilitator signer that answers chain reads with fixed plausible values and performs no I/O. */
function fakeFacilitatorSigner(): ConstructorParameters<typeof ExactEvmScheme>[0] {
  const assets = new Set([USDC_BASE.toLowerCase(), TOKEN_B.toLowerCase()]);
  return {
    getAddresses: () => ['0x00000000000000000000000000000000000f00d5'],
    // Payers are EOAs (no code); the two assets are deployed contracts.
    getCode: async ({ address }) => (assets.has(address.toLowerCase()) ? '0x6080604052' : '0x'),
    // Simulations (transferWithAuthorization / proxy.settle via eth_call) succeed.
    readContract: async () => undefined,
    verifyTypedData: async (args) => verifyTypedData(args as Parameters<typeof verifyTypedData>[0]),
    writeContract: async () => {
      throw new Error('not in a verify benchmark');
    },
    sendTransaction: async () => {
      throw new Error('not in a verify benchmark');
    },
    waitForTransactionReceipt: async () => {
      throw new Error('not in a verify benchmark');
    },
  };
}

// ---- main --------------------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const cpu = cpus()[0]?.model ?? 'unknown';
  const loadBefore = loadavg().map((x) => Math.round(x * 100) / 100);
  log(`load average ${loadBefore.join(' ')}`);
  log(`verify-signatures: ${COUNT} payloads, ${SECONDS} s per phase, pool of ${THREADS}, ${availableParallelism()} cores (${cpu}), node ${process.version}, secp256k1 ${secp256k1Backend}`);
  log(`signing (viem signTypedData on ${availableParallelism()} threads, not timed)...`);
  const signStart = performance.now();
  const payloads = await signPayloads(COUNT);
  const signSeconds = (performance.now() - signStart) / 1000;
  log(`  ${COUNT} signatures in ${signSeconds.toFixed(1)} s`);
  const eip3009 = payloads.filter((p) => p.job.kind === 'eip3009');
  const permit2 = payloads.filter((p) => p.job.kind === 'permit2');

  const rows: Row[] = [];
  const phase = async (row: Promise<Row>) => {
    const r = await row;
    rows.push(r);
    log(`  ${r.name}: ${Math.round(r.perSecond).toLocaleString('en-US')}/s${r.wrong ? ` (${r.wrong} WRONG)` : ''}`);
  };

  log('single thread...');
  await phase(timeLoop('(a) viem recoverTypedDataAddress', SECONDS, (p) => recoverTypedDataAddress(p.viemArgs), payloads, 'pure JS (@noble/curves), mixed kinds'));
  await phase(timeLoop('(b) recoverJobSync', SECONDS, (p) => recoverJobSync(p.job), payloads, 'digest + native recovery, mixed kinds, wire-form input'));
  await phase(timeLoop('(b) recoverJobSync, EIP-3009 only', SECONDS / 2, (p) => recoverJobSync(p.job), eip3009));
  await phase(timeLoop('(b) recoverJobSync, Permit2 only', SECONDS / 2, (p) => recoverJobSync(p.job), permit2));
  await phase(timeLoop('    digest only, EIP-3009', SECONDS / 3, (p) => jobDigest(p.job) !== undefined, eip3009));
  await phase(timeLoop('    digest only, Permit2', SECONDS / 3, (p) => jobDigest(p.job) !== undefined, permit2));
  const digests = new Map(payloads.slice(0, 2000).map((p) => [p, jobDigest(p.job) as Uint8Array]));
  await phase(timeLoop('    recoverSigner only (native + address)', SECONDS / 3, (p) => recoverSigner(digests.get(p) as Uint8Array, p.job.signature), [...digests.keys()]));

  log('reference facilitator...');
  const scheme = new ExactEvmScheme(fakeFacilitatorSigner());
  const probe = await scheme.verify(payloads[0]!.x402.payload, payloads[0]!.x402.requirements);
  const probe2 = await scheme.verify(payloads[1]!.x402.payload, payloads[1]!.x402.requirements);
  if (!probe.isValid || !probe2.isValid) throw new Error(`reference verify rejects the payloads: ${JSON.stringify([probe, probe2])}`);
  await phase(
    timeLoop(
      '(d) @x402/evm ExactEvmScheme.verify',
      SECONDS,
      async (p) => (await scheme.verify(p.x402.payload, p.x402.requirements)).isValid,
      payloads,
      'fake signer: getCode/readContract answered in memory; includes its field checks',
    ),
  );

  log(`pool (${THREADS} threads)...`);
  const verifier = new SignatureVerifier({ threads: THREADS, maxBatch: 64, maxDelayMicros: 200 });
  const warm = performance.now();
  await Promise.all(payloads.slice(0, 256).map((p) => verifier.verify(p.job)));
  const warmupMs = performance.now() - warm;
  await timePool(verifier, 1024, Math.min(1, SECONDS / 3), payloads); // JIT warm-up in the workers
  await phase(timePool(verifier, 1024, SECONDS, payloads));
  await phase(timePool(verifier, 64, SECONDS / 2, payloads));
  await phase(timePool(verifier, 8, SECONDS / 2, payloads));
  const stats = verifier.stats;
  await verifier.close();

  // ---- report ----
  const find = (prefix: string) => rows.find((r) => r.name.startsWith(prefix))?.perSecond ?? Number.NaN;
  const a = find('(a)');
  const b = find('(b) recoverJobSync');
  const c = find('(c) SignatureVerifier pool, 1024');
  const d = find('(d)');
  const ratios = {
    'b/a (native single thread vs viem)': b / a,
    'c/a (pool vs viem single thread)': c / a,
    'c/b (pool vs native single thread)': c / b,
    'b/d (native single thread vs reference facilitator)': b / d,
    'c/d (pool vs reference facilitator)': c / d,
  };
  const fmt = (x: number) => Math.round(x).toLocaleString('en-US');
  const width = Math.max(...rows.map((r) => r.name.length));
  console.log('');
  console.log(`${'measurement'.padEnd(width)}  ${'per second'.padStart(10)}  threads  wrong  latency p50 / p99 ms  cores used  main busy`);
  for (const r of rows) {
    const lat = r.latencyMs ? `${r.latencyMs.p50} / ${r.latencyMs.p99}` : '';
    const extra = r.cpuCores === undefined ? '' : `${String(r.cpuCores).padStart(10)}  ${String(r.mainThreadBusy).padStart(9)}`;
    console.log(`${r.name.padEnd(width)}  ${fmt(r.perSecond).padStart(10)}  ${String(r.threads).padStart(7)}  ${String(r.wrong).padStart(5)}  ${lat.padEnd(20)}  ${extra}`);
  }
  console.log('');
  for (const [k, v] of Object.entries(ratios)) console.log(`${k.padEnd(52)} ${v.toFixed(1)}x`);
  console.log(`goal >= 10,000/s through the pool: ${c >= 10_000 ? 'met' : 'NOT met'} (${fmt(c)}/s)`);

  const result = {
    benchmark: 'verify-signatures',
    date: new Date().toISOString(),
    command: `node --import tsx bench/verify-signatures.ts --seconds ${SECONDS} --count ${COUNT} --threads ${THREADS}`,
    environment: {
      node: process.version,
      cores: availableParallelism(),
      cpu,
      secp256k1: secp256k1Backend,
      // The machine may be shared: a 1-minute load average well above 0 before the run means other work competed.
      loadAverageBefore: loadBefore,
      loadAverageAfter: loadavg().map((x) => Math.round(x * 100) / 100),
    },
    payloads: { count: COUNT, eip3009: eip3009.length, permit2: permit2.length, signSeconds: Math.round(signSeconds * 10) / 10 },
    pool: {
      threads: THREADS,
      maxBatch: 64,
      maxDelayMicros: 200,
      warmupMs: Math.round(warmupMs),
      batches: stats.batches,
      jobs: stats.jobs,
      meanBatch: Math.round((stats.jobs / stats.batches) * 10) / 10,
    },
    rows: rows.map((r) => ({ ...r, perSecond: Math.round(r.perSecond), seconds: Math.round(r.seconds * 100) / 100 })),
    ratios: Object.fromEntries(Object.entries(ratios).map(([k, v]) => [k, Math.round(v * 10) / 10])),
    goalMet: c >= 10_000,
  };
  writeFigures(opts.out, { signatures: result });
  if (rows.some((r) => r.wrong > 0)) process.exitCode = 1;
}

await main();
