import type { Hex } from 'viem';
import type { DurableCollection } from '../store/durable-collection.ts';
import type { NonceClaims } from '../store/nonce-claims.ts';
import type { Store } from '../store/store.ts';
import { unchargedText } from '../protocol/result.ts';
import { GatewayReason, type InvalidReason } from '../verify/reasons.ts';

/**
 * Who pays for a settlement that reverts on chain after it passed simulation: nobody but our relayers. An EOA cannot
 * make its own settlement revert without spending as much gas as we do (it must send a transaction first); a payer
 * contract (ERC-1271) can, for free, because its code can always tell a simulation from a mined transaction. So:
 *
 * - a payer whose settlement reverted on chain is refused for `banMs`, and so is every payer whose code (keccak of
 *   its runtime code) is the same;
 * - the gas burnt by reverted settlements in the last hour is bounded per payer, per code and in total: past a bound,
 *   contract payers are refused until the window has moved on;
 * - a contract payer whose code has never settled here settles one payment at a time (per code, across a cluster):
 *   the others are refused before anything is sent, so that any number of contracts of one code cost at most one
 *   reverted transaction (two, should one be mined just as another node's ban is written).
 *
 * The judgement is pure ({@link judgeContractPayer}); {@link RevertBudget} keeps its inputs in the Store, so that
 * they survive a restart and every process of a cluster sees the same.
 */

export interface RevertBudgetLimits {
  /** How long a payer, and its code, stay refused after one of its settlements reverted on chain. */
  banMs: number;
  /** Gas burnt by reverted settlements in the last hour past which a payer is refused. */
  gasPerPayerHour: bigint;
  /** Likewise per code hash. */
  gasPerCodeHour: bigint;
  /** Likewise in total: every contract payer is refused past it, until the hour moves on. */
  gasTotalHour: bigint;
  /** How long one payment of an unproven code holds the code's turn at most (a crash before it ended). */
  trialLeaseMs: number;
}

/** Seven days of refusal; one reverted settlement per payer, two per code and 40 in total (about 37k gas each) per hour. */
export const DEFAULT_REVERT_BUDGET: RevertBudgetLimits = {
  banMs: 7 * 24 * 3600_000,
  gasPerPayerHour: 100_000n,
  gasPerCodeHour: 150_000n,
  gasTotalHour: 1_500_000n,
  trialLeaseMs: 10 * 60_000,
};

export const HOUR_MS = 3600_000;

/** One settlement (or one call of a batch) that reverted on chain after it passed simulation. */
export interface RevertEvent {
  at: number;
  network: string;
  payer: string;
  /** keccak of the payer's runtime code (absent: an EOA). */
  codeHash?: string;
  /** Gas burnt (a batch member: its share of the batch's gas). */
  gas: string;
  tx: string;
}

/** A refusal in force until `until` (ms since the epoch), because of the reverted transaction `tx`. */
export interface Ban {
  until: number;
  tx: string;
  network: string;
}

/** Why a contract payer is refused; each has a metric label. */
export type RefusalKind = 'payer_banned' | 'code_banned' | 'payer_gas' | 'code_gas' | 'total_gas' | 'code_busy';
export const REFUSAL_KINDS: readonly RefusalKind[] = ['payer_banned', 'code_banned', 'payer_gas', 'code_gas', 'total_gas', 'code_busy'];

export type Judgement =
  /** `trial`: the code has never settled here, so this payment must hold the code's turn (one at a time). */
  { ok: true; trial: boolean } | { ok: false; kind: RefusalKind; reason: InvalidReason; message: string; retryAfterSeconds: number };

export interface JudgeInput {
  payer: string;
  codeHash: string;
  payerBan?: Ban | undefined;
  codeBan?: Ban | undefined;
  /** Reverted settlements, at least every one of the last hour (older ones are ignored). */
  recent: readonly RevertEvent[];
  /** The code has settled a payment here before. */
  codeProven: boolean;
  now: number;
  limits: RevertBudgetLimits;
}

const seconds = (ms: number): number => Math.max(1, Math.ceil(ms / 1000));

