/**
 * The settlement port the gateway and the stock desk are given: the local engine's, or, for the networks
 * `GATE402_FACILITATORS` names, remote facilitators with failover (shedding on their own counts), the rest on the
 * engine. The parts never learn which.
 */
import type { RunningEngine } from '../engine/create-engine.ts';
import type { Logger } from '../log/logger.ts';
import type { Metrics } from '../metrics/metrics.ts';
import type { Settlement } from '../ports/settlement.ts';
import type { RemoteSettlementConfig } from '../settlement/remote/facilitators-config.ts';
import { remoteSettlement } from '../settlement/remote/remote-settlement.ts';

export interface ComposedSettlement {
  settlement: Settlement;
  /** Payments being settled now, locally and remotely (O(1)): the gateway's /health. */
  load(): number;
  close(): Promise<void>;
}

export function composeSettlement(parts: { engine: RunningEngine; remote: RemoteSettlementConfig | undefined; log: Logger; metrics: Metrics }): ComposedSettlement {
  const engine = parts.engine.engine;
  // The engine is a Settlement itself.
  const local: Settlement = engine;
  if (!parts.remote) return { settlement: local, load: () => engine.inFlight, close: async () => {} };
  const remote = remoteSettlement({
    config: parts.remote,
    local,
    precheck: (request) => engine.precheck(request),
    consumption: (request) => engine.consumption(request),
    log: parts.log.child({ part: 'remote-settlement' }),
    metrics: parts.metrics,
  });
  parts.log.info('settling through remote facilitators', { networks: Object.fromEntries([...parts.remote.networks].map(([n, list]) => [n, list.map((f) => f.name)])) });
  return { settlement: remote, load: () => engine.inFlight + remote.inFlight, close: () => remote.close() };
}
