/**
 * Off the devnet, nothing may come from anvil's public test mnemonic: every key anyone can derive from it is public.
 * Before anything starts (no store opened, no chain asked, no port bound), the service refuses to run without its
 * own relayer keys, and, for the parts that run, its gateway key, an MPP secret of at least 32 bytes and the stock
 * desk's key; a key the caller knows to be public (`isPublicKey`: the command line passes the test mnemonic's first
 * keys) is refused as if it were missing.
 */
import { CAIP2 } from '../chain/canonical.ts';
import type { NetworkRegistry } from '../chain/networks.ts';
import { ConfigError, envBool, envString } from './env.ts';

export const MIN_MPP_SECRET_BYTES = 32;

export interface Parts {
  facilitator: boolean;
  gateway: boolean;
}

/** Throws a ConfigError naming the first missing or public setting. */
export function requireProductionSecrets(env: NodeJS.ProcessEnv, parts: Parts, networks: NetworkRegistry, isPublicKey: (key: string) => boolean): void {
  const key = (name: string, what: string, list = false): void => {
    const value = envString(env, name, '');
    if (!value) throw new ConfigError(`${name} is required off the devnet (${what}); keys of the public test mnemonic are used only on the devnet`);
    for (const k of list
      ? value
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean)
      : [value]) {
      if (isPublicKey(k)) throw new ConfigError(`${name} holds a key of the public test mnemonic, which anyone can derive: give ${what} a key of your own`);
    }
  };

  key('GATE402_RELAYER_KEYS', 'the relayers that pay settlement gas', true);
  if (!parts.gateway) return;
  key('GATE402_GATEWAY_KEY', 'the key that signs MPP receipts');
  // Payment channels' receiver authorizer: optional (required only once a route takes channels), never a public key.
  if (envString(env, 'GATE402_CHANNEL_AUTHORIZER_KEY', '')) key('GATE402_CHANNEL_AUTHORIZER_KEY', "the payment channels' receiver authorizer");
  const secret = env.GATE402_MPP_SECRET?.trim() ?? '';
  if (Buffer.byteLength(secret, 'utf8') < MIN_MPP_SECRET_BYTES) {
    throw new ConfigError(`GATE402_MPP_SECRET is required off the devnet: at least ${MIN_MPP_SECRET_BYTES} bytes of secret (it binds MPP challenges and stock quotes)`);
  }
  const stock = networks.find(CAIP2.stockChain);
  const stockRuns = envBool(env, 'GATE402_STOCK_ENABLED', true) && Boolean(stock?.stocks?.length && stock.uniswap);
  if (stockRuns) key('GATE402_STOCK_DESK_KEY', 'the stock desk, which swaps, refunds and sponsors gas');
}
