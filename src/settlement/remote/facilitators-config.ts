/**
 * Which remote x402 facilitators settle which network, in order of preference: `GATE402_FACILITATORS`.
 *
 *     GATE402_FACILITATORS="eip155:8453=https://f1.example,https://f2.example; *=https://f3.example"
 *
 * Entries are separated by `;` (or new lines); each is a configured network (CAIP-2) or `*` (every configured network
 * without an entry of its own), `=`, and one or more facilitator base URLs separated by `,`, the preferred first. A URL
 * is `http(s)://host[:port][/path]`, without credentials, query or fragment; `/settle` and `/verify` are added to it.
 * A network with no entry is settled by the gateway's own engine. Every mistake stops the start with its reason.
 */
import { ConfigError, envInt, envString } from '../../config/env.ts';
import { DEFAULT_REMOTE_ADMISSION, type RemoteAdmissionLimits } from './remote-admission.ts';

/** One remote facilitator: its base URL (no trailing slash), and the name its metrics and logs carry (host and path). */
export interface FacilitatorEndpoint {
  url: string;
  name: string;
}

export interface RemoteSettlementConfig {
  /** Per network, its facilitators in order of preference. Only networks listed here settle remotely. */
  networks: Map<string, FacilitatorEndpoint[]>;
  /** The longest one call to a facilitator may take, from connecting to its whole answer read. */
  timeoutMs: number;
  /** How long connecting may take (a refused or timed-out connection sent nothing: the next is tried at once). */
  connectTimeoutMs: number;
  /** Consecutive failed payments (each counted once) that open a facilitator's breaker, and for how long. */
  breaker: { threshold: number; openMs: number };
  /** Remote settlements in flight per network and per client: a new payment past either is turned away (503). */
  admission: RemoteAdmissionLimits;
}

const MAX_FACILITATORS_PER_NETWORK = 8;

/** The parsed `GATE402_FACILITATORS` (empty when unset), checked against the configured `networks`. */
export function parseFacilitators(text: string, networks: readonly string[], name = 'GATE402_FACILITATORS'): Map<string, FacilitatorEndpoint[]> {
  const byNetwork = new Map<string, FacilitatorEndpoint[]>();
  let wildcard: FacilitatorEndpoint[] | undefined;
  const entries = text
    .split(/[;\n]/)
    .map((e) => e.trim())
    .filter(Boolean);
  for (const entry of entries) {
    const eq = entry.indexOf('=');
    if (eq <= 0) throw new ConfigError(`${name}: '${entry}' is not <network>=<url>[,<url>...] (e.g. eip155:8453=https://f1.example,https://f2.example)`);
    const network = entry.slice(0, eq).trim();
    if (network !== '*' && !networks.includes(network)) {
      throw new ConfigError(`${name}: network '${network}' is not configured here (configured: ${networks.join(', ') || 'none'}; or '*' for all)`);
    }
    if ((network === '*' && wildcard) || byNetwork.has(network)) throw new ConfigError(`${name}: network '${network}' is listed twice`);
    const urls = entry
      .slice(eq + 1)
      .split(',')
      .map((u) => u.trim())
      .filter(Boolean);
    if (urls.length === 0) throw new ConfigError(`${name}: network '${network}' names no facilitator`);
    if (urls.length > MAX_FACILITATORS_PER_NETWORK) throw new ConfigError(`${name}: network '${network}' names ${urls.length} facilitators, at most ${MAX_FACILITATORS_PER_NETWORK}`);
    const endpoints = urls.map((u) => endpointOf(u, name));
    const seen = new Set<string>();
    for (const e of endpoints) {
      if (seen.has(e.url)) throw new ConfigError(`${name}: network '${network}' names ${e.url} twice`);
      seen.add(e.url);
    }
    if (network === '*') wildcard = endpoints;
    else byNetwork.set(network, endpoints);
  }
  if (wildcard) for (const n of networks) if (!byNetwork.has(n)) byNetwork.set(n, wildcard);
  return byNetwork;
}

function endpointOf(text: string, name: string): FacilitatorEndpoint {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ConfigError(`${name}: '${text}' is not an absolute URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ConfigError(`${name}: '${text}' must be http or https`);
  if (url.username || url.password) throw new ConfigError(`${name}: '${url.host}' must not carry credentials in its URL`);
  if (url.search || url.hash) throw new ConfigError(`${name}: '${text}' must have no query or fragment (/settle and /verify are added to it)`);
  const path = url.pathname.replace(/\/+$/, '');
  return { url: `${url.origin}${path}`, name: `${url.host}${path}` };
}

/** The remote settlement settings, or undefined when `GATE402_FACILITATORS` is unset (every network on the engine). */
export function remoteSettlementConfigFromEnv(env: NodeJS.ProcessEnv, networks: readonly string[]): RemoteSettlementConfig | undefined {
  const parsed = parseFacilitators(envString(env, 'GATE402_FACILITATORS', ''), networks);
  if (parsed.size === 0) return undefined;
  const timeoutMs = envInt(env, 'GATE402_FACILITATORS_TIMEOUT_MS', 30_000, { min: 100, max: 600_000 });
  return {
    networks: parsed,
    timeoutMs,
    connectTimeoutMs: Math.min(timeoutMs, envInt(env, 'GATE402_FACILITATORS_CONNECT_TIMEOUT_MS', 3000, { min: 50, max: 60_000 })),
    breaker: {
      threshold: envInt(env, 'GATE402_FACILITATORS_BREAKER_THRESHOLD', 3, { min: 1, max: 1000 }),
      openMs: envInt(env, 'GATE402_FACILITATORS_BREAKER_OPEN_MS', 30_000, { min: 100, max: 3_600_000 }),
    },
    admission: remoteAdmissionFromEnv(env),
  };
}

/** `GATE402_SETTLE_REMOTE_MAX` and `GATE402_SETTLE_REMOTE_CLIENT_MAX`: remote settlements in flight per network, and per client. */
export function remoteAdmissionFromEnv(env: NodeJS.ProcessEnv): RemoteAdmissionLimits {
  const maxInFlight = envInt(env, 'GATE402_SETTLE_REMOTE_MAX', DEFAULT_REMOTE_ADMISSION.maxInFlight, { min: 1, max: 100_000 });
  const clientMaxInFlight = envInt(env, 'GATE402_SETTLE_REMOTE_CLIENT_MAX', Math.min(maxInFlight, Math.max(2, Math.floor(maxInFlight / 8))), { min: 1, max: 100_000 });
  return { maxInFlight, clientMaxInFlight, retryAfterSeconds: DEFAULT_REMOTE_ADMISSION.retryAfterSeconds };
}
