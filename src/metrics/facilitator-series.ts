/**
 * Who settles each network, as the facilitator panels show it: the remote facilitators a gateway settles through
 * (`GATE402_FACILITATORS`), with their errors, failovers and breakers, and, for every network the process's own
 * engine settles, {@link LOCAL_FACILITATOR}'s series at zero. Whichever of the two is told first, the series are
 * the same.
 */
import { BREAKER_VALUE, type BreakerStateName, type MetricKit } from './metric-kit.ts';

/**
 * The `facilitator` of a network no remote facilitator settles: the process's own engine (a space cannot be in a
 * remote one's name, which is a URL's host and path). Its series exist at zero and stay there (no remote call to
 * fail, nothing to fail over to, no breaker to open), so the facilitator panels show who settles, not "No data".
 */
export const LOCAL_FACILITATOR = 'local engine';

/** The error kinds a facilitator's series start with (the others appear with their first event). */
const FACILITATOR_ERROR_KINDS = ['unreachable', 'timeout', 'connection_lost', 'http_5xx'] as const;

export interface FacilitatorSeries {
  /** The networks the process's own engine settles (unless a remote facilitator settles them). */
  engineSettles(networks: readonly string[]): void;
  watchFacilitators(facilitators: Iterable<{ facilitator: string; network: string }>, state: (facilitator: string) => BreakerStateName): void;
  facilitatorError(facilitator: string, network: string, kind: string): void;
  facilitatorFailover(facilitator: string, network: string): void;
}

export function facilitatorSeries(kit: MetricKit): FacilitatorSeries {
  const facilitatorErrors = kit.counter({
    name: 'gate402_facilitator_errors_total',
    help: 'Calls to remote facilitators that brought no usable answer, by facilitator (host and path), network and kind (unreachable, timeout, connection_lost, http_5xx, http_4xx, bad_answer, unexpected_error); "local engine" (always 0) for a network this process settles itself',
    labelNames: ['facilitator', 'network', 'kind'],
  });
  const facilitatorFailovers = kit.counter({
    name: 'gate402_facilitator_failovers_total',
    help: 'Payments passed on from a remote facilitator to the next one of their network, proven not settled by it (or while its breaker was open), by the facilitator left; "local engine" (always 0) for a network this process settles itself',
    labelNames: ['facilitator', 'network'],
  });
  const facilitatorSources: Array<{ names: string[]; state: (facilitator: string) => BreakerStateName }> = [];
  // Networks the engine settles (engineSettles) and those remote facilitators settle (watchFacilitators): the rest
  // carry LOCAL_FACILITATOR's zero series, whichever of the two is called first.
  const engineNetworks = new Set<string>();
  const remoteNetworks = new Set<string>();
  const localNetworks = () => [...engineNetworks].filter((n) => !remoteNetworks.has(n));
  const facilitatorZero = (facilitator: string, network: string) => {
    facilitatorFailovers.labels(facilitator, network).inc(0);
    for (const kind of FACILITATOR_ERROR_KINDS) facilitatorErrors.labels(facilitator, network, kind).inc(0);
  };
  const forgetLocal = (network: string) => {
    facilitatorFailovers.remove(LOCAL_FACILITATOR, network);
    for (const kind of FACILITATOR_ERROR_KINDS) facilitatorErrors.remove(LOCAL_FACILITATOR, network, kind);
  };
  kit.gauge({
    name: 'gate402_facilitator_circuit_state',
    help: `Circuit breaker of each remote facilitator: 0 closed, 1 half-open, 2 open ("${LOCAL_FACILITATOR}", always 0, when this process's engine settles some network itself)`,
    labelNames: ['facilitator'],
    collect() {
      this.reset();
      if (localNetworks().length > 0) this.labels(LOCAL_FACILITATOR).set(BREAKER_VALUE.closed);
      for (const source of facilitatorSources) for (const name of source.names) this.labels(name).set(BREAKER_VALUE[source.state(name)]);
    },
  });

  return {
    engineSettles(networks) {
      for (const network of networks) engineNetworks.add(network);
      for (const network of localNetworks()) facilitatorZero(LOCAL_FACILITATOR, network);
    },
    watchFacilitators(facilitators, state) {
      const names = new Set<string>();
      for (const { facilitator, network } of facilitators) {
        names.add(facilitator);
        if (!remoteNetworks.has(network) && engineNetworks.has(network)) forgetLocal(network);
        remoteNetworks.add(network);
        facilitatorZero(facilitator, network);
      }
      facilitatorSources.push({ names: [...names], state });
    },
    facilitatorError(facilitator, network, kind) {
      facilitatorErrors.labels(facilitator, network, kind).inc();
    },
    facilitatorFailover(facilitator, network) {
      facilitatorFailovers.labels(facilitator, network).inc();
    },
  };
}
