import { ConfigError, envInt, envString } from '../config/env.ts';
import type { StoreLocation } from './open-store.ts';
import type { PostgresStoreOptions } from './postgres/open-postgres-store.ts';

/**
 * Where the records go, from the environment:
 *
 * | variable | default | meaning |
 * | --- | --- | --- |
 * | `GATE402_STORE_URL` | (none: LMDB in the data directory) | `postgres://user:password@host:port/database`: PostgreSQL, shared by every node given it |
 * | `GATE402_STORE_POOL_SIZE` | `10` | connections to PostgreSQL this process keeps at most |
 * | `GATE402_STORE_CONNECT_TIMEOUT_MS` | `5000` | how long connecting, or waiting for a free connection, may take |
 * | `GATE402_STORE_STATEMENT_TIMEOUT_MS` | `5000` | how long one statement may run |
 */
export interface StoreConfig {
  location: StoreLocation;
  postgres: Required<Pick<PostgresStoreOptions, 'poolSize' | 'connectTimeoutMs' | 'statementTimeoutMs'>>;
}

export function storeConfigFromEnv(env: NodeJS.ProcessEnv, dataDir: string): StoreConfig {
  const url = envString(env, 'GATE402_STORE_URL', '');
  if (url && !/^postgres(ql)?:\/\/[^\s]+$/.test(url)) throw new ConfigError('GATE402_STORE_URL must be a postgres:// (or postgresql://) URL');
  return {
    location: { dataDir, ...(url ? { url } : {}) },
    postgres: {
      poolSize: envInt(env, 'GATE402_STORE_POOL_SIZE', 10, { min: 1, max: 1000 }),
      connectTimeoutMs: envInt(env, 'GATE402_STORE_CONNECT_TIMEOUT_MS', 5000, { min: 100, max: 120_000 }),
      statementTimeoutMs: envInt(env, 'GATE402_STORE_STATEMENT_TIMEOUT_MS', 5000, { min: 100, max: 600_000 }),
    },
  };
}
