import { createHash, timingSafeEqual } from 'node:crypto';
import { envString } from '../config/env.ts';
import { json, type HttpHandler } from '../http/server.ts';
import type { Metrics } from './metrics.ts';

/**
 * `GET /metrics` settings. The exposition names merchants, their revenue and the relayers: on a public listener, set
 * `GATE402_METRICS_TOKEN` and have Prometheus send it (`authorization: Bearer <token>`).
 */
export interface MetricsEndpointConfig {
  token?: string;
}

export function metricsEndpointConfigFromEnv(env: NodeJS.ProcessEnv = process.env): MetricsEndpointConfig {
  const token = envString(env, 'GATE402_METRICS_TOKEN', '');
  return token ? { token } : {};
}

const digest = (s: string) => createHash('sha256').update(s).digest();

/** The `/metrics` route (Prometheus text format), mounted on the gateway and on the facilitator. */
export function metricsRoute(metrics: Pick<Metrics, 'scrape'>, config: MetricsEndpointConfig): { method: 'GET'; path: '/metrics'; handler: HttpHandler } {
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
