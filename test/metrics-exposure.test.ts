// Where /metrics is served: open on the devnet, off the public listeners elsewhere unless a token or its own port is set.
import t from 'tap';
import { freePort } from './helpers/devnet.ts';
import { metricsEndpointConfigFromEnv, metricsExposure, startMetricsListener } from '../src/metrics/endpoint.ts';
import { createMetrics } from '../src/metrics/metrics.ts';

t.test('off the devnet, without a token or a port, /metrics is not on the public listeners, and the start says so', async (t) => {
  const off = metricsEndpointConfigFromEnv({});
  t.equal(off.public, false);
  t.match(metricsExposure(off), /GET \/metrics is not served: .*GATE402_METRICS_TOKEN.*GATE402_METRICS_PORT/);
  const devnet = metricsEndpointConfigFromEnv({}, { devnet: true });
  t.equal(devnet.public, true, 'on the devnet it stays open, as the Prometheus set-up expects');
  t.match(metricsExposure(devnet), /public listeners without a token \(devnet\)/);
  const token = metricsEndpointConfigFromEnv({ GATE402_METRICS_TOKEN: 's3cret' });
  t.same(token, { token: 's3cret', public: true }, 'behind a token it is on the public listeners');
  const own = metricsEndpointConfigFromEnv({ GATE402_METRICS_PORT: '9464' }, { devnet: true });
  t.same(own, { listener: { host: '127.0.0.1', port: 9464 }, public: false }, 'with a port of its own, never on the public ones');
  t.throws(() => metricsEndpointConfigFromEnv({ GATE402_METRICS_PORT: 'ninety' }), /GATE402_METRICS_PORT/);
});

t.test('a listener of its own serves /metrics, with the token when one is set', async (t) => {
  const metrics = createMetrics();
  const port = await freePort();
  const config = metricsEndpointConfigFromEnv({ GATE402_METRICS_PORT: String(port), GATE402_METRICS_TOKEN: 'tok' });
  const own = await startMetricsListener(metrics, { ...config, listener: config.listener as { host: string; port: number } });
  t.teardown(() => own.close());
  t.equal(own.port, port);
  t.equal((await fetch(`${own.url}/metrics`)).status, 401, 'without the token');
  const res = await fetch(`${own.url}/metrics`, { headers: { authorization: 'Bearer tok' } });
  t.equal(res.status, 200);
  t.match(await res.text(), /gate402_process_cpu_seconds_total/);
  t.equal((await fetch(`${own.url}/openapi.json`)).status, 404, 'nothing else is served there');
});
