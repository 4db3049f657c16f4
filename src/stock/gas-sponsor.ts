import { randomUUID } from 'node:crypto';
import { encodeFunctionData, erc20Abi, maxUint256, type Address, type Hex } from 'viem';
import { awaitMined, sendDurably, type Courier } from '../engine/tx-courier.ts';
import type { SignedTx } from '../engine/relayer-pool.ts';
import type { Logger } from '../log/logger.ts';
import { ok, refusal, type Err, type HttpFailure, type Ok } from '../protocol/result.ts';
import type { Metrics } from '../metrics/metrics.ts';
import type { DurableCollection } from '../store/durable-collection.ts';
import type { NonceClaims } from '../store/nonce-claims.ts';
import type { StockMarket } from './market.ts';

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
export type SponsorRefusalCode = 'already_sponsored' | 'no_stablecoin_b' | 'already_approved' | 'sponsor_unavailable';

export type SponsorOutcome = Ok<Sponsorship> | Err<HttpFailure<SponsorRefusalCode>>;

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
  metrics?: Pick<Metrics, 'stockSponsorships'>;
}

/**
 * One-time native gas so that a wallet holding only stablecoin B can send its single approval of stablecoin B to
 * Permit2; every later payment is a signature. Given once per address, and only to an address that holds
 * stablecoin B and has no Permit2 allowance yet.
 */
export class GasSponsor {
  readonly #o: GasSponsorOptions;

  constructor(opts: GasSponsorOptions) {
    this.#o = opts;
  }

  async sponsor(address: Address): Promise<SponsorOutcome> {
    const outcome = await this.#sponsor(address);
    this.#o.metrics?.stockSponsorships.labels(outcome.ok ? 'sent' : outcome.error.code).inc();
    return outcome;
  }

  async #sponsor(address: Address): Promise<SponsorOutcome> {
    const key = address.toLowerCase();
    const { market, permit2 } = this.#o;
    if ((await this.#o.claims.holder(key)) !== undefined) return refusal('already_sponsored', `${address} was sponsored before; sponsorship is once per address`, 409);
    const [balance, allowance] = await Promise.all([market.balanceOf(market.stable, address), market.allowance(market.stable, address, permit2)]);
    if (balance === 0n) return refusal('no_stablecoin_b', `${address} holds no stablecoin B (${market.stable}); sponsorship is for wallets that hold it`, 422);
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
    const claim = await this.#o.claims.claim(key, id);
    if (!claim.claimed) return refusal('already_sponsored', `${address} was sponsored before; sponsorship is once per address`, 409);
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
    let sent: Awaited<ReturnType<typeof sendDurably>>;
    try {
      sent = await sendDurably(this.#o.courier, { to: address, data: '0x', gas: 21_000n, value: amountWei }, [], (txs) => save({ ...record, txs }));
    } catch (err) {
      sent = { ok: false as const, txs: record.txs, message: String(err) };
    }
    if (!sent.ok) {
      // Nothing reached the chain: the address may ask again.
      await save({ ...record, state: 'failed' });
      await this.#o.claims.release(key, id);
      this.#o.log.warn('gas sponsorship not sent', { address, why: sent.message });
      return refusal('sponsor_unavailable', 'the sponsorship could not be sent right now; nothing was sent, try again later', 503);
    }
    await save({ ...record, txs: sent.txs, state: 'sent' });
    const mined = await awaitMined(this.#o.courier, sent.txs, async (txs) => save({ ...record, txs }), this.#o.signal);
    await save({ ...record, txs: mined.txs, transaction: mined.receipt.transactionHash, state: mined.receipt.status === 'success' ? 'confirmed' : 'failed' });
    this.#o.log.info('gas sponsored', { address, amountWei: record.amountWei, tx: record.transaction });
    return ok(record);
  }
}
