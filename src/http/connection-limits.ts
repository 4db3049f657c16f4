/**
 * The connection limits of every HTTP server of the process, from the environment:
 *
 * | variable | default | meaning |
 * | `GATE402_MAX_CONNECTIONS_PER_CLIENT` | `512` | open connections one client address (IPv6: one /64) may hold; 0: no cap |
 * | `GATE402_MAX_CONNECTIONS` | the process's descriptor limit less 1024 | open connections of the whole process; 0: no cap |
 * | `GATE402_CONNECTION_IDLE_MS` | `5000` | a connection that sent no request this long after it opened is closed |
 *
 * The total leaves descriptors for what the process needs besides its clients (data store, RPC, upstreams, workers).
 */
import { readFileSync } from 'node:fs';
import { envInt } from '../config/env.ts';
import type { ConnectionLimits } from './connection-guard.ts';

/** Descriptors kept out of the connection total for everything else the process opens. */
export const RESERVED_DESCRIPTORS = 1024;
const FALLBACK_DESCRIPTORS = 1024 + RESERVED_DESCRIPTORS;

/** The soft `RLIMIT_NOFILE` of this process (Linux `/proc/self/limits`), or undefined where unknown or unlimited. */
export function openFileLimit(limitsText?: string): number | undefined {
  let text = limitsText;
  if (text === undefined) {
    try {
      text = readFileSync('/proc/self/limits', 'utf8');
    } catch {
      return undefined;
    }
  }
  const m = /^Max open files\s+(\d+|unlimited)\s/m.exec(text);
  return m?.[1] === undefined || m[1] === 'unlimited' ? undefined : Number(m[1]);
}

export function connectionLimitsFromEnv(env: NodeJS.ProcessEnv): ConnectionLimits {
  const descriptors = openFileLimit() ?? FALLBACK_DESCRIPTORS;
  const total = Math.max(64, descriptors - RESERVED_DESCRIPTORS);
  return {
    maxPerClient: envInt(env, 'GATE402_MAX_CONNECTIONS_PER_CLIENT', 512, { min: 0, max: 1_000_000 }),
    maxTotal: envInt(env, 'GATE402_MAX_CONNECTIONS', total, { min: 0, max: 10_000_000 }),
    idleTimeoutMs: envInt(env, 'GATE402_CONNECTION_IDLE_MS', 5000, { min: 0, max: 600_000 }),
  };
}
