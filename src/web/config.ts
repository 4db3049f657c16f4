import { ConfigError, envBool, envString } from '../config/env.ts';

export interface WebConfig {
  /** Serve the pages (`/`, `/marketplace`, `/merchant`) on the gateway. */
  enabled: boolean;
  /**
   * The stock chain's RPC URL a wallet is offered (`wallet_addEthereumChain`) when it does not know the chain yet;
   * on the devnet, the chain's own. Without one, the page asks the person to add the chain themselves.
   */
  walletRpcUrl?: string;
}

export function webConfigFromEnv(env: NodeJS.ProcessEnv, defaults: { walletRpcUrl?: string } = {}): WebConfig {
  const rpc = envString(env, 'GATE402_WEB_WALLET_RPC_URL', defaults.walletRpcUrl ?? '');
  if (rpc && !/^https?:\/\/[^\s"'<>]+$/.test(rpc)) throw new ConfigError(`GATE402_WEB_WALLET_RPC_URL must be an http(s) URL, got '${rpc}'`);
  return { enabled: envBool(env, 'GATE402_WEB_ENABLED', true), ...(rpc ? { walletRpcUrl: rpc } : {}) };
}