/** Whether a contract payer may settle now, from what is known of reverted settlements. Pure. */
export function judgeContractPayer(input: JudgeInput): Judgement {
  const { now, limits } = input;
  if (input.payerBan && input.payerBan.until > now) {
    return refuse(
      'payer_banned',
      GatewayReason.payerReverted,
      unchargedText(`a settlement from this payer reverted on chain after it passed simulation (${input.payerBan.tx}): refused until ${iso(input.payerBan.until)}`),
      input.payerBan.until - now,
    );
  }
  if (input.codeBan && input.codeBan.until > now) {
    return refuse(
      'code_banned',
      GatewayReason.payerReverted,
      unchargedText(`a settlement from a contract with this payer's code reverted on chain after it passed simulation (${input.codeBan.tx}): refused until ${iso(input.codeBan.until)}`),
      input.codeBan.until - now,
    );
  }
  const since = now - HOUR_MS;
  let total = 0n;
  let byPayer = 0n;
  let byCode = 0n;
  let oldest = now;
  const payer = input.payer.toLowerCase();
  for (const e of input.recent) {
    if (e.at <= since) continue;
    const gas = BigInt(e.gas);
    total += gas;
    if (e.payer.toLowerCase() === payer) byPayer += gas;
    if (e.codeHash === input.codeHash) byCode += gas;
    if (e.at < oldest) oldest = e.at;
  }
  // Past a bound, the refusal lasts until the oldest revert counted leaves the hour (an upper bound of the wait).
  const wait = oldest + HOUR_MS - now;
  if (total >= limits.gasTotalHour)
    return refuse('total_gas', GatewayReason.revertBudgetSpent, unchargedText(`reverted settlements burnt ${total} gas in the last hour, the most allowed: contract payers are refused for now`), wait);
  if (byPayer >= limits.gasPerPayerHour)
    return refuse('payer_gas', GatewayReason.revertBudgetSpent, unchargedText(`this payer's reverted settlements burnt ${byPayer} gas in the last hour, the most allowed`), wait);
  if (byCode >= limits.gasPerCodeHour)
    return refuse('code_gas', GatewayReason.revertBudgetSpent, unchargedText(`reverted settlements of contracts with this payer's code burnt ${byCode} gas in the last hour, the most allowed`), wait);
  return { ok: true, trial: !input.codeProven };
}

