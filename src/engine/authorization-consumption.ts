import { decodeFunctionData, type Address, type Chain, type Hex, type PublicClient, type Transport } from 'viem';
import { isPermit2Payload, type VerifyRequest } from '../protocol/x402/types.ts';
import { callsOfBatch, loggedTransfers, settledCalls } from './settlement-batch.ts';
import type { SettlementCall } from './settlement-call.ts';

/**
 * Whether a signed payment authorization was consumed on chain, by whoever sent it, and by which transaction.
 *
 * A settlement that failed or whose outcome is unknown (our transaction reverted, its call in a batch failed, the
 * node answered an error after taking it, simulation found the nonce used) may still have moved the money: someone
 * copied the call from the mempool and got in first, or our own earlier send landed. One read per scheme, here:
 *
 * - EIP-3009: `authorizationState(from, nonce)` says used; the token's `AuthorizationUsed(from, nonce)` log names
 *   the transaction, and its receipt must log the Transfer of exactly the amount from the payer to the payee.
 * - Permit2: the nonce's bit in `nonceBitmap(owner, nonce >> 8)` says used. Permit2 logs no nonce, so the consuming
 *   transaction is recognised by what it ran: a Transfer of exactly the amount from the payer to the payee is the
 *   candidate, and its transaction counts only if it made exactly our settlement call and that call succeeded:
 *   sent straight to the exact-permit proxy with our signed permit (`settle`, or `settleWithPermit` around it), or as one call of an `aggregate3` sent to the chain's
 *   known Multicall3, owning a Transfer no other call of the batch could have logged (`settledCalls`). A bit set
 *   in the same block as an unrelated Transfer of the same amount (the payer's other payment, with this nonce
 *   spent elsewhere or invalidated) is not a settlement; neither is a call wrapped in a contract we cannot read,
 *   whose calldata need not be what it ran.
 *
 * Consumed with a matching Transfer: settled. Consumed without one (a cancelled authorization, or a use older than
 * the searched blocks): not settled, with the reason. Logs are searched newest first, over `lookbackBlocks` below
 * the head, in ranges of `chunkBlocks` (what public RPCs allow for eth_getLogs).
 */

/** What to look for: the authorization's nonce and exactly the Transfer its settlement makes. */
export type Authorization =
  | { scheme: 'eip3009'; token: Address; from: Address; to: Address; value: bigint; nonce: Hex }
  | {
      scheme: 'permit2';
      permit2: Address;
      token: Address;
      from: Address;
      to: Address;
      value: bigint;
      nonce: bigint;
      /** Our settlement call (to the exact-permit proxy), and the chain's Multicall3 whose batches are read call by call. */
      settlement: { to: Address; data: Hex; multicall?: Address };
    };

export type Consumption =
  | { consumed: false }
  /** Consumed by `transaction` (ours or anyone's), which moved exactly the amount from the payer to the payee. */
  | { consumed: true; transaction: Hex; blockNumber: bigint }
  /** Consumed, and no transaction found that moved the amount to the payee for it. */
  | { consumed: true; transaction?: undefined; why: string };

export interface ConsumptionSearch {
  lookbackBlocks: bigint;
  chunkBlocks?: bigint;
}

export type ChainReader = PublicClient<Transport, Chain>;

const authorizationStateAbi = [
  { type: 'function', name: 'authorizationState', stateMutability: 'view', inputs: [{ name: 'authorizer', type: 'address' }, { name: 'nonce', type: 'bytes32' }], outputs: [{ name: '', type: 'bool' }] },
] as const;
const authorizationUsedEvent = {
  type: 'event',
  name: 'AuthorizationUsed',
  inputs: [
    { name: 'authorizer', type: 'address', indexed: true },
    { name: 'nonce', type: 'bytes32', indexed: true },
  ],
} as const;
const nonceBitmapAbi = [
  { type: 'function', name: 'nonceBitmap', stateMutability: 'view', inputs: [{ name: 'owner', type: 'address' }, { name: 'wordPos', type: 'uint256' }], outputs: [{ name: '', type: 'uint256' }] },
] as const;
const transferEvent = {
  type: 'event',
  name: 'Transfer',
  inputs: [
    { name: 'from', type: 'address', indexed: true },
    { name: 'to', type: 'address', indexed: true },
    { name: 'value', type: 'uint256', indexed: false },
  ],
} as const;

