/**
 * Fair admission per payer: a payer may have in flight at most what its token balance covers. Its balance is read at
 * a block (once per block, see `payer-balances.ts`); each admitted payment reserves its amount until it ends. A payment
 * that failed gives its amount back at once. One that settled (or may have) keeps it held until a balance read at a
 * block that already shows the transfer: until then the balance read before it still counts that money.
 *
 * Pure: blocks and balances come in as parameters, so that tests drive it with logical blocks.
 */

/** A payer's token balance as read at one block. */
export interface Balance {
  block: bigint;
  value: bigint;
}

/** One admitted payment's hold on its payer's balance. `release` is idempotent. */
export interface Reservation {
  /**
   * The payment ended. `spentBy`: the head block by which its transfer is on chain, when its money moved (or may have);
   * undefined when nothing moved.
   */
  release(spentBy?: bigint): void;
}

/** Whose balance: a payer's, of one token, on one network. */
export interface PayerRef {
  network: string;
  token: string;
  payer: string;
}

const keyOf = (p: PayerRef): string => `${p.network}|${p.token.toLowerCase()}|${p.payer.toLowerCase()}`;

interface PayerHolds {
  network: string;
  /** Sum of the amounts of payments admitted and not yet ended. */
  reserved: bigint;
  /** Amounts of ended payments whose transfer a balance read before `untilBlock` does not show yet. */
  spent: Array<{ value: bigint; untilBlock: bigint }>;
}

/** How many payers with holds are kept before holds that every later balance read shows are swept. */
const SWEEP_AT = 4096;

export class PayerReservations {
  readonly #payers = new Map<string, PayerHolds>();
  /** The highest block a balance was read at, per network (holds every later read shows are swept). */
  readonly #highest = new Map<string, bigint>();
  #sweepAt = SWEEP_AT;

  /** Payers with something reserved or held. */
  get size(): number {
    return this.#payers.size;
  }

  /** What `balance` leaves for new payments of `payer` once its payments in flight and not yet visible are counted. */
  available(payer: PayerRef, balance: Balance): bigint {
    if (balance.block > (this.#highest.get(payer.network) ?? -1n)) this.#highest.set(payer.network, balance.block);
    const key = keyOf(payer);
    const holds = this.#payers.get(key);
    if (holds === undefined) return balance.value;
    // Holds that this balance already shows are done with.
    if (holds.spent.some((s) => balance.block >= s.untilBlock)) {
      holds.spent = holds.spent.filter((s) => balance.block < s.untilBlock);
      if (holds.reserved === 0n && holds.spent.length === 0) this.#payers.delete(key);
    }
    let held = holds.reserved;
    for (const s of holds.spent) held += s.value;
    return balance.value - held;
  }

  /** Reserves `value` for a new payment of `payer` when `balance` covers it with the rest; undefined when it does not. */
  reserve(payer: PayerRef, value: bigint, balance: Balance): Reservation | undefined {
    if (value <= 0n || this.available(payer, balance) < value) return undefined;
    const key = keyOf(payer);
    const holds = this.#holds(key, payer.network);
    holds.reserved += value;
    const readAt = balance.block;
    let released = false;
    return {
      release: (spentBy) => {
        if (released) return;
        released = true;
        holds.reserved -= value;
        // A read at the block it was reserved at cannot show the transfer, whatever the head says.
        if (spentBy !== undefined) holds.spent.push({ value, untilBlock: spentBy > readAt ? spentBy : readAt + 1n });
        if (holds.reserved === 0n && holds.spent.length === 0 && this.#payers.get(key) === holds) this.#payers.delete(key);
        this.#sweep();
      },
    };
  }

  #holds(key: string, network: string): PayerHolds {
    let holds = this.#payers.get(key);
    if (holds === undefined) {
      holds = { network, reserved: 0n, spent: [] };
      this.#payers.set(key, holds);
    }
    return holds;
  }

  /** Once many payers have holds: drops those that no payment reserves and whose transfers every new read shows. */
  #sweep(): void {
    if (this.#payers.size < this.#sweepAt) return;
    for (const [key, holds] of this.#payers) {
      const highest = this.#highest.get(holds.network) ?? -1n;
      holds.spent = holds.spent.filter((s) => highest < s.untilBlock);
      if (holds.reserved === 0n && holds.spent.length === 0) this.#payers.delete(key);
    }
    this.#sweepAt = Math.max(SWEEP_AT, this.#payers.size * 2);
  }
}
