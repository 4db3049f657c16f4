/**
 * The I/O of a claim actor (`claim-machine.ts`), each step a function of the chain's parts it is given: the claim
 * simulated as the relayer that will send it (a row that would revert dropped alone, named by the contract's custom
 * error), signed and sent through the courier with its trail written first, its receipt awaited, the channel records
 * moved to their new claimed totals, and the sweep to the merchants sent the same way. Relayers are the engine's:
 * one nonce manager per chain for settlements, claims and sweeps alike.
 */
import { decodeErrorResult, encodeFunctionData, type Address, type Chain, type Hex, type LocalAccount, type PublicClient, type Transport } from 'viem';
import { BATCH_SETTLEMENT_ADDRESS } from '../chain/canonical.ts';
import { batchSettlementAbi } from '../schemes/batch-settlement/abi.ts';
import { claimBatchTypedData, voucherClaimArgs, type VoucherClaim } from '../schemes/batch-settlement/claim-batch.ts';
import { awaitMined, sendDurably, type Courier, type Persist } from '../tx/courier.ts';
import type { SignedTx } from '../tx/trail.ts';
import type { ChannelLedger } from './channel-ledger.ts';
import { withClaimed } from './channel-record.ts';
import { sweepTargets, type ClaimRecord, type ClaimRow, type MinedTx, type SimulatedClaim } from './claim-machine.ts';

/** What a claim needs of its chain: the courier (the engine's relayers, block watcher, reorg guard) and who signs. */
export interface ClaimChain {
  network: string;
  chainId: number;
  courier: Courier;
  /** The receiver authorizer: signs each claim's `ClaimBatch`, so any relayer may send it. */
  authorizer: LocalAccount;
}

/** Custom errors of the settlement contract that name the channel at fault (first argument) or its row. */
const BY_CHANNEL = ['InvalidVoucherSignature', 'ClaimAboveVoucher', 'ClaimAboveBalance'] as const;
const BY_ROW = ['NotReceiverSide', 'MixedReceiverAuthorizers'] as const;
/** Why a row is dropped from a claim: the contract's error naming it, or `reverted` (it reverts alone, unnamed). */
export const DROP_REASONS: readonly string[] = [...BY_CHANNEL, ...BY_ROW, 'reverted'];
const byChannel = new Set<string>(BY_CHANNEL);
const byRow = new Set<string>(BY_ROW);

const voucherClaimOf = (row: ClaimRow): VoucherClaim => ({ config: row.config, maxClaimableAmount: BigInt(row.maxClaimableAmount), signature: row.signature, totalClaimed: BigInt(row.totalClaimed) });

/** The `claimWithSignature` call of `rows`. */
export function claimCallData(rows: readonly ClaimRow[], authorizerSignature: Hex): Hex {
  return encodeFunctionData({ abi: batchSettlementAbi, functionName: 'claimWithSignature', args: [voucherClaimArgs(rows.map(voucherClaimOf)), authorizerSignature] });
}

/** The sweep of the receivers and tokens `rows` credit: one `settle`, or several in the contract's `multicall`. */
export function sweepCallData(rows: readonly ClaimRow[]): Hex {
  const calls = sweepTargets(rows).map((t) => encodeFunctionData({ abi: batchSettlementAbi, functionName: 'settle', args: [t.receiver, t.token] }));
  if (calls.length === 1) return calls[0] as Hex;
  return encodeFunctionData({ abi: batchSettlementAbi, functionName: 'multicall', args: [calls] });
}

/** The revert data a node returned with a failed estimate, wherever the client's error wraps it. */
export function revertData(error: unknown): Hex | undefined {
  for (let e: unknown = error, depth = 0; e && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    const data = (e as { data?: unknown }).data;
    if (typeof data === 'string' && data.startsWith('0x') && data.length >= 10) return data as Hex;
    const inner = typeof data === 'object' && data !== null ? (data as { data?: unknown }).data : undefined;
    if (typeof inner === 'string' && inner.startsWith('0x') && inner.length >= 10) return inner as Hex;
  }
  return undefined;
}

/** Which row a revert names, and the error's name; undefined when it names none. */
export function culpritOf(error: unknown, rows: readonly ClaimRow[]): { index: number; reason: string } | undefined {
  const data = revertData(error);
  if (!data) return undefined;
  let decoded: { errorName: string; args?: readonly unknown[] };
  try {
    decoded = decodeErrorResult({ abi: batchSettlementAbi, data });
  } catch {
    return undefined;
  }
  const first = decoded.args?.[0];
  if (byChannel.has(decoded.errorName) && typeof first === 'string') {
    const index = rows.findIndex((r) => r.channelId.toLowerCase() === first.toLowerCase());
    return index === -1 ? undefined : { index, reason: decoded.errorName };
  }
  if (byRow.has(decoded.errorName) && typeof first === 'bigint' && first < BigInt(rows.length)) return { index: Number(first), reason: decoded.errorName };
  return undefined;
}

export type Estimate = { ok: true; gas: bigint } | { ok: false; error: unknown };

/** Who a claim or sweep is simulated as: the relayer that would send it, with the fees it would sign. */
export interface SimulationSender {
  from: Address;
  maxFeePerGas?: bigint;
  maxPriorityFeePerGas?: bigint;
}

/** What a claim's simulation needs of its chain: no relayer, nothing is sent. */
export interface SimulationChain {
  chainId: number;
  client: PublicClient<Transport, Chain>;
  authorizer: LocalAccount;
}