const permitTuple = {
  name: 'permit',
  type: 'tuple',
  components: [
    { name: 'permitted', type: 'tuple', components: [{ name: 'token', type: 'address' }, { name: 'amount', type: 'uint256' }] },
    { name: 'nonce', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
  ],
} as const;
const witnessTuple = { name: 'witness', type: 'tuple', components: [{ name: 'to', type: 'address' }, { name: 'validAfter', type: 'uint256' }] } as const;
/** The exact-permit proxy's two settlement entry points: either runs the same Permit2 transfer for the same signed permit. */
const proxySettlementAbi = [
  { type: 'function', name: 'settle', stateMutability: 'nonpayable', inputs: [permitTuple, { name: 'owner', type: 'address' }, witnessTuple, { name: 'signature', type: 'bytes' }], outputs: [] },
  {
    type: 'function',
    name: 'settleWithPermit',
    stateMutability: 'nonpayable',
    inputs: [
      { name: 'permit2612', type: 'tuple', components: [{ name: 'value', type: 'uint256' }, { name: 'deadline', type: 'uint256' }, { name: 'r', type: 'bytes32' }, { name: 's', type: 'bytes32' }, { name: 'v', type: 'uint8' }] },
      permitTuple,
      { name: 'owner', type: 'address' },
      witnessTuple,
      { name: 'signature', type: 'bytes' },
    ],
    outputs: [],
  },
] as const;

/** The signed permit a proxy settlement call carries (whichever entry point), as one comparable string; else undefined. */
function signedPermitOf(data: Hex): string | undefined {
  try {
    const call = decodeFunctionData({ abi: proxySettlementAbi, data });
    const [permit, owner, witness, signature] = call.functionName === 'settle' ? call.args : [call.args[1], call.args[2], call.args[3], call.args[4]];
    return [permit.permitted.token, permit.permitted.amount, permit.nonce, permit.deadline, owner, witness.to, witness.validAfter, signature].join('|').toLowerCase();
  } catch {
    return undefined;
  }
}

const DEFAULT_CHUNK_BLOCKS = 500n;

/** The authorization a payment's settlement call consumes (`permit2`: the Permit2 contract of its chain). */
export function authorizationOf(request: VerifyRequest, call: SettlementCall, chain: { permit2: Address; multicall?: Address }): Authorization {
  const payload = request.paymentPayload.payload;
  const e = call.expect;
  if (isPermit2Payload(payload)) {
    const settlement = { to: call.to, data: call.data, ...(chain.multicall ? { multicall: chain.multicall } : {}) };
    return { scheme: 'permit2', permit2: chain.permit2, token: e.token, from: e.from, to: e.to, value: e.value, nonce: BigInt(payload.permit2Authorization.nonce), settlement };
  }
  return { scheme: 'eip3009', token: e.token, from: e.from, to: e.to, value: e.value, nonce: payload.authorization.nonce };
}

/** Whether `auth` was consumed, and by which transaction, read from the chain `client` reaches. */
export async function consumptionOf(client: ChainReader, auth: Authorization, search: ConsumptionSearch): Promise<Consumption> {
  return auth.scheme === 'eip3009' ? eip3009Consumption(client, auth, search) : permit2Consumption(client, auth, search);
}

async function eip3009Consumption(client: ChainReader, auth: Extract<Authorization, { scheme: 'eip3009' }>, search: ConsumptionSearch): Promise<Consumption> {
  const head = await client.getBlockNumber({ cacheTime: 0 });
  const used = await client.readContract({ address: auth.token, abi: authorizationStateAbi, functionName: 'authorizationState', args: [auth.from, auth.nonce], blockNumber: head });
  if (!used) return { consumed: false };
  for (const range of rangesBelow(head, search)) {
    const logs = await client.getLogs({ address: auth.token, event: authorizationUsedEvent, args: { authorizer: auth.from, nonce: auth.nonce }, ...range });
    for (const log of [...logs].reverse()) {
      if (!log.transactionHash || log.blockNumber === null) continue;
      const receipt = await client.getTransactionReceipt({ hash: log.transactionHash });
      if (receipt.status === 'success' && movedExactly(receipt.logs, auth)) return { consumed: true, transaction: log.transactionHash, blockNumber: log.blockNumber };
      return { consumed: true, why: `the authorization was used by ${log.transactionHash}, which did not move ${auth.value} from the payer to the payee` };
    }
  }
  return { consumed: true, why: `the authorization is used or cancelled, and no use of it in the last ${search.lookbackBlocks} blocks moved the amount to the payee` };
}

async function permit2Consumption(client: ChainReader, auth: Extract<Authorization, { scheme: 'permit2' }>, search: ConsumptionSearch): Promise<Consumption> {
  const bit = 1n << (auth.nonce & 0xffn);
  const head = await client.getBlockNumber({ cacheTime: 0 });
  const word = await client.readContract({ address: auth.permit2, abi: nonceBitmapAbi, functionName: 'nonceBitmap', args: [auth.from, auth.nonce >> 8n], blockNumber: head });
  if ((word & bit) === 0n) return { consumed: false };
  const seen = new Set<Hex>();
  for (const range of rangesBelow(head, search)) {
    const logs = await client.getLogs({ address: auth.token, event: transferEvent, args: { from: auth.from, to: auth.to }, ...range });
    for (const log of [...logs].reverse()) {
      if (log.args.value !== auth.value || !log.transactionHash || log.blockNumber === null || seen.has(log.transactionHash)) continue;
      seen.add(log.transactionHash);
      if (await ranOurCall(client, auth, log.transactionHash)) return { consumed: true, transaction: log.transactionHash, blockNumber: log.blockNumber };
    }
  }
  return { consumed: true, why: `the Permit2 nonce is used or invalidated, and no transaction in the last ${search.lookbackBlocks} blocks ran this settlement` };
}

/** The transaction ran exactly our settlement call, and that call succeeded with its own Transfer. */
async function ranOurCall(client: ChainReader, auth: Extract<Authorization, { scheme: 'permit2' }>, hash: Hex): Promise<boolean> {
  const s = auth.settlement;
  const [tx, receipt] = await Promise.all([client.getTransaction({ hash }), client.getTransactionReceipt({ hash })]);
  if (receipt.status !== 'success' || !tx.to) return false;
  const to = tx.to.toLowerCase();
  if (to === s.to.toLowerCase()) {
    const ours = signedPermitOf(s.data);
    return ours !== undefined && signedPermitOf(tx.input) === ours && movedExactly(receipt.logs, auth);
  }
  if (!s.multicall || to !== s.multicall.toLowerCase()) return false;
  let calls: ReturnType<typeof callsOfBatch>;
  try {
    calls = callsOfBatch(tx.input);
  } catch {
    return false;
  }
  const settled = settledCalls(receipt, calls);
  return calls.some((c, i) => settled[i] === true && c?.to.toLowerCase() === s.to.toLowerCase() && c.data.toLowerCase() === s.data.toLowerCase());
}

/** Block ranges from the head down, `lookbackBlocks` deep, newest first. */
function* rangesBelow(head: bigint, search: ConsumptionSearch): Generator<{ fromBlock: bigint; toBlock: bigint }> {
  const chunk = search.chunkBlocks && search.chunkBlocks > 0n ? search.chunkBlocks : DEFAULT_CHUNK_BLOCKS;
  const floor = head > search.lookbackBlocks ? head - search.lookbackBlocks : 0n;
  for (let to = head; to >= floor; ) {
    const from = to - chunk + 1n > floor ? to - chunk + 1n : floor;
    yield { fromBlock: from, toBlock: to };
    if (from === floor) return;
    to = from - 1n;
  }
}

/** The receipt's logs hold a Transfer of exactly the amount, of the token, from the payer to the payee. */
function movedExactly(logs: Parameters<typeof loggedTransfers>[0], auth: Authorization): boolean {
  const lc = (a: string) => a.toLowerCase();
  return loggedTransfers(logs).some((t) => lc(t.token) === lc(auth.token) && lc(t.from) === lc(auth.from) && lc(t.to) === lc(auth.to) && t.value === auth.value);
}
