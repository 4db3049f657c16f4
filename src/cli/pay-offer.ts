/**
 * What `gate402 pay` is about to pay, before it signs anything: the offer the official client chose, its price in USD
 * and whether it is within the buyer's `--max`. Pure.
 */
import { formatDecimalAmount, parseDecimalAmount, USD_DECIMALS } from '../protocol/amounts.ts';

export interface ChosenOffer {
  protocol: 'x402' | 'mpp';
  network: string;
  /** The token paid with. */
  asset: string;
  payTo: string;
  /** Atomic units of `asset`. */
  amount: bigint;
  /** `asset`'s decimals: the USD stablecoins here all have 6. */
  decimals: number;
}

/** `--max`: a USD amount, at most 6 fraction digits; undefined when it is not one. */
export function parseMaxUsd(text: string): bigint | undefined {
  return parseDecimalAmount(text.trim(), USD_DECIMALS);
}

/** The offer's price in USD, exactly (a USD stablecoin's unit is a dollar). */
export function priceUsd(offer: ChosenOffer): string {
  return formatDecimalAmount(offer.amount, offer.decimals);
}

/** Whether the offer costs more than `maxUsd` (atomic, 6 decimals); compared exactly, whatever the token's decimals. */
export function aboveMax(offer: ChosenOffer, maxUsd: bigint): boolean {
  return offer.amount * 10n ** BigInt(USD_DECIMALS) > maxUsd * 10n ** BigInt(offer.decimals);
}

/** One line for people, then the offer as JSON (amounts as strings). */
export function describeOffer(offer: ChosenOffer): string {
  const json = JSON.stringify({ ...offer, amount: offer.amount.toString(), priceUsd: priceUsd(offer) });
  return `${offer.protocol} offer: ${priceUsd(offer)} USD (${offer.amount} units of ${offer.asset} on ${offer.network}) to ${offer.payTo}\n${json}`;
}
