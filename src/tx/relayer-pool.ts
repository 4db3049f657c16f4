import { keccak256, type Address, type Chain, type LocalAccount, type PublicClient, type Transport } from 'viem';
import { callOf, type RelayerCall, type SignedTx } from './trail.ts';

export type BroadcastOutcome = 'sent' | 'known' | 'nonce_too_low' | 'underpriced' | 'rejected';

/**
 * Asked before every signature and every send: undefined to go on, else why not. A cluster node's says so once its
 * lease may be gone (see `Membership.signing`): a node that paused past its lease signs and sends nothing.
 */
export type SigningGuard = () => string | undefined;

/** Nothing was signed or sent: the pool's guard refused (the node is fenced). */
export class NotSigning extends Error {
  readonly code = 'fenced';
  constructor(why: string) {
    super(why);
    this.name = 'NotSigning';
  }
}

interface Relayer {
  account: LocalAccount;
  next: number;
  /** Nonces handed out whose transaction never reached the node: reused first, so no gap stalls the queue. */
  free: number[];
  inFlight: number;
  balance: bigint;
}

export interface RelayerPoolOptions {
  chainId: number;
  client: PublicClient<Transport, Chain>;
  accounts: LocalAccount[];
  /** Below this native balance a relayer takes no new work. */
  minBalanceWei?: bigint;
  feeTtlMs?: number;
  now?: () => number;
}

/**
 * The relayers of one chain. Each has a local nonce counter, so many settlements are in flight at once without
 * "nonce too low" races; work goes to the least busy relayer that can pay for gas.
 */
export class RelayerPool {
  readonly chainId: number;
  readonly #client: PublicClient<Transport, Chain>;
  readonly #relayers: Relayer[];
  readonly #minBalance: bigint;
  readonly #feeTtlMs: number;
  readonly #now: () => number;
  #fees: { at: number; maxFeePerGas: bigint; maxPriorityFeePerGas: bigint } | undefined;
  #reading: Promise<{ maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }> | undefined;
  #turn = 0;
  #guard: SigningGuard | undefined;

  constructor(opts: RelayerPoolOptions) {
    if (opts.accounts.length === 0) throw new Error(`no relayer accounts for chain ${opts.chainId}`);
    this.chainId = opts.chainId;
    this.#client = opts.client;
    this.#relayers = opts.accounts.map((account) => ({ account, next: 0, free: [], inFlight: 0, balance: 0n }));
    this.#minBalance = opts.minBalanceWei ?? 10n ** 15n;
    this.#feeTtlMs = opts.feeTtlMs ?? 2000;
    this.#now = opts.now ?? Date.now;
  }

  /** From now on every signature and send asks `guard` first, and throws {@link NotSigning} when it refuses. */
  guardWith(guard: SigningGuard): void {
    this.#guard = guard;
  }

