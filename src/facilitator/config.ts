/**
 * Facilitator HTTP settings from environment variables. Unset or empty variables take their defaults;
 * a set but invalid value throws an Error naming the variable.
 *
 * | variable | default | meaning |
 * |---|---|---|
 * | `GATE402_FACILITATOR_HOST` | `127.0.0.1` | listen address |
 * | `GATE402_FACILITATOR_PORT` | `8403` | listen port (0 = any free port) |
 * | `GATE402_FACILITATOR_MAX_BODY_BYTES` | `65536` | largest accepted request body |
 * | `GATE402_FACILITATOR_RATE_CAPACITY` | `50` | rate-limit burst per client IP (verify + settle) |
 * | `GATE402_FACILITATOR_RATE_PER_SECOND` | `20` | rate-limit refill per client IP |
 * | `GATE402_TRUST_PROXY` | `false` | behind reverse proxies: `false`, a proxy count (`true` = 1), or the proxies' addresses/CIDR blocks; the client is the right-most untrusted `X-Forwarded-For` hop |
 */

import { envHost, envInt, envPositiveNumber } from '../config/env.ts';
import { trustProxyFromEnv, type TrustProxy } from '../http/trust-proxy.ts';

export interface FacilitatorHttpConfig {
  host: string;
  port: number;
  maxBodyBytes: number;
  rateLimit: { capacity: number; refillPerSecond: number };
  trustProxy: TrustProxy;
}

const MAX_BODY_LIMIT = 16 * 1024 * 1024;

export function facilitatorHttpConfigFromEnv(env: NodeJS.ProcessEnv = process.env): FacilitatorHttpConfig {
  return {
    host: envHost(env, 'GATE402_FACILITATOR_HOST', '127.0.0.1'),
    port: envInt(env, 'GATE402_FACILITATOR_PORT', 8403, { min: 0, max: 65535 }),
    maxBodyBytes: envInt(env, 'GATE402_FACILITATOR_MAX_BODY_BYTES', 65536, { min: 1, max: MAX_BODY_LIMIT }),
    rateLimit: {
      capacity: envInt(env, 'GATE402_FACILITATOR_RATE_CAPACITY', 50, { min: 1, max: 1_000_000 }),
      refillPerSecond: envPositiveNumber(env, 'GATE402_FACILITATOR_RATE_PER_SECOND', 20),
    },
    trustProxy: trustProxyFromEnv(env),
  };
}
