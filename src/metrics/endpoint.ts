import { createHash, timingSafeEqual } from 'node:crypto';
import { envHost, envInt, envString } from '../config/env.ts';
import { createHttpServer, json, type HttpHandler } from '../http/server.ts';
import type { Metrics } from './metrics.ts';

/**
 * `GET /metrics` settings. The exposition names merchants, their revenue and the relayers, and a scrape costs the
 * process far more than an unpaid request: on a public listener, set `GATE402_METRICS_TOKEN` and have Prometheus
 * send it (`authorization: Bearer <token>`), or serve it on a listener of its own (`GATE402_METRICS_PORT`).
 */
export interface MetricsEndpointConfig {
  token?: string;
  /** A listener of its own for `/metrics` (then it is not on the public listeners). */
  listener?: { host: string; port: number };
  /**
   * Whether `/metrics` is mounted on the public listeners (the gateway's and the facilitator's): with a token; on
   * the devnet without one (as the Prometheus set-up in docs/operations-and-cluster.md expects); never when it has a listener of its own.
   */
  public: boolean;
}

/**
 * Off the devnet, `/metrics` is served only behind a token or on its own listener: with neither it is not served at
 * all (404), and {@link metricsExposure} says so at start.
 */
export function metricsEndpointConfigFromEnv(env: NodeJS.ProcessEnv = process.env, where: { devnet?: boolean } = {}): MetricsEndpointConfig {
  const token = envString(env, 'GATE402_METRICS_TOKEN', '');
  const port = envInt(env, 'GATE402_METRICS_PORT', -1, { min: 0, max: 65535 });
  const listener = port >= 0 ? { host: envHost(env, 'GATE402_METRICS_HOST', '127.0.0.1'), port } : undefined;
  return { ...(token ? { token } : {}), ...(listener ? { listener } : {}), public: listener === undefined && (token !== '' || where.devnet === true) };
}

/** One line for the start's log: where `/metrics` is served, and how it is protected. */
export function metricsExposure(config: MetricsEndpointConfig): string {
  const guard = config.token ? ' (bearer token required)' : '';
  if (config.listener) return `GET /metrics is served on its own listener ${config.listener.host}:${config.listener.port}${guard}, not on the public ones`;
  if (config.public) return `GET /metrics is served on the public listeners${config.token ? guard : ' without a token (devnet)'}`;
  return 'GET /metrics is not served: off the devnet set GATE402_METRICS_TOKEN (bearer token) or GATE402_METRICS_PORT (a listener of its own)';
}

/** Serves `/metrics` alone on `config.listener`; resolves to its URL and how to close it. */
export async function startMetricsListener(
  metrics: Pick<Metrics, 'scrape'>,
  config: MetricsEndpointConfig & { listener: { host: string; port: number } },
  log?: (line: string) => void,
): Promise<{ url: string; port: number; close(): Promise<void> }> {
  const route = metricsRoute(metrics, config);
  const server = createHttpServer({ host: config.listener.host, port: config.listener.port, maxBodyBytes: 1024, ...(log ? { log } : {}) }).route(route.method, route.path, route.handler);
  const port = await server.listen();
  return { url: `http://${config.listener.host}:${port}`, port, close: () => server.close() };
}

const digest = (s: string) => createHash('sha256').update(s).digest();

/** The `/metrics` route (Prometheus text format), mounted on the gateway and on the facilitator. */
export function metricsRoute(metrics: Pick<Metrics, 'scrape'>, config: Pick<MetricsEndpointConfig, 'token'>): { method: 'GET'; path: '/metrics'; handler: HttpHandler } {
  const expected = config.token === undefined ? undefined : digest(`Bearer ${config.token}`);
  return {
    method: 'GET',
    path: '/metrics',
    handler: async (req) => {
      if (expected && !timingSafeEqual(digest(req.headers.authorization ?? ''), expected)) {
        return json(401, { error: 'metrics need the bearer token' }, { 'www-authenticate': 'Bearer realm="metrics"' });
      }
      const { contentType, body } = await metrics.scrape();
      return { status: 200, headers: { 'content-type': contentType, 'cache-control': 'no-store' }, body };
    },
  };
}