  #mayAct(): void {
    const why = this.#guard?.();
    if (why !== undefined) throw new NotSigning(why);
  }

  /** Below this native balance a relayer takes no new work. */
  get minBalanceWei(): bigint {
    return this.#minBalance;
  }

  get addresses(): Address[] {
    return this.#relayers.map((r) => r.account.address);
  }

  /** How many relayers there are, and their transactions signed and not yet mined (backpressure reads it). */
  load(): { relayers: number; unminedTxs: number } {
    let unminedTxs = 0;
    for (const r of this.#relayers) unminedTxs += r.inFlight;
    return { relayers: this.#relayers.length, unminedTxs };
  }

  /** Reads every relayer's pending nonce and balance from the chain. Call after re-broadcasting restored transactions. */
  async init(): Promise<void> {
    await Promise.all(
      this.#relayers.map(async (r) => {
        r.next = await this.#client.getTransactionCount({ address: r.account.address, blockTag: 'pending' });
        r.free = [];
      }),
    );
    await this.refreshBalances();
  }

  async refreshBalances(): Promise<Array<{ address: Address; balance: bigint; inFlight: number }>> {
    await Promise.all(this.#relayers.map(async (r) => (r.balance = await this.#client.getBalance({ address: r.account.address }))));
    return this.status();
  }

  /** Each relayer's balance as last read and its transactions in flight, without asking the chain. */
  status(): Array<{ address: Address; balance: bigint; inFlight: number }> {
    return this.#relayers.map((r) => ({ address: r.account.address, balance: r.balance, inFlight: r.inFlight }));
  }

  /**
   * The fees to sign with. Past their time to live they are read again in the background while the last read still
   * serves (its maximum fee leaves room for the base fee to double); only a read five times that old is waited for.
   */
  async #currentFees(): Promise<{ maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }> {
    const age = this.#fees ? this.#now() - this.#fees.at : Infinity;
    if (age > this.#feeTtlMs * 5) await this.#readFees();
    else if (age > this.#feeTtlMs) this.#readFees().catch(() => {});
    return this.#fees ?? this.#readFees();
  }

  #readFees(): Promise<{ maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }> {
    this.#reading ??= this.#client
      .getBlock({ blockTag: 'latest' })
      .then((block) => (this.#fees = { at: this.#now(), ...this.#feesFor(block.baseFeePerGas ?? 1_000_000_000n) }))
      .finally(() => (this.#reading = undefined));
    return this.#reading;
  }

  /** Room for the base fee to double before the transaction is priced out; an L2-scale tip. */
  #feesFor(baseFee: bigint): { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint } {
    const tip = 1_000_000n; // 0.001 gwei; replacements raise it
    return { maxFeePerGas: baseFee * 2n + tip, maxPriorityFeePerGas: tip };
  }

  /** The least busy relayer that can pay for gas; among equally busy ones, each in turn (no nonce sequence favoured). */
  #pick(): Relayer {
    const best = this.#leastBusy();
    if (!best) throw new Error(`every relayer on chain ${this.chainId} is below its minimum gas balance`);
    this.#turn = (this.#relayers.indexOf(best) + 1) % this.#relayers.length;
    return best;
  }

  /** The relayer {@link #pick} would take next, without taking its turn; undefined when none can pay for gas. */
  #leastBusy(): Relayer | undefined {
    let best: Relayer | undefined;
    const n = this.#relayers.length;
    for (let i = 0; i < n; i++) {
      const r = this.#relayers[(this.#turn + i) % n] as Relayer;
      if (r.balance < this.#minBalance) continue;
      if (!best || r.inFlight < best.inFlight) best = r;
    }
    return best;
  }

  async #sign(r: Relayer, nonce: number, call: RelayerCall, fees: { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }): Promise<SignedTx> {
    const raw = await r.account.signTransaction!({
      type: 'eip1559',
      chainId: this.chainId,
      nonce,
      to: call.to,
      data: call.data,
      gas: call.gas,
      value: call.value ?? 0n,
      ...fees,
    });
    return {
      hash: keccak256(raw),
      raw,
      chainId: this.chainId,
      relayer: r.account.address,
      nonce,
      to: call.to,
      data: call.data,
      ...(call.value ? { value: call.value.toString() } : {}),
      gas: call.gas.toString(),
      maxFeePerGas: fees.maxFeePerGas.toString(),
      maxPriorityFeePerGas: fees.maxPriorityFeePerGas.toString(),
    };
  }

  /**
   * Who would send a transaction signed now, and the fees it would carry: what a settlement is simulated as. No RPC
   * while the fees are fresh (they are the ones {@link sign} uses).
   */
  async nextSender(): Promise<{ from: Address; maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }> {
    const fees = await this.#currentFees();
    return { from: (this.#leastBusy() ?? (this.#relayers[0] as Relayer)).account.address, ...fees };
  }

  /** Signs a call from the least busy relayer with the next nonce. Nothing is sent. */
  async sign(call: RelayerCall): Promise<SignedTx> {
    const fees = await this.#currentFees();
    this.#mayAct();
    const r = this.#pick();
    const nonce = r.free.length ? (r.free.sort((a, b) => a - b).shift() as number) : r.next++;
    r.inFlight += 1;
    try {
      return await this.#sign(r, nonce, call, fees);
    } catch (err) {
      r.inFlight -= 1;
      r.free.push(nonce);
      throw err;
    }
  }

  /**
   * The same nonce with fees raised by at least 25% (nodes demand 10%), to replace a transaction priced out; never
   * below what a block with `baseFee` (default: the latest) demands.
   */
  async bump(tx: SignedTx, baseFee?: bigint): Promise<SignedTx> {
    const r = this.#relayerOf(tx.relayer);
    const fresh = baseFee === undefined ? await this.#currentFees() : this.#feesFor(baseFee);
    this.#mayAct();
    this.#fees = { at: this.#now(), ...fresh };
    const raise = (old: string, floor: bigint) => {
      const bumped = (BigInt(old) * 125n) / 100n + 1n;
      return bumped > floor ? bumped : floor;
    };
    return this.#sign(r, tx.nonce, callOf(tx), {
      maxFeePerGas: raise(tx.maxFeePerGas, fresh.maxFeePerGas),
      maxPriorityFeePerGas: raise(tx.maxPriorityFeePerGas, fresh.maxPriorityFeePerGas),
    });
  }

  /** Sends a signed transaction (throws {@link NotSigning} when the guard refuses: nothing is sent). */
  async broadcast(tx: SignedTx): Promise<BroadcastOutcome> {
    this.#mayAct();
    try {
      await this.#client.request({ method: 'eth_sendRawTransaction', params: [tx.raw] });
      return 'sent';
    } catch (err) {
      const message = String((err as { details?: string }).details ?? (err as Error).message).toLowerCase();
      if (message.includes('already known') || message.includes('known transaction') || message.includes('already imported')) return 'known';
      if (message.includes('nonce too low') || message.includes('nonce is too low')) return 'nonce_too_low';
      if (message.includes('underpriced') || message.includes('fee too low')) return 'underpriced';
      return 'rejected';
    }
  }

  /** A signed transaction that never reached the node gives its nonce back, so later ones are not stuck behind it. */
  abandon(tx: SignedTx): void {
    const r = this.#relayerOf(tx.relayer);
    r.inFlight = Math.max(0, r.inFlight - 1);
    if (tx.nonce < r.next) r.free.push(tx.nonce);
  }

  /** The node says the nonce is used: re-read the relayer's pending nonce from the chain. */
  async resync(address: Address): Promise<void> {
    const r = this.#relayerOf(address);
    r.next = await this.#client.getTransactionCount({ address: r.account.address, blockTag: 'pending' });
    r.free = r.free.filter((n) => n >= r.next);
  }

  /**
   * The transaction was mined (or replaced): its relayer has one fewer in flight. One signed by a key this pool does
   * not hold (a dead cluster node's, re-sent as it was) counted against none.
   */
  done(tx: SignedTx): void {
    const r = this.#relayers.find((x) => x.account.address.toLowerCase() === tx.relayer.toLowerCase());
    if (r) r.inFlight = Math.max(0, r.inFlight - 1);
  }

  /** A restored transaction still in flight counts against its relayer. */
  adopt(tx: SignedTx): void {
    const r = this.#relayers.find((x) => x.account.address.toLowerCase() === tx.relayer.toLowerCase());
    if (r) r.inFlight += 1;
  }

  #relayerOf(address: Address): Relayer {
    const r = this.#relayers.find((x) => x.account.address.toLowerCase() === address.toLowerCase());
    if (!r) throw new Error(`${address} is not a relayer of chain ${this.chainId}`);
    return r;
  }
}
