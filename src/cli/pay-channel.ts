/**
 * `gate402 pay --scheme batch-settlement`: the official `@x402/evm` batch-settlement client, unchanged, with what a
 * command run once per call needs around it: the channel state it mirrors from the server's answers kept in a file
 * (so the next call signs the next voucher instead of opening another channel or paying a corrective round trip),
 * and the chain read through the buyer's RPC. The channel's salt is the client's default: the same buyer, payee and
 * terms always name the same channel.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { BatchSettlementEvmScheme, readChannelBalanceAndTotalClaimed } from '@x402/evm/batch-settlement/client';
import { createPublicClient, http, type LocalAccount } from 'viem';

/** The official client's per-channel context (`ClientChannelStorage` values), as the file holds it. */
type ChannelContext = Record<string, string | undefined>;

/** A channel's balance and claimed total as the settlement contract holds them. */
export type ReadChannel = (channelId: string) => Promise<readonly [balance: bigint, totalClaimed: bigint]>;

/**
 * The official client's `ClientChannelStorage` in one JSON file (channel id -> context). Each change rewrites the file
 * through a temporary one and a rename, so a killed call leaves the old state or the new, never half of either.
 *
 * A channel the file holds with a balance but the chain has never seen (its balance and claimed total both zero on
 * chain) is forgotten on its first read in this process, so the client deposits again instead of sending vouchers
 * for it that every server refuses (`channel_not_found`): what a devnet restart does (new chains, the same file), or
 * a file carried to another chain.
 */
export class FileChannelStorage {
  readonly #path: string;
  readonly #readChannel: ReadChannel | undefined;
  readonly #checked = new Set<string>();

  constructor(path: string, readChannel?: ReadChannel) {
    this.#path = path;
    this.#readChannel = readChannel;
  }

  #all(): Record<string, ChannelContext> {
    try {
      const parsed: unknown = JSON.parse(readFileSync(this.#path, 'utf8'));
      return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, ChannelContext>) : {};
    } catch {
      return {};
    }
  }

  #write(all: Record<string, ChannelContext>): void {
    mkdirSync(dirname(this.#path), { recursive: true });
    const temp = `${this.#path}.${process.pid}.tmp`;
    writeFileSync(temp, `${JSON.stringify(all, null, 2)}\n`, { mode: 0o600 });
    renameSync(temp, this.#path);
  }

  async get(key: string): Promise<ChannelContext | undefined> {
    const id = key.toLowerCase();
    const context = this.#all()[id];
    if (context === undefined || this.#readChannel === undefined || this.#checked.has(id)) return context;
    this.#checked.add(id);
    if (BigInt(context.balance ?? '0') === 0n) return context;
    const [balance, totalClaimed] = await this.#readChannel(id);
    if (balance !== 0n || totalClaimed !== 0n) return context;
    await this.delete(id);
    return undefined;
  }

  async set(key: string, context: ChannelContext): Promise<void> {
    const all = this.#all();
    all[key.toLowerCase()] = context;
    this.#write(all);
  }

  async delete(key: string): Promise<void> {
    const all = this.#all();
    delete all[key.toLowerCase()];
    this.#write(all);
  }
}

export interface ChannelClientOptions {
  account: LocalAccount;
  /** The chain's RPC: the client reads channel balances there when its file does not know a channel. */
  rpcUrl: string;
  /** Where the channels' state is kept between calls. */
  stateFile: string;
  /** A first deposit covers this many requests (the official client's default when omitted). */
  depositMultiplier?: number;
}

/** The official batch-settlement client for `account`, reading the chain at `rpcUrl`, its state in `stateFile`. */
export function channelClient(opts: ChannelClientOptions): BatchSettlementEvmScheme {
  const pub = createPublicClient({ transport: http(opts.rpcUrl, { timeout: 15_000, retryCount: 1 }) });
  const signer = {
    address: opts.account.address,
    signTypedData: (message: Parameters<LocalAccount['signTypedData']>[0]) => opts.account.signTypedData(message),
    readContract: (args: Parameters<typeof pub.readContract>[0]) => pub.readContract(args),
  };
  const readChannel: ReadChannel = (channelId) => readChannelBalanceAndTotalClaimed(signer as never, channelId as `0x${string}`);
  return new BatchSettlementEvmScheme(signer as never, {
    storage: new FileChannelStorage(opts.stateFile, readChannel),
    rpcUrl: opts.rpcUrl,
    ...(opts.depositMultiplier !== undefined ? { depositPolicy: { depositMultiplier: opts.depositMultiplier } } : {}),
  });
}
