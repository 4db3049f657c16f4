/**
 * The stock desk's orders, refunds and gas sponsorships, and each network's price floor: counted by their parts
 * (the metrics are handed to them as they are), declared at zero with what each part knows when it starts.
 */
import type { Counter, Gauge } from 'prom-client';
import type { MetricKit } from './metric-kit.ts';

export interface StockSeries {
  /** The stock desk's symbols, order outcomes, refund reasons and sponsorship outcomes. */
  declareStock(known: { symbols: readonly string[]; outcomes: readonly string[]; refundReasons: readonly string[]; sponsorshipOutcomes: readonly string[] }): void;
  readonly stockOrders: Counter<'symbol' | 'outcome'>;
  readonly stockOrderVolumeUsd: Counter<'symbol'>;
  readonly stockRefunds: Counter<'reason'>;
  readonly stockSponsorships: Counter<'outcome'>;
  /** Gas sponsorship's hourly budget: native coin sent, and what is left of the last hour's budget. */
  readonly stockSponsoredNative: Counter<never>;
  readonly stockSponsorBudgetLeft: Gauge<never>;
}

export interface PriceFloorSeries {
  /** Each network's floor, payments refused below it, gas price reads that failed: at zero on `networks`. */
  declarePriceFloor(networks: readonly string[]): void;
  readonly priceFloorAtoms: Gauge<'network'>;
  readonly priceFloorRefusals: Counter<'network'>;
  readonly gasPriceReadFailures: Counter<'network'>;
}

export function stockSeries(kit: MetricKit): StockSeries {
  const stockOrders = kit.counter({ name: 'gate402_stock_orders_total', help: 'Finished stock orders by symbol and outcome', labelNames: ['symbol', 'outcome'] });
  const stockOrderVolumeUsd = kit.counter({ name: 'gate402_stock_order_volume_usd_total', help: 'Stablecoin paid for delivered stock orders, in USD, by symbol', labelNames: ['symbol'] });
  const stockRefunds = kit.counter({ name: 'gate402_stock_refunds_total', help: 'Stock order refunds sent, by reason', labelNames: ['reason'] });
  const stockSponsorships = kit.counter({ name: 'gate402_stock_sponsorships_total', help: 'Gas sponsorship requests by outcome (sent, or the refusal)', labelNames: ['outcome'] });
  const stockSponsoredNative = kit.counter({ name: 'gate402_stock_sponsored_native_total', help: 'Native coin sent as gas sponsorship, in whole coins (ether)', labelNames: [] as never[] });
  const stockSponsorBudgetLeft = kit.gauge({
    name: 'gate402_stock_sponsor_budget_left_native',
    help: "What is left of the gas sponsorship's hourly budget, in whole native coins (ether)",
    labelNames: [] as never[],
  });
  return {
    declareStock(known) {
      for (const symbol of known.symbols) {
        stockOrderVolumeUsd.labels(symbol).inc(0);
        for (const outcome of known.outcomes) stockOrders.labels(symbol, outcome).inc(0);
      }
      for (const reason of known.refundReasons) stockRefunds.labels(reason).inc(0);
      for (const outcome of known.sponsorshipOutcomes) stockSponsorships.labels(outcome).inc(0);
    },
    stockOrders,
    stockOrderVolumeUsd,
    stockRefunds,
    stockSponsorships,
    stockSponsoredNative,
    stockSponsorBudgetLeft,
  };
}

export function priceFloorSeries(kit: MetricKit): PriceFloorSeries {
  const priceFloorAtoms = kit.gauge({
    name: 'gate402_price_floor_atoms',
    help: "Each network's live price floor, in its stablecoin's atoms (the least a payment must move to pay for its settlement's gas)",
    labelNames: ['network'],
  });
  const priceFloorRefusals = kit.counter({
    name: 'gate402_price_floor_refusals_total',
    help: "Payments refused before anything was sent for an amount below their network's price floor",
    labelNames: ['network'],
  });
  const gasPriceReadFailures = kit.counter({
    name: 'gate402_gas_price_read_failures_total',
    help: 'Gas price reads for the price floor that failed or timed out (the last price read was kept)',
    labelNames: ['network'],
  });
  return {
    declarePriceFloor(networks) {
      for (const network of networks) {
        // 0 until the network's gas price is first read (no floor is in force before it: nothing is refused for it).
        priceFloorAtoms.labels(network).set(0);
        priceFloorRefusals.labels(network).inc(0);
        gasPriceReadFailures.labels(network).inc(0);
      }
    },
    priceFloorAtoms,
    priceFloorRefusals,
    gasPriceReadFailures,
  };
}
