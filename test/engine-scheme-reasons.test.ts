// A payment's failure reasons come from its own scheme at every step of the engine: a Permit2 payment is never given
// an EIP-3009 code. The engine's payment steps, driven one at a time with a Permit2 and an EIP-3009 payment, where
// each can fail without the chain explaining it: a send with no verified call, a mined settlement without the Transfer
// it must log, and a batch whose receipt names a call that is not the payment's. Real LMDB store, no chain.
import t from 'tap';
import { createActor, fromPromise, toPromise } from 'xstate';
import type { Address, Hex, TransactionReceipt } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { publicClientFor } from '../src/chain/clients.ts';
import type { StablecoinInfo } from '../src/chain/network-types.ts';
import { NetworkRegistry, type Network } from '../src/chain/networks.ts';
import { ChainInspector } from '../src/engine/chain-inspector.ts';
import type { EngineOptions } from '../src/engine/engine-options.ts';
import { batchMachine, type MinedBatch } from '../src/engine/batch-machine.ts';
import type { StepInput, StepResult } from '../src/engine/payment-machine.ts';
import type { BatchRecord, PaymentRecord } from '../src/engine/payment-record.ts';
import { PaymentSteps } from '../src/engine/payment-steps.ts';
import { RevertBudget } from '../src/engine/revert-budget.ts';
import { createLogger } from '../src/log/logger.ts';
import type { Eip3009Payload, PaymentRequirements, Permit2Payload, VerifyRequest } from '../src/protocol/x402/types.ts';
import { nonceKeyOf } from '../src/schemes/payment-identity.ts';
import { openLmdbStore } from '../src/store/lmdb/open-lmdb-store.ts';
import type { BlockWatcher } from '../src/tx/block-watcher.ts';
import { RelayerPool } from '../src/tx/relayer-pool.ts';
import type { SignedTx } from '../src/tx/trail.ts';
import { Eip3009Reason, Permit2Reason, SETTLEMENT_REASONS } from '../src/verify/reasons.ts';
import { tempDir } from './helpers/temp-dir.ts';

const TOKEN: Address = '0x1000000000000000000000000000000000000001';
const PROXY: Address = '0x402085c248EeA27D92E8b30b2C58ed07f9E20001';
const PERMIT2: Address = '0x000000000022D473030F116dDEE9F6B43aC78BA3';
const PAYER: Address = '0x2000000000000000000000000000000000000002';
const PAYEE: Address = '0x3000000000000000000000000000000000000003';
const SIGNATURE: Hex = `0x${'11'.repeat(65)}`;
const DEADLINE = '1900000000';
const relayer = privateKeyToAccount(`0x${'42'.repeat(32)}`);

const token = { address: TOKEN, name: 'USD Coin', version: '2', decimals: 6 } as StablecoinInfo;
const base: Network = { caip2: 'eip155:8453', chainId: 8453, rpcUrl: 'http://127.0.0.1:1', stablecoin: token };
const stock: Network = { caip2: 'eip155:4663', chainId: 4663, rpcUrl: 'http://127.0.0.1:1', stablecoin: token, permit2: PERMIT2, exactPermit2Proxy: PROXY };
const eip3009Req: PaymentRequirements = { scheme: 'exact', network: 'eip155:8453', amount: '1000', asset: TOKEN, payTo: PAYEE, maxTimeoutSeconds: 60, extra: { name: 'USD Coin', version: '2' } };
const permit2Req: PaymentRequirements = { ...eip3009Req, network: 'eip155:4663', extra: { assetTransferMethod: 'permit2', spender: PROXY } };
const eip3009Payload: Eip3009Payload = {
  signature: SIGNATURE,
  authorization: { from: PAYER, to: PAYEE, value: '1000', validAfter: '0', validBefore: DEADLINE, nonce: `0x${'ab'.repeat(32)}` },
};
const permit2Payload: Permit2Payload = {
  signature: SIGNATURE,
  permit2Authorization: { from: PAYER, permitted: { token: TOKEN, amount: '1000' }, spender: PROXY, nonce: '258', deadline: DEADLINE, witness: { to: PAYEE, validAfter: '0' } },
};
const requestOf = (req: PaymentRequirements, payload: Eip3009Payload | Permit2Payload): VerifyRequest => ({
  x402Version: 2,
  paymentPayload: { x402Version: 2, accepted: req, payload },
  paymentRequirements: req,
});

const txHash = `0x${'cd'.repeat(32)}` as Hex;
const signedTx = (chainId: number): SignedTx => ({
  hash: txHash,
  raw: '0x02',
  chainId,
  relayer: relayer.address,
  nonce: 0,
  to: PROXY,
  data: '0x1234',
  gas: '100000',
  maxFeePerGas: '1',
  maxPriorityFeePerGas: '1',
});
/** A receipt of a mined, successful transaction that logged nothing (so no Transfer to the payee). */
const emptyReceipt = { transactionHash: txHash, status: 'success', gasUsed: 50_000n, logs: [], blockNumber: 1n } as unknown as TransactionReceipt;

