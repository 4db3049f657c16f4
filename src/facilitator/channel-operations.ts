/**
 * The receiver side's `batch-settlement` operations at the open facilitator's /settle: the official server's channel
 * manager sends its `claim`, `settle` and cooperative `refund` payloads here. Ours is an open door, and each of these
 * costs gas we pay, so a claim is relayed only when its batch is signed by every row's receiver authorizer (the
 * contract checks the same signature; without it we would pay for strangers' reverts), only when some row raises what
 * its channel has claimed, and only after it simulates as the relayer that would send it; a sweep only when the
 * receiver has claimed funds not yet swept; a refund only when signed by the channel's receiver authorizer for the
 * channel's current refund nonce, with something unclaimed to return. A reverting one costs one estimate and no gas.
 *
 * Each is held to the live price floor, as every payment we settle is: what it moves (a claim: the raise of its
 * channels' `totalClaimed`; a sweep: the claimed funds it sends; a refund: what it returns and claims), in the
 * network's stablecoin, must pay for the gas it will use, measured by its estimate and priced as the floor prices a
 * settlement (else the receiver of a channel of its own could have us send a claim per wei). A refund of everything
 * left in the channel is always taken, as at the gateway's refund desk. Dust is refused before the estimate: it could
 * not pay even for a transaction's 21,000 gas.
 *
 * Exactly once: each operation has a key (a claim: its calldata; a sweep: the receiver's claimed total it sweeps; a
 * refund: its channel's refund nonce),
 * claimed in the store with its record before anything is signed, the signed trail written before it is sent. The
 * same operation asked again, concurrently or after a crash, awaits that trail or answers its recorded outcome.
 * Relayers, nonces and the block watcher are the settlement engine's (one nonce manager per chain).
 */
import { randomUUID } from 'node:crypto';
import { decodeErrorResult, getAddress, keccak256, type Address, type Hex } from 'viem';
import { BATCH_SETTLEMENT_ADDRESS, chainIdOf } from '../chain/canonical.ts';
import { estimate, revertData } from '../channels/claim-steps.ts';
import type { Logger } from '../log/logger.ts';
import { describeFloor, type Floor, floorAtGas, type PriceFloorSource } from '../policy/price-floor.ts';
import type { SettleResponse, VerifyRequest } from '../protocol/x402/types.ts';
import { batchSettlementAbi } from '../schemes/batch-settlement/abi.ts';
import { channelIdOf } from '../schemes/batch-settlement/channel-config.ts';
import { BATCH_SETTLEMENT_SCHEME } from '../schemes/batch-settlement/domain.ts';
import { channelStateOf, readChannel } from '../schemes/batch-settlement/channel-reads.ts';
import { refundableAmount } from '../schemes/batch-settlement/refund.ts';
import {
  checkClaimSigner,
  checkRefundSigners,
  claimRaise,
  operationCallData,
  parseReceiverOperation,
  receiverOperationType,
  type ReceiverOperation,
} from '../schemes/batch-settlement/receiver-operations.ts';
import type { DurableCollection } from '../store/durable-collection.ts';
import type { NonceClaims } from '../store/nonce-claims.ts';
import { awaitMined, sendDurably } from '../tx/courier.ts';
import { courierOver, type SendingChain } from '../tx/sending-chain.ts';
import type { SignedTx } from '../tx/trail.ts';
import { BatchReason, type BatchReasonCode } from '../verify/batch-settlement-reasons.ts';
import { GatewayReason } from '../verify/reasons.ts';

/** The durable record of one operation: its call, its signed trail, and its outcome once mined. */
export interface OperationRecord {
  network: string;
  data: Hex;
  txs: SignedTx[];
  /** Ms since the epoch the operation was claimed. */
  at: number;
  outcome?: SettleResponse;
}

export interface ChannelOperationParts {
  /** The engine's sending parts of a chain; undefined where it sends nothing. */
  chain(caip2: string): SendingChain | undefined;
  records: DurableCollection<OperationRecord>;
  claims: NonceClaims;
  /** How long a /settle waits for the transaction to mine before answering it pending (asked again, it waits on). */
  confirmMs: number;
  log: Logger;
  /** The live price floor (the engine's): what an operation moves must pay for its gas. Without: no floor, as for payments. */
  floor?: PriceFloorSource;
  /** The token a network's floor is counted in (its stablecoin); what moves in any other token counts as nothing. */
  floorToken(caip2: string): Address | undefined;
  now?: () => number;
}

