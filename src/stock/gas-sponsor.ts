import { randomUUID } from 'node:crypto';
import { ConfigError, envString } from '../config/env.ts';
import { formatDecimalAmount, parseDecimalAmount, USD_DECIMALS } from '../protocol/amounts.ts';
import { encodeFunctionData, erc20Abi, maxUint256, type Address, type Hex } from 'viem';
import { awaitMined, sendDurably, type Courier, type SendOutcome } from '../tx/courier.ts';
import type { SignedTx } from '../tx/trail.ts';
import type { Logger } from '../log/logger.ts';
import { ok, refusal, type Err, type HttpFailure, type Ok } from '../protocol/result.ts';
import type { Metrics } from '../metrics/metrics.ts';
import type { DurableCollection } from '../store/durable-collection.ts';
import type { NonceClaims } from '../store/nonce-claims.ts';
import type { StockMarket } from './market.ts';
import { ORDER_LIMITS } from './terms.ts';

const ether = (wei: bigint): number => Number(formatDecimalAmount(wei, 18));

export interface Sponsorship {
  id: string;
  address: Address;
  /** Wei sent: the approval's gas estimate, with headroom, at a fee any wallet's default stays under. */
  amountWei: string;
  gasEstimate: string;
  maxFeePerGas: string;
  txs: SignedTx[];
  transaction?: Hex;
  state: 'sending' | 'sent' | 'confirmed' | 'failed';
  createdAt: number;
}

/** Why a sponsorship is refused; the code is the `condition` the API answers with. */
export const SPONSOR_REFUSAL_CODES = ['already_sponsored', 'no_stablecoin_b', 'already_approved', 'sponsor_unavailable', 'sponsor_budget_exhausted'] as const;
export type SponsorRefusalCode = (typeof SPONSOR_REFUSAL_CODES)[number];

/** `retryAfterSeconds`: when the hourly budget is spent, when enough of it comes back. */
export type SponsorOutcome = Ok<Sponsorship> | Err<HttpFailure<SponsorRefusalCode> & { retryAfterSeconds?: number }>;

export interface GasSponsorOptions {
  market: StockMarket;
  courier: Courier;
  permit2: Address;
  /** Who was ever sponsored: claimed before anything is sent, so one address is sponsored once, ever. */
  claims: NonceClaims;
  records: DurableCollection<Sponsorship>;
  log: Logger;
  now?: () => number;
  signal: AbortSignal;
  metrics?: Pick<Metrics, 'stockSponsorships' | 'stockSponsoredNative' | 'stockSponsorBudgetLeft'>;
  /** Native coin (wei) all sponsorships of the last hour may add up to; see {@link sponsorBudgetFromEnv}. */
  hourlyBudgetWei: bigint;
}

/**
 * | variable | default | meaning |
 * |---|---|---|
 * | `GATE402_SPONSOR_BUDGET_PER_HOUR` | `0.005` | native coin (e.g. ether, at most 18 fraction digits) all gas sponsorships of the last hour may add up to; past it, 503 `sponsor_budget_exhausted` |
 */
export function sponsorBudgetFromEnv(env: NodeJS.ProcessEnv): bigint {
  const raw = envString(env, 'GATE402_SPONSOR_BUDGET_PER_HOUR', DEFAULT_SPONSOR_BUDGET_PER_HOUR);
  const wei = /^[0-9]{1,9}(\.[0-9]{1,18})?$/.test(raw) ? parseDecimalAmount(raw, 18) : undefined;
  if (wei === undefined) throw new ConfigError(`GATE402_SPONSOR_BUDGET_PER_HOUR must be an amount of the native coin (e.g. 0.005), got '${raw}'`);
  return wei;
}

export const DEFAULT_SPONSOR_BUDGET_PER_HOUR = '0.005';
const HOUR_MS = 3_600_000;

/**
 * One-time native gas so that a wallet holding only stablecoin B can send its single approval of stablecoin B to
 * Permit2; every later payment is a signature. Given once per address, only to an address that could buy (it holds
 * at least the smallest stock order of stablecoin B) and has no Permit2 allowance yet, and only while the
 * sponsorships of the last hour stay within the hourly budget: an attacker who moves one balance from address to
 * address is bounded by the budget, not by how many addresses it makes. The hour is counted from the durable
 * sponsorship records (read once, at the first request), so a restart does not refill it.
 */
export class GasSponsor {
  readonly #o: GasSponsorOptions;
  readonly #now: () => number;
  /** Sponsorships of the last hour (sent or being sent): when, and how much. */
  #spent: { at: number; wei: bigint; id: string }[] | undefined;
  #loading: Promise<void> | undefined;