/** A call to the settlement contract estimated as `sender` would send it (a revert is an answer, not a throw). */
export async function estimate(chain: Pick<SimulationChain, 'client'>, data: Hex, sender: SimulationSender): Promise<Estimate> {
  try {
    const gas = await chain.client.estimateGas({
      account: sender.from,
      to: BATCH_SETTLEMENT_ADDRESS,
      data,
      ...(sender.maxFeePerGas !== undefined ? { maxFeePerGas: sender.maxFeePerGas, maxPriorityFeePerGas: sender.maxPriorityFeePerGas ?? 0n } : {}),
    });
    return { ok: true, gas };
  } catch (error) {
    return { ok: false, error };
  }
}

const sign = (chain: Pick<SimulationChain, 'chainId' | 'authorizer'>, rows: readonly ClaimRow[]) => chain.authorizer.signTypedData(claimBatchTypedData(rows.map(voucherClaimOf), chain.chainId));

/**
 * The claim simulated as the relayer that will send it, with the fees it will sign. A revert naming a row (by its
 * channel or index) drops that row alone and the rest are simulated again; a revert naming none has each row
 * simulated alone, and those that revert alone are dropped. A node that cannot be asked throws (nothing is signed).
 */
export async function simulateClaim(chain: SimulationChain, rows: readonly ClaimRow[], sender: SimulationSender): Promise<SimulatedClaim> {
  let kept = [...rows];
  const dropped: SimulatedClaim['dropped'] = [];
  for (let round = 0; round <= rows.length && kept.length > 0; round++) {
    const authorizerSignature = await sign(chain, kept);
    const whole = await estimate(chain, claimCallData(kept, authorizerSignature), sender);
    if (whole.ok) return { rows: kept, dropped, gas: whole.gas, authorizerSignature };
    const culprit = culpritOf(whole.error, kept);
    if (culprit) {
      dropped.push({ channelId: (kept[culprit.index] as ClaimRow).channelId, reason: culprit.reason });
      kept = kept.filter((_, i) => i !== culprit.index);
      continue;
    }
    if (revertData(whole.error) === undefined && !/revert/i.test(String((whole.error as Error)?.message))) throw whole.error;
    const alone = await Promise.all(kept.map(async (row) => estimate(chain, claimCallData([row], await sign(chain, [row])), sender)));
    const passing = kept.filter((_, i) => alone[i]?.ok === true);
    if (passing.length === kept.length) throw new Error(`the claim reverts as a whole though each of its ${kept.length} rows passes alone`);
    for (const [i, row] of kept.entries())
      if (alone[i]?.ok !== true) dropped.push({ channelId: row.channelId, reason: culpritOf((alone[i] as { error: unknown }).error, [row])?.reason ?? 'reverted' });
    kept = passing;
  }
  return { rows: [], dropped, gas: 0n, authorizerSignature: '0x' };
}

/** A claim chain as its simulation sees it. */
export const simulationOf = (chain: ClaimChain): SimulationChain => ({ chainId: chain.chainId, client: chain.courier.client, authorizer: chain.authorizer });

/** Signs the claim, has its trail written by the machine (`persist`), and only then sends it. */
export async function sendClaim(chain: ClaimChain, record: ClaimRecord, gas: bigint, authorizerSignature: Hex, persist: Persist): Promise<SignedTx[]> {
  const call = { to: BATCH_SETTLEMENT_ADDRESS, data: claimCallData(record.rows, authorizerSignature), gas: (gas * 13n) / 10n + 20_000n };
  const sent = await sendDurably(chain.courier, call, record.txs, persist);
  if (!sent.ok) throw new Error(sent.error.message);
  return sent.value;
}

/** The sweep simulated and sent like the claim (its own trail); a sweep the chain would revert is not sent. */
export async function sendSweep(chain: ClaimChain, record: ClaimRecord, sender: SimulationSender, persist: Persist): Promise<SignedTx[]> {
  const data = sweepCallData(record.rows);
  const simulated = await estimate(simulationOf(chain), data, sender);
  if (!simulated.ok) throw new Error(`the sweep would revert: ${String((simulated.error as Error)?.message ?? simulated.error)}`);
  const sent = await sendDurably(chain.courier, { to: BATCH_SETTLEMENT_ADDRESS, data, gas: (simulated.gas * 13n) / 10n + 10_000n }, record.sweepTxs, persist);
  if (!sent.ok) throw new Error(sent.error.message);
  return sent.value;
}

/** A trail carried to its receipt (replaced meanwhile if priced out, each version written first). */
export async function confirmed(chain: ClaimChain, txs: SignedTx[], persist: Persist, signal: AbortSignal): Promise<MinedTx> {
  const mined = await awaitMined(chain.courier, txs, persist, signal);
  return { hash: mined.receipt.transactionHash, success: mined.receipt.status === 'success', txs: mined.txs };
}

/** How many times a record moved under the claimer is read again before the step gives up (the restart redoes it). */
const MAX_RACES = 16;

/** Each row's channel record learns its claimed total (never lowered; a record already there is left alone). */
export async function recordClaimed(ledger: ChannelLedger, rows: readonly ClaimRow[], now: () => number): Promise<void> {
  for (const row of rows) {
    let done = false;
    for (let race = 0; race < MAX_RACES && !done; race++) {
      const held = await ledger.read(row.channelId);
      if (!held) break;
      const next = withClaimed(held.record, BigInt(row.totalClaimed), now());
      done = next === held.record || (await ledger.replace(held, next)) !== undefined;
    }
    if (!done) throw new Error(`channel ${row.channelId}: its record kept moving while the claim was recorded`);
  }
}