/** The answer's reason while the transaction is in flight (the engine's, for deposits and payments alike). */
const PENDING = 'settlement_pending';

/** A claimed operation whose holder signed nothing for this long is taken over (it died before sending). */
const STALE_UNSENT_MS = 60_000;

/** The least gas any transaction uses: an operation that moves less than the floor at this is refused unestimated. */
const INTRINSIC_GAS = 21_000n;

/** What an operation moves, in the floor's token (smallest units); `whole`: a refund of everything left in the channel. */
interface Worth {
  moved: bigint;
  whole: boolean;
}

/**
 * An operation ready to send: its key, call, what it moves and the floor it must reach (undefined: none), and what
 * its answer adds once mined (a refund: the amount and the channel's state). One asked again after it was sent
 * carries no worth: it is resumed, not judged again.
 */
interface Prepared {
  key: string;
  data: Hex;
  op: ReceiverOperation;
  worth?: Worth;
  floor?: Floor;
  details?: () => Promise<Partial<SettleResponse>>;
}

export interface ChannelOperations {
  /** Whether a decoded /settle body is a receiver-side operation (then {@link settle} answers it). */
  handles(body: unknown): body is VerifyRequest;
  settle(request: VerifyRequest): Promise<SettleResponse>;
}

export function channelOperations(parts: ChannelOperationParts): ChannelOperations {
  const now = parts.now ?? Date.now;
  const me = `facilitator-${randomUUID()}`;
  /** Operations this process is carrying, by key: a second ask joins the first. */
  const carrying = new Map<string, Promise<SettleResponse>>();

  const refusal = (network: string, code: BatchReasonCode | string, message: string): SettleResponse => ({
    success: false,
    errorReason: code,
    errorMessage: message,
    transaction: '',
    network: network as SettleResponse['network'],
  });

  /** The operation's key and call, or a refusal: the checks that cost no gas, the chain reads that say it does something. */
  async function prepare(request: VerifyRequest): Promise<Prepared | SettleResponse> {
    const requirements = request.paymentRequirements;
    const network = String(requirements?.network ?? '');
    if ((requirements?.scheme as string | undefined) !== BATCH_SETTLEMENT_SCHEME) return refusal(network, BatchReason.scheme, 'requirements.scheme must be batch-settlement');
    if (request.paymentPayload?.accepted?.network !== network) return refusal(network, BatchReason.networkMismatch, 'the payload names another network than the requirements');
    const chain = parts.chain(network);
    if (!chain) return refusal(network, BatchReason.networkMismatch, `this facilitator sends nothing on ${network}`);
    const parsed = parseReceiverOperation(request.paymentPayload.payload);
    if (!parsed.ok) return refusal(network, parsed.error.code, parsed.error.message);
    const op = parsed.value;
    const chainId = chainIdOf(network);
    const at = { address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi } as const;
    const data = operationCallData(op);
    if (op.type === 'claim') {
      const signer = await checkClaimSigner(op, chainId);
      if (!signer.ok) return refusal(network, signer.error.code, signer.error.message);
      const key = `claim:${network}:${keccak256(data)}`;
      // Asked again once done: its recorded answer (before the chain says it would change nothing now).
      const held = await heldAnswer(key, data, op);
      if (held) return held;
      const ids = op.rows.map((row) => channelIdOf(row.config, chainId));
      // Each channel read once, however many rows name it.
      const claimed = new Map(await Promise.all([...new Set(ids)].map(async (id) => [id, (await chain.client.readContract({ ...at, functionName: 'channels', args: [id] }))[1]] as const)));
      if (!op.rows.some((row, i) => row.totalClaimed > (claimed.get(ids[i] as Hex) ?? 0n))) {
        return refusal(network, BatchReason.claimPayload, "no row raises its channel's totalClaimed: the claim would change nothing");
      }
      const token = parts.floorToken(network);
      return worthIt(network, { key, data, op }, { moved: token ? claimRaise(op.rows, ids, claimed, token) : 0n, whole: false });
    }
    if (op.type === 'refund') {
      const signed = await checkRefundSigners(op, chainId);
      if (!signed.ok) return refusal(network, signed.error.code, signed.error.message);
      const channelId = channelIdOf(op.config, chainId);
      // The contract's refund nonce makes each refund one: the same nonce asked again is the same refund.
      const key = `refund:${network}:${channelId}:${op.nonce}`;
      const held = await heldAnswer(key, data, op);
      if (held) return held;
      const before = await readChannel(chain.client, channelId);
      if (before.refundNonce !== op.nonce) return refusal(network, BatchReason.refundPayload, `the channel's refund nonce is ${before.refundNonce}, the refund is signed for ${op.nonce}`);
      let claimedAfter = before.totalClaimed;
      for (const row of op.claim?.rows ?? []) if (row.totalClaimed > claimedAfter) claimedAfter = row.totalClaimed;
      const refunded = refundableAmount(before.balance, claimedAfter, op.amount);
      if (refunded === 0n) return refusal(network, BatchReason.refundNoBalance, 'the channel holds nothing unclaimed to refund');
      const details = async (): Promise<Partial<SettleResponse>> => {
        const after = await readChannel(chain.client, channelId);
        return { payer: op.config.payer, amount: (before.balance - after.balance).toString(), extra: { channelState: channelStateOf(channelId, after) } };
      };
      // What it returns and what its claim rows raise; everything left in the channel is always returned.
      const moved = ofFloorToken(network, op.config.token) ? claimedAfter - before.totalClaimed + refunded : 0n;
      return worthIt(network, { key, data, op, details }, { moved, whole: refunded === before.balance - claimedAfter });
    }
    const [totalClaimed, totalSettled] = await chain.client.readContract({ ...at, functionName: 'receivers', args: [op.receiver, op.token] });
    // One sweep per claimed total: asked again before another claim, it is the same sweep.
    const key = `settle:${network}:${op.receiver.toLowerCase()}:${op.token.toLowerCase()}:${totalClaimed}`;
    const held = await heldAnswer(key, data, op);
    if (held) return held;
    if (totalClaimed === totalSettled) return refusal(network, BatchReason.nothingToSettle, `${op.receiver} has nothing claimed and unsettled in ${op.token}`);
    return worthIt(network, { key, data, op }, { moved: ofFloorToken(network, op.token) ? totalClaimed - totalSettled : 0n, whole: false });
  }

  const ofFloorToken = (network: string, token: Address): boolean => {
    const counted = parts.floorToken(network);
    return counted !== undefined && getAddress(counted) === getAddress(token);
  };

  /** The operation with what it moves and the floor it must reach, or its refusal when it could not pay even a transaction's least gas. */
  async function worthIt(network: string, prepared: Prepared, worth: Worth): Promise<Prepared | SettleResponse> {
    const floor = worth.whole ? undefined : await parts.floor?.floorOn(network).catch(() => undefined);
    const judged: Prepared = { ...prepared, worth, ...(floor ? { floor } : {}) };
    return belowFloor(judged, INTRINSIC_GAS) ?? judged;
  }

  /** The refusal of an operation that moves less than the floor for `gas` (a whole refund never is); undefined when it pays for it. */
  function belowFloor({ op, worth, floor }: Prepared, gas: bigint): SettleResponse | undefined {
    if (!floor || !worth || worth.whole) return undefined;
    const atGas = floorAtGas(floor, gas);
    if (worth.moved >= atGas.atoms) return undefined;
    parts.floor?.refused?.(floor.network);
    const counted = gas === INTRINSIC_GAS ? "at a transaction's least gas" : 'at the gas its simulation used';
    return refusal(
      floor.network,
      GatewayReason.belowPriceFloor,
      `the ${op.type} moves ${worth.moved} (smallest units of the network's stablecoin), less than its gas costs: ${describeFloor(atGas)}, ${counted}; nothing was sent`,
    );
  }

  /**
   * An operation already recorded: its outcome, or (sent, not yet answered) the operation to resume, before the chain
   * is asked whether it would still do something (once it mined, it would not).
   */
  async function heldAnswer(key: string, data: Hex, op: ReceiverOperation): Promise<SettleResponse | Prepared | undefined> {
    const record = await parts.records.get(key);
    if (record?.outcome) return record.outcome;
    return record && record.txs.length > 0 ? { key, data, op } : undefined;
  }

  /** Why a call reverts, by the contract's error name when it gives one. */
  const revertName = (error: unknown): string => {
    const data = revertData(error);
    if (data) {
      try {
        return decodeErrorResult({ abi: batchSettlementAbi, data }).errorName;
      } catch {}
    }
    return 'reverted';
  };

  /** Sends (or resumes) the operation under `key` and awaits its receipt for at most `confirmMs`. */
  async function carry(prepared: Prepared, network: string): Promise<SettleResponse> {
    const { key, data, op, details } = prepared;
    const chain = parts.chain(network) as SendingChain;
    const courier = courierOver(chain, parts.log.child({ network, part: 'channel-operations' }));
    const failed = { claim: BatchReason.claimPayload, settle: BatchReason.settlePayload, refund: BatchReason.refundSimulationFailed }[op.type];
    let record = await parts.records.get(key);
    if (record?.outcome) return record.outcome;
    if (!record || record.txs.length === 0) {
      // Judged when it was prepared; one prepared to be resumed whose record has gone since is judged afresh when asked again.
      if (!prepared.worth) return { ...refusal(network, PENDING, `this ${op.type} is being sent; ask again`), status: 'pending' };
      const sender = await chain.relayers.nextSender();
      const simulated = await estimate(chain, data, sender);
      if (!simulated.ok) return refusal(network, failed, `the ${op.type} would revert (${revertName(simulated.error)}); nothing was sent`);
      const dust = belowFloor(prepared, simulated.gas);
      if (dust) return dust;
      const fresh: OperationRecord = { network, data, txs: [], at: now() };
      const won = await parts.claims.claim(key, me, () => parts.records.putWithin(key, fresh));
      if (!won.claimed) {
        const held = await parts.records.get(key);
        if (held?.outcome) return held.outcome;
        const stale = held !== undefined && held.txs.length === 0 && now() - held.at > STALE_UNSENT_MS;
        if (!stale || !(await parts.claims.takeover(key, won.holder, me, () => parts.records.putWithin(key, fresh)))) {
          if (held && held.txs.length > 0) return awaitOutcome(key, held, courier, op, details);
          return { ...refusal(network, PENDING, `this ${op.type} is being sent; ask again`), status: 'pending' };
        }
      }
      record = fresh;
      const persist = async (txs: SignedTx[]) => {
        record = { ...(record as OperationRecord), txs };
        await parts.records.put(key, record);
      };
      const sent = await sendDurably(courier, { to: BATCH_SETTLEMENT_ADDRESS, data, gas: (simulated.gas * 13n) / 10n + 20_000n }, [], persist);
      if (!sent.ok) {
        // Nothing reached the chain: the claim is given up so the same operation may be asked again.
        await parts.claims.release(key, me);
        await parts.records.remove(key);
        return refusal(network, failed, `the ${op.type} could not be sent: ${sent.error.message}`);
      }
      record = { ...record, txs: sent.value };
    }
    return awaitOutcome(key, record, courier, op, details);
  }

  async function awaitOutcome(key: string, record: OperationRecord, courier: ReturnType<typeof courierOver>, op: ReceiverOperation, details?: Prepared['details']): Promise<SettleResponse> {
    const network = record.network as SettleResponse['network'];
    let current = record;
    const persist = async (txs: SignedTx[]) => {
      current = { ...current, txs };
      await parts.records.put(key, current);
    };
    let mined: Awaited<ReturnType<typeof awaitMined>>;
    try {
      mined = await awaitMined(courier, record.txs, persist, AbortSignal.timeout(parts.confirmMs));
    } catch {
      const hash = (current.txs.at(-1) as SignedTx).hash;
      return { success: false, errorReason: PENDING, errorMessage: `the ${op.type} is sent and not yet mined; ask again`, transaction: hash, network, status: 'pending' };
    }
    const hash = mined.receipt.transactionHash;
    const reverted = { claim: BatchReason.claimPayload, settle: BatchReason.settlePayload, refund: BatchReason.refundTransactionFailed }[op.type];
    const outcome: SettleResponse =
      mined.receipt.status === 'success'
        ? { success: true, transaction: hash, network, ...(op.type === 'settle' ? { payer: op.receiver } : {}), ...(details ? await details().catch(() => ({})) : {}) }
        : { success: false, errorReason: reverted, errorMessage: `the ${op.type} reverted on chain`, transaction: hash, network };
    await parts.records.put(key, { ...current, txs: mined.txs, outcome });
    return outcome;
  }

  return {
    handles(body): body is VerifyRequest {
      const request = body as Partial<VerifyRequest> | null;
      return (request?.paymentRequirements?.scheme as string | undefined) === BATCH_SETTLEMENT_SCHEME && receiverOperationType(request?.paymentPayload?.payload) !== undefined;
    },
    async settle(request) {
      const prepared = await prepare(request);
      if (!('key' in prepared)) return prepared;
      const key = prepared.key;
      const joined = carrying.get(key);
      if (joined) return joined;
      const carried = carry(prepared, request.paymentRequirements.network).finally(() => carrying.delete(key));
      carrying.set(key, carried);
      return carried;
    },
  };
}