  constructor(opts: GasSponsorOptions) {
    this.#o = opts;
    this.#now = opts.now ?? Date.now;
    opts.metrics?.stockSponsorBudgetLeft.set(ether(opts.hourlyBudgetWei));
  }

  async sponsor(address: Address): Promise<SponsorOutcome> {
    const outcome = await this.#sponsor(address);
    this.#o.metrics?.stockSponsorships.labels(outcome.ok ? 'sent' : outcome.error.code).inc();
    if (outcome.ok) this.#o.metrics?.stockSponsoredNative.inc(ether(BigInt(outcome.value.amountWei)));
    this.#o.metrics?.stockSponsorBudgetLeft.set(ether(this.#left()));
    return outcome;
  }

  /** Reads the last hour's sponsorships from their durable records, once. */
  async #load(): Promise<void> {
    if (this.#spent) return;
    this.#loading ??= (async () => {
      const since = this.#now() - HOUR_MS;
      const spent: { at: number; wei: bigint; id: string }[] = [];
      for await (const [, r] of this.#o.records.entries()) if (r.createdAt > since && r.state !== 'failed') spent.push({ at: r.createdAt, wei: BigInt(r.amountWei), id: r.id });
      this.#spent ??= spent;
    })().finally(() => {
      this.#loading = undefined;
    });
    await this.#loading;
  }

  /** What the sponsorships of the last hour leave of the budget (wei). */
  #left(): bigint {
    const since = this.#now() - HOUR_MS;
    if (this.#spent) this.#spent = this.#spent.filter((s) => s.at > since);
    const used = (this.#spent ?? []).reduce((sum, s) => sum + s.wei, 0n);
    return used >= this.#o.hourlyBudgetWei ? 0n : this.#o.hourlyBudgetWei - used;
  }

  /** Takes `wei` of the hour's budget for sponsorship `id`, or says in how many seconds enough of it comes back. */
  #reserve(id: string, wei: bigint): { ok: true } | { ok: false; retryAfterSeconds: number } {
    if (wei <= this.#left()) {
      this.#spent?.push({ at: this.#now(), wei, id });
      return { ok: true };
    }
    const oldest = this.#spent?.[0]?.at ?? this.#now();
    return { ok: false, retryAfterSeconds: Math.max(1, Math.ceil((oldest + HOUR_MS - this.#now()) / 1000)) };
  }

  #unreserve(id: string): void {
    if (this.#spent) this.#spent = this.#spent.filter((s) => s.id !== id);
  }

  /**
   * Sponsorships a desk left in flight when it stopped (a crash, or a dead node whose desk lease this node took):
   * their signed transactions are re-sent by the desk's start, before it reads its nonce (see `StockDesk.start`).
   */
  async unfinished(): Promise<Sponsorship[]> {
    const out: Sponsorship[] = [];
    for await (const [, r] of this.#o.records.entries()) if (r.state === 'sending' || r.state === 'sent') out.push(r);
    return out;
  }

  /**
   * Finishes `left` (from {@link unfinished}, once re-sent) as the desk that sent them would have: each signed
   * transfer is awaited, never signed anew, and recorded confirmed or failed. One that left no signed transaction
   * sent nothing: it fails, and its address may ask again.
   */
  resume(left: readonly Sponsorship[]): void {
    for (const r of left) {
      const key = r.address.toLowerCase();
      const log = this.#o.log.child({ sponsorship: r.id, address: r.address });
      void (async () => {
        if (!r.txs.length) {
          await this.#o.records.put(key, { ...r, state: 'failed' });
          await this.#o.claims.release(key, r.id);
          log.warn('a gas sponsorship left unsigned by a stopped desk failed; the address may ask again');
          return;
        }
        log.info('resuming a gas sponsorship', { state: r.state });
        let record = r;
        const save = async (next: Sponsorship) => {
          record = next;
          await this.#o.records.put(key, next);
        };
        const mined = await awaitMined(this.#o.courier, r.txs, async (txs) => save({ ...record, txs }), this.#o.signal);
        await save({ ...record, txs: mined.txs, transaction: mined.receipt.transactionHash, state: mined.receipt.status === 'success' ? 'confirmed' : 'failed' });
        log.info('gas sponsored', { amountWei: record.amountWei, tx: record.transaction });
      })().catch((error: unknown) => log.warn('a resumed gas sponsorship is not confirmed yet; the next start of the desk resumes it', { error }));
    }
  }

  async #sponsor(address: Address): Promise<SponsorOutcome> {
    const key = address.toLowerCase();
    const { market, permit2 } = this.#o;
    if ((await this.#o.claims.holder(key)) !== undefined) return refusal('already_sponsored', `${address} was sponsored before; sponsorship is once per address`, 409);
    const [balance, allowance] = await Promise.all([market.balanceOf(market.stable, address), market.allowance(market.stable, address, permit2)]);
    if (balance < ORDER_LIMITS.min) {
      return refusal(
        'no_stablecoin_b',
        `${address} holds ${formatDecimalAmount(balance, USD_DECIMALS)} stablecoin B (${market.stable}), less than the smallest stock order (${formatDecimalAmount(ORDER_LIMITS.min, USD_DECIMALS)}); sponsorship is for wallets that can buy`,
        422,
      );
    }
    if (allowance > 0n) return refusal('already_approved', `${address} already has a Permit2 allowance for stablecoin B; no approval is needed`, 409);

    const approval = encodeFunctionData({ abi: erc20Abi, functionName: 'approve', args: [permit2, maxUint256] });
    const client = market.client;
    const [gasEstimate, block, tip] = await Promise.all([
      client.estimateGas({ account: address, to: market.stable, data: approval }),
      client.getBlock({ blockTag: 'latest' }),
      client.estimateMaxPriorityFeePerGas().catch(() => 1_000_000_000n),
    ]);
    // Wallets default to about 1.2x the base fee plus the tip; 2x leaves room for the base fee to climb meanwhile.
    const maxFeePerGas = (block.baseFeePerGas ?? 1_000_000_000n) * 2n + tip;
    const gas = (gasEstimate * 12n) / 10n;
    const amountWei = gas * maxFeePerGas;

    const id = randomUUID();
    await this.#load();
    // Taken before the claim, with no await in between the check and the take: concurrent requests cannot overspend it.
    const reserved = this.#reserve(id, amountWei);
    if (!reserved.ok) {
      this.#o.log.warn('gas sponsorship refused: the hourly budget is spent', { address, amountWei, budgetWei: this.#o.hourlyBudgetWei });
      const budget = formatDecimalAmount(this.#o.hourlyBudgetWei, 18).replace(/\.?0+$/, '');
      const refused = refusal('sponsor_budget_exhausted', `gas sponsorship's hourly budget (${budget} native coin) is spent; nothing was sent, try again in ${reserved.retryAfterSeconds} s`, 503);
      return { ok: false, error: { ...refused.error, retryAfterSeconds: reserved.retryAfterSeconds } };
    }
    const claim = await this.#o.claims.claim(key, id);
    if (!claim.claimed) {
      this.#unreserve(id);
      return refusal('already_sponsored', `${address} was sponsored before; sponsorship is once per address`, 409);
    }
    let record: Sponsorship = {
      id,
      address,
      amountWei: amountWei.toString(),
      gasEstimate: gasEstimate.toString(),
      maxFeePerGas: maxFeePerGas.toString(),
      txs: [],
      state: 'sending',
      createdAt: (this.#o.now ?? Date.now)(),
    };
    const save = async (next: Sponsorship) => {
      record = next;
      await this.#o.records.put(key, next);
    };
    let sent: SendOutcome | undefined;
    let why = '';
    try {
      sent = await sendDurably(this.#o.courier, { to: address, data: '0x', gas: 21_000n, value: amountWei }, [], (txs) => save({ ...record, txs }));
      if (!sent.ok) why = sent.error.message;
    } catch (err) {
      why = String(err);
    }
    if (!sent?.ok) {
      // Nothing reached the chain: the address may ask again.
      await save({ ...record, state: 'failed' });
      this.#unreserve(id);
      await this.#o.claims.release(key, id);
      this.#o.log.warn('gas sponsorship not sent', { address, why });
      return refusal('sponsor_unavailable', 'the sponsorship could not be sent right now; nothing was sent, try again later', 503);
    }
    await save({ ...record, txs: sent.value, state: 'sent' });
    const mined = await awaitMined(this.#o.courier, sent.value, async (txs) => save({ ...record, txs }), this.#o.signal);
    await save({ ...record, txs: mined.txs, transaction: mined.receipt.transactionHash, state: mined.receipt.status === 'success' ? 'confirmed' : 'failed' });
    this.#o.log.info('gas sponsored', { address, amountWei: record.amountWei, tx: record.transaction });
    return ok(record);
  }
}