const networks = new NetworkRegistry([base, stock]);
const store = openLmdbStore(tempDir('scheme-reasons'));
t.teardown(() => store.close());
const client = publicClientFor(8453, 'http://127.0.0.1:1', { timeoutMs: 100, pollingIntervalMs: 10 });
const pools = new Map(networks.all().map((n) => [n.caip2, new RelayerPool({ chainId: n.chainId, client, accounts: [relayer] })]));
/** Hands every awaited transaction the receipt that logged nothing. */
const watcher = { stopped: false, receipt: async () => emptyReceipt } as unknown as BlockWatcher;
const log = createLogger('test', { level: 'error' });
const options = {
  networks,
  store,
  signatures: { verify: async () => undefined },
  inspector: () => new ChainInspector(client),
  relayers: (caip2: string) => pools.get(caip2) as RelayerPool,
  watcher: () => watcher,
  simulateFrom: () => ({ from: relayer.address }),
  policy: { refusedPayees: new Set<string>(), minAmount: 1n },
  now: () => 1_800_000_000n,
  confirmDeadlineMs: 1000,
  pollMs: 10,
  simulateOnVerify: false,
  batch: { maxSize: 1, windowMs: 0, eager: true },
  log,
  metrics: { verification: () => {}, watchActor: () => {}, settlement: () => {}, revertedSettlement: () => {}, revertRefusal: () => {} },
} as unknown as EngineOptions;
const abort = new AbortController();
t.teardown(() => abort.abort());
const steps = new PaymentSteps({
  options,
  records: store.collection<PaymentRecord>('payments'),
  batches: store.collection<BatchRecord>('payment-batches'),
  budget: new RevertBudget({ store }),
  checked: new Map(),
  clock: Date.now,
  signal: abort.signal,
  trail: async () => {},
});

const recordOf = (request: VerifyRequest, over: Partial<PaymentRecord> = {}): PaymentRecord => ({
  id: nonceKeyOf(request),
  attempt: 'a1',
  network: request.paymentRequirements.network,
  payer: PAYER,
  fingerprint: 'f',
  request,
  state: 'broadcasting',
  txs: [],
  createdAt: 0,
  updatedAt: 0,
  ...over,
});

/** Runs one of the engine's payment steps as the machine invokes it. */
async function step(name: 'broadcast' | 'confirm', input: StepInput): Promise<StepResult> {
  const logic = steps.machine.implementations.actors[name] as Parameters<typeof createActor>[0];
  return (await toPromise(createActor(logic, { input }).start())) as StepResult;
}

/** A batch actor carried to a mined receipt whose one call is another payment's. */
function minedBatch(record: PaymentRecord, chainId: number) {
  const tx = signedTx(chainId);
  const mined: MinedBatch = { receipt: emptyReceipt, tx, txs: [tx], calls: [{ to: PROXY, data: '0xdeadbeef', expect: { token: TOKEN, from: PAYER, to: PAYEE, value: 1000n } }], settled: [true] };
  const batch: BatchRecord = { id: 'b1', network: record.network, members: [record.id], txs: [tx], createdAt: 0, updatedAt: 0 };
  const machine = batchMachine.provide({ actors: { confirm: fromPromise(async () => mined) } });
  return createActor(machine, { input: { batch, members: [], maxSize: 10, windowMs: 10 } }).start();
}

const codeOf = (result: StepResult) => (result.ok ? 'ok' : result.error.code);

for (const [kind, request, chainId, reasons] of [
  ['Permit2', requestOf(permit2Req, permit2Payload), stock.chainId, Permit2Reason],
  ['EIP-3009', requestOf(eip3009Req, eip3009Payload), base.chainId, Eip3009Reason],
] as const) {
  t.test(`a ${kind} payment fails with ${kind} codes at every step`, async (t) => {
    t.equal(codeOf(await step('broadcast', { record: recordOf(request) })), reasons.simulationFailed, 'a send with no verified settlement call');
    const sent = recordOf(request, { state: 'inFlight', txs: [signedTx(chainId)] });
    t.equal(codeOf(await step('confirm', { record: sent })), reasons.transferEventMismatch, 'a settlement mined without the Transfer it must log');
    const member = recordOf(request, { state: 'inFlight', batch: { id: 'b1', index: 0, tx: txHash } });
    t.equal(codeOf(await step('confirm', { record: member, batch: minedBatch(member, chainId) })), reasons.transferEventMismatch, "a batch receipt whose call is not the payment's");
  });
}

t.test("every code a step gives is in the engine's one list of reasons", async (t) => {
  for (const code of [...Object.values(Permit2Reason), ...Object.values(Eip3009Reason), 'broadcast_rejected', 'broadcast_error', 'simulation_error'])
    t.ok(SETTLEMENT_REASONS.includes(code as (typeof SETTLEMENT_REASONS)[number]), code);
  t.equal(new Set(SETTLEMENT_REASONS).size, SETTLEMENT_REASONS.length, 'each once');
  t.not(Permit2Reason.transferEventMismatch, Eip3009Reason.transferEventMismatch, 'a Permit2 code of its own');
});