function refuse(kind: RefusalKind, reason: InvalidReason, message: string, waitMs: number): Judgement {
  return { ok: false, kind, reason, message, retryAfterSeconds: seconds(waitMs) };
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** The holder of a code's turn names the payment and when its hold lapses: `id|attempt|expiresAtMs`. */
export function trialHolder(id: string, attempt: string, expiresAt: number): string {
  return `${id}|${attempt}|${expiresAt}`;
}

/** When a holder's hold lapses (0 for a holder written otherwise: lapsed). */
export function trialExpiry(holder: string): number {
  const at = Number(holder.slice(holder.lastIndexOf('|') + 1));
  return Number.isFinite(at) ? at : 0;
}

type Entry = RevertEvent | Ban | { at: number; tx: string };

/** What the budget tells the outside (metrics). */
export interface RevertBudgetObserver {
  reverted(network: string, gas: bigint): void;
  refused(kind: RefusalKind): void;
}

/** The revert budget over a Store: bans, proven codes and reverted settlements, shared by every process using it. */
export class RevertBudget {
  readonly limits: RevertBudgetLimits;
  readonly #records: DurableCollection<Entry>;
  readonly #turns: NonceClaims;
  readonly #clock: () => number;
  readonly #observer: RevertBudgetObserver | undefined;
  /** Codes proven by a settlement (a proof is never withdrawn): bounded, a miss only costs a read. */
  readonly #proven = new Set<string>();

  constructor(opts: { store: Store; limits?: RevertBudgetLimits; clock?: () => number; observer?: RevertBudgetObserver }) {
    this.limits = opts.limits ?? DEFAULT_REVERT_BUDGET;
    this.#records = opts.store.collection<Entry>('revert-budget');
    this.#turns = opts.store.claims('contract-code-turns');
    this.#clock = opts.clock ?? Date.now;
    this.#observer = opts.observer;
  }

  /** Bans and hourly budgets, without taking a turn (what /verify answers). */
  async judge(payer: string, codeHash: Hex): Promise<Judgement> {
    const now = this.#clock();
    const [payerBan, codeBan, codeProven, recent] = await Promise.all([
      this.#records.get(`ban|payer|${payer.toLowerCase()}`) as Promise<Ban | undefined>,
      this.#records.get(`ban|code|${codeHash}`) as Promise<Ban | undefined>,
      this.#isProven(codeHash),
      this.#recent(now),
    ]);
    const judged = judgeContractPayer({ payer, codeHash, payerBan, codeBan, recent, codeProven, now, limits: this.limits });
    if (!judged.ok) this.#observer?.refused(judged.kind);
    return judged;
  }

  /**
   * Whether a contract payer's payment may go on to settle; for an unproven code, it takes the code's turn (released
   * with {@link release} once the payment ended), or is refused while another payment holds it.
   */
  async admit(payer: string, codeHash: Hex, payment: { id: string; attempt: string }): Promise<{ ok: true; turn?: string } | Extract<Judgement, { ok: false }>> {
    const judged = await this.judge(payer, codeHash);
    if (!judged.ok) return judged;
    if (!judged.trial) return { ok: true };
    const now = this.#clock();
    const holder = trialHolder(payment.id, payment.attempt, now + this.limits.trialLeaseMs);
    const claim = await this.#turns.claim(codeHash, holder);
    if (claim.claimed) return { ok: true, turn: holder };
    if (trialExpiry(claim.holder) <= now && (await this.#turns.takeover(codeHash, claim.holder, holder))) return { ok: true, turn: holder };
    this.#observer?.refused('code_busy');
    return {
      ok: false,
      kind: 'code_busy',
      reason: GatewayReason.contractPayerWaits,
      message: `${unchargedText('a contract with this code has never settled here, and another payment of such a contract is being settled: one at a time until one settles')}, send it again later`,
      retryAfterSeconds: 5,
    };
  }

  /** The payment that held a code's turn ended. */
  async release(codeHash: string, turn: string): Promise<void> {
    await this.#turns.release(codeHash, turn);
  }

  /** A contract payer's settlement succeeded: its code is proven, its payments no longer wait their turn. */
  async settled(codeHash: string, tx: string): Promise<void> {
    if (this.#proven.has(codeHash)) return;
    await this.#records.put(`ok|code|${codeHash}`, { at: this.#clock(), tx });
    this.#remember(codeHash);
  }

  /** A settlement reverted on chain after it passed simulation: the payer (and its code) banned, the gas counted. */
  async reverted(event: Omit<RevertEvent, 'at'>): Promise<void> {
    const now = this.#clock();
    const ban: Ban = { until: now + this.limits.banMs, tx: event.tx, network: event.network };
    const record: RevertEvent = { ...event, payer: event.payer.toLowerCase(), at: now };
    await this.#records.put(`revert|${String(now).padStart(15, '0')}|${event.tx}|${record.payer}`, record);
    await this.#records.put(`ban|payer|${record.payer}`, ban);
    if (event.codeHash) await this.#records.put(`ban|code|${event.codeHash}`, ban);
    this.#observer?.reverted(event.network, BigInt(event.gas));
  }

  async #isProven(codeHash: string): Promise<boolean> {
    if (this.#proven.has(codeHash)) return true;
    const proof = await this.#records.get(`ok|code|${codeHash}`);
    if (proof) this.#remember(codeHash);
    return proof !== undefined;
  }

  #remember(codeHash: string): void {
    if (this.#proven.size >= 10_000) this.#proven.clear();
    this.#proven.add(codeHash);
  }

  /** The reverts of the last hour, newest first; older ones are removed on the way (they count for nothing). */
  async #recent(now: number): Promise<RevertEvent[]> {
    const out: RevertEvent[] = [];
    const stale: string[] = [];
    for await (const [key, value] of this.#records.entries('revert|', { reverse: true })) {
      const e = value as RevertEvent;
      if (e.at <= now - HOUR_MS) {
        stale.push(key);
        if (stale.length >= 64) break;
        continue;
      }
      out.push(e);
    }
    for (const key of stale) await this.#records.remove(key).catch(() => {});
    return out;
  }
}
