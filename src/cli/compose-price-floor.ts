/** The composition root's price floors: one per process, shared by the engine (every payment) and the merchant registry (every route). */
import { GasPriceCache, gasPriceReader } from '../chain/gas-price.ts';
import type { NetworkRegistry } from '../chain/networks.ts';
import type { Logger } from '../log/logger.ts';
import type { Metrics } from '../metrics/metrics.ts';
import { PriceFloors, type PriceFloorConfig } from '../policy/price-floor.ts';

/** The price floors of `networks`: gas prices read live (cached, bounded), floors and refusals counted in metrics. */
export function composePriceFloors(networks: NetworkRegistry, config: PriceFloorConfig, metrics: Metrics, log: Logger): PriceFloors {
  const caip2s = networks.all().map((n) => n.caip2);
  metrics.declarePriceFloor(caip2s);
  const gasPrices = new GasPriceCache({
    read: gasPriceReader(networks, { timeoutMs: config.timeoutMs, observe: (caip2) => metrics.rpcObserver(caip2) }),
    maxAgeMs: config.maxAgeMs,
    timeoutMs: config.timeoutMs,
    failed: (network, error) => {
      metrics.gasPriceReadFailures.labels(network).inc();
      log.warn('could not read the gas price; the price floor keeps the last one read', { network, error: error instanceof Error ? error.message : String(error) });
    },
  });
  const floors = new PriceFloors({
    config,
    networks,
    gasPrices,
    observe: {
      floor: (network, atoms) => metrics.priceFloorAtoms.labels(network).set(Number(atoms)),
      refused: (network) => metrics.priceFloorRefusals.labels(network).inc(),
    },
  });
  // Each network's floor is read once at start, so it is in force (and on /metrics) before the first payment.
  for (const caip2 of caip2s) void floors.floorOn(caip2).catch(() => undefined);
  return floors;
}
