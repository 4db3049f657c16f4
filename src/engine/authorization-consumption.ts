import type { Address, Chain, Hex, PublicClient, Transport } from 'viem';
import { isPermit2Payload, type VerifyRequest } from '../protocol/x402/types.ts';
import { callsOfBatch, loggedTransfers } from './settlement-batch.ts';
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
 * - Permit2: the nonce's bit in `nonceBitmap(owner, nonce >> 8)` says used; a Transfer of exactly the amount from
 *   the payer to the payee is the candidate, and it is the consuming transaction when the bit flipped in its block
 *   (and no `UnorderedNonceInvalidation` of the owner there covers the bit), or, on a node without that block's
 *   state, when its calldata makes exactly our settlement call (directly or inside an `aggregate3` batch).
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
      /** Our settlement call (to the exact-permit proxy): recognises the consuming transaction by its calldata. */
      settlement?: { to: Address; data: Hex };
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
const unorderedNonceInvalidationEvent = {
  type: 'event',
  name: 'UnorderedNonceInvalidation',
  inputs: [
    { name: 'owner', type: 'address', indexed: true },
    { name: 'word', type: 'uint256', indexed: false },
    { name: 'mask', type: 'uint256', indexed: false },
  ],
} as const;
const transferEvent = {
  type: 'event',
  name: 'Transfer',
  inputs: [
    { name: 'from', type: 'address', indexed: true },
    { name: 'to', type: 'address', indexed: true },
    { name: 'value', type: 'uint256', indexed: false },
  ],
} as const;

const DEFAULT_CHUNK_BLOCKS = 500n;

/** The authorization a payment's settlement call consumes (`permit2`: the Permit2 contract of its chain). */
export function authorizationOf(request: VerifyRequest, call: SettlementCall, permit2: Address): Authorization {
  const payload = request.paymentPayload.payload;
  const e = call.expect;
  if (isPermit2Payload(payload)) {
    return { scheme: 'permit2', permit2, token: e.token, from: e.from, to: e.to, value: e.value, nonce: BigInt(payload.permit2Authorization.nonce), settlement: { to: call.to, data: call.data } };
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
  const word = auth.nonce >> 8n;
  const bit = 1n << (auth.nonce & 0xffn);
  const bitmapAt = (blockNumber: bigint) => client.readContract({ address: auth.permit2, abi: nonceBitmapAbi, functionName: 'nonceBitmap', args: [auth.from, word], blockNumber });
  const head = await client.getBlockNumber({ cacheTime: 0 });
  if (((await bitmapAt(head)) & bit) === 0n) return { consumed: false };

  /** Whether the nonce's bit was set by a use (not a cancellation) in `blockNumber`; undefined without that block's state. */
  const usedIn = async (blockNumber: bigint): Promise<boolean | undefined> => {
    let before: bigint;
    let after: bigint;
    try {
      [before, after] = await Promise.all([bitmapAt(blockNumber - 1n), bitmapAt(blockNumber)]);
    } catch {
      return undefined;
    }
    if ((before & bit) !== 0n || (after & bit) === 0n) return false;
    const cancels = await client.getLogs({ address: auth.permit2, event: unorderedNonceInvalidationEvent, args: { owner: auth.from }, fromBlock: blockNumber, toBlock: blockNumber });
    return !cancels.some((c) => c.args.word === word && c.args.mask !== undefined && (c.args.mask & bit) !== 0n);
  };
  /** Whether the transaction makes exactly our settlement call, alone or in a batch. */
  const makesOurCall = async (hash: Hex): Promise<boolean> => {
    const s = auth.settlement;
    if (!s) return false;
    const tx = await client.getTransaction({ hash });
    const data = s.data.toLowerCase();
    if (tx.to?.toLowerCase() === s.to.toLowerCase() && tx.input.toLowerCase() === data) return true;
    try {
      return callsOfBatch(tx.input).some((c) => c?.to.toLowerCase() === s.to.toLowerCase() && c.data.toLowerCase() === data);
    } catch {
      return false;
    }
  };

  for (const range of rangesBelow(head, search)) {
    const logs = await client.getLogs({ address: auth.token, event: transferEvent, args: { from: auth.from, to: auth.to }, ...range });
    for (const log of [...logs].reverse()) {
      if (log.args.value !== auth.value || !log.transactionHash || log.blockNumber === null) continue;
      const used = await usedIn(log.blockNumber);
      if (used === true || (used === undefined && (await makesOurCall(log.transactionHash)))) {
        return { consumed: true, transaction: log.transactionHash, blockNumber: log.blockNumber };
      }
    }
  }
  return { consumed: true, why: `the Permit2 nonce is used or invalidated, and no use of it in the last ${search.lookbackBlocks} blocks moved the amount to the payee` };
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
