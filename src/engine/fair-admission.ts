import { batchedBalanceOf } from '../chain/balance-batcher.ts';
import type { BlockWatcher } from '../tx/block-watcher.ts';
import type { Logger } from '../log/logger.ts';
import { unchargedText } from '../protocol/result.ts';
import type { SettleResponse, VerifyRequest } from '../protocol/x402/types.ts';
import { SCHEMES, schemeOfPayload } from '../schemes/registry.ts';
import { PayerBalances, type BalanceChain } from './payer-balances.ts';
import { PayerReservations, type PayerRef, type Reservation } from './payer-reservations.ts';
import { SETTLEMENT_SHED, type Shed } from '../ports/settlement.ts';
import { checkPayment, type Verdict, type VerifyDeps } from './verify-payment.ts';
import type { EngineMetrics } from './engine-options.ts';

export interface FairAdmissionDeps extends VerifyDeps {
  watcher(caip2: string): BlockWatcher;
  /** How long a chain head read is taken as the head (the engine's poll interval). */
  pollMs: number;
  /** Off: payers are not held to their balance (the batch simulation still drops an overdraft). */
  reserveBalances?: boolean;
  log: Logger;
  metrics: EngineMetrics;
}

/** How old a head may be for a refusal on a balance (a payer funded since is read again at the newer head). */
const RECENT_HEAD_MS = 50;

/** Refusals of a payment whose signature checked but whose payer cannot pay it. */
const INSUFFICIENT_BALANCE = new Set<string>(SCHEMES.map((scheme) => scheme.reasons.insufficientBalance));

/** Final payment states in which its transfer did not happen (its reservation goes back at once). */
const NOTHING_MOVED = new Set(['failed', 'rejected', 'duplicate']);

/**
 * Fair admission of new payments, before they take a place in their network's settlement queue: a payer may have in
 * flight at most what its token balance covers (read once per block per payer, through the block watcher's head;
 * reserved per admitted payment until it ends: see `payer-reservations.ts`), so one wallet signing payments with fresh
 * nonces gets no more places than its money pays for, and a wallet with nothing gets none.
 *
 * Only a payment whose signature is the payer's reserves anything (else anyone could hold a victim's balance). A
 * payment whose payer's balance, as already read at the current head, does not cover it beside the payer's payments
 * in flight is refused before even its signature is checked, once a signature of that payer was checked before: the
 * balance is public, and a flood from one wallet then costs one balance read per block and no signature check.
 *
 * When the balance or the head cannot be read, the payment is admitted as before (the simulation before any send
 * still refuses an overdraft): an RPC hiccup must not turn honest buyers away.
 */
export class FairAdmission {
  readonly #deps: FairAdmissionDeps;
  readonly #balances: PayerBalances;
  readonly #reservations = new PayerReservations();
  /** The last admission in line per payer whose balance is not known yet (see {@link firstTurn}). */
  readonly #firstTurns = new Map<string, Promise<void>>();

  constructor(deps: FairAdmissionDeps, clock: () => number) {
    this.#deps = deps;
    const chains = new Map<string, BalanceChain>();
    this.#balances = new PayerBalances({
      headTtlMs: deps.pollMs,
      clock,
      chain: (network) => {
        let chain = chains.get(network);
        if (chain === undefined) {
          const client = deps.inspector(network).client;
          chain = {
            blockNumber: () => client.getBlockNumber({ cacheTime: 0 }),
            watchedHead: () => deps.watcher(network).head,
            balanceOf: batchedBalanceOf(client, deps.networks.get(network)?.multicall),
          };
          chains.set(network, chain);
        }
        return chain;
      },
    });
  }

  /**
   * Waits for the turn of a payment whose payer's balance is not known yet: one such admission per claimed payer at a
   * time, outside the settlement queue. Its balance is read by that admission (once its signature checks), so the
   * payer's other payments that waited meet {@link early} with a known balance: a wallet that floods with fresh nonces
   * holds at most one queue place until its balance is known, and none after it if the balance covers nothing.
   * Resolves to undefined when no turn is needed (a known payer, or one not held to its balance); else, once waited,
   * to the release of the turn, which the caller calls once it took its place or was refused. A payer read while this
   * admission waited needs no turn any more: the turn is passed on at once, and the release returned does nothing,
   * but the caller must still ask {@link early} again (the balance read meanwhile may cover nothing). Bounded: one
   * entry per payer with an admission running.
   */
  async firstTurn(request: VerifyRequest): Promise<(() => void) | undefined> {
    const t = this.#transferOf(request);
    if (t === undefined || this.#balances.known(t.ref)) return undefined;
    const key = `${t.ref.network}|${t.ref.token.toLowerCase()}|${t.ref.payer.toLowerCase()}`;
    const previous = this.#firstTurns.get(key);
    let release!: () => void;
    const mine = new Promise<void>((resolve) => {
      release = resolve;
    });
    const tail = (previous ?? Promise.resolve()).then(() => mine);
    this.#firstTurns.set(key, tail);
    const done = () => {
      release();
      if (this.#firstTurns.get(key) === tail) this.#firstTurns.delete(key);
    };
    if (previous === undefined) return done;
    await previous;
    // Read meanwhile (the admission before this one vouched for the payer): no turn needed, and the next goes at once;
    // the caller asks `early` again with the balance now known.
    if (this.#balances.known(t.ref)) {
      done();
      return () => {};
    }
    return done;
  }

  /** Payers with a reservation or a hold now (bounded by the payments in flight and a sweep). */
  get payersHeld(): number {
    return this.#reservations.size;
  }

  /**
   * The refusal of a payment whose payer's balance at the current head does not cover it beside the payer's payments
   * in flight; undefined when that is not known to be so. Read (once per block) only for a payer read before.
   */
  async early(request: VerifyRequest): Promise<SettleResponse | undefined> {
    const t = this.#transferOf(request);
    if (t === undefined) return undefined;
    try {
      // Only a payer whose balance was read before (after a signature of its checked) is read here, before its
      // signature: naming payers nobody vouched for must not buy balance reads.
      if (!this.#balances.known(t.ref)) return undefined;
      const head = await this.#balances.head(t.ref.network);
      const balance = await (this.#balances.cached(t.ref, head) ?? this.#balances.balance(t.ref, head));
      if (this.#reservations.available(t.ref, balance) >= t.value) return undefined;
      // Refused only on a head read lately: a payer funded in the last block is not refused on the block before.
      const recent = await this.#balances.head(t.ref.network, RECENT_HEAD_MS);
      if (recent > head && this.#reservations.available(t.ref, await this.#balances.balance(t.ref, recent)) >= t.value) return undefined;
    } catch {
      return undefined;
    }
    return this.#overBalance(request, t.ref.payer);
  }

  /**
   * Checks the payment (its verdict goes on to its actor) and, if it is the payer's, reserves its amount from the
   * payer's balance at the current head; refused (nothing charged) when the balance does not cover it.
   */
  async admit(request: VerifyRequest): Promise<{ refused?: SettleResponse; verdict?: Verdict; reservation?: Reservation }> {
    const t = this.#transferOf(request);
    if (t === undefined) return {};
    let verdict: Verdict;
    try {
      verdict = await checkPayment(this.#deps, request);
    } catch {
      return {}; // its actor checks again, and answers whatever went wrong
    }
    if (!verdict.ok) {
      // Refused for its balance, its signature checked first: the payer is vouched for, so its balance is read now and
      // its next payments meet `early` (a wallet with nothing then costs one balance read per block, no signature check).
      if (INSUFFICIENT_BALANCE.has(verdict.error.code)) await this.#readVouched(t.ref);
      return { verdict };
    }
    const ref: PayerRef = { ...t.ref, payer: verdict.value.payer };
    let reservation: Reservation | undefined;
    try {
      const head = await this.#balances.head(ref.network);
      reservation = this.#reservations.reserve(ref, t.value, await this.#balances.balance(ref, head));
      if (reservation === undefined) {
        // Refused only on the head as it is now: the head kept for `pollMs` may predate the payer's funding.
        const now = await this.#balances.head(ref.network, 0);
        if (now > head) reservation = this.#reservations.reserve(ref, t.value, await this.#balances.balance(ref, now));
      }
    } catch (err) {
      this.#deps.log.warn("could not read a payer's balance; admitted without a reservation", { network: ref.network, payer: ref.payer, error: err });
      return { verdict };
    }
    if (reservation === undefined) return { refused: this.#overBalance(request, verdict.value.payer), verdict };
    return { verdict, reservation };
  }

  async #readVouched(ref: PayerRef): Promise<void> {
    try {
      await this.#balances.balance(ref, await this.#balances.head(ref.network));
    } catch {
      // unknown it stays: its next payment is checked in full
    }
  }

  /** A payment ended in `state`: its reservation goes back, held until the chain shows the transfer if one was made. */
  release(network: string, reservation: Reservation, state: string): void {
    reservation.release(NOTHING_MOVED.has(state) ? undefined : (this.#balances.knownHead(network) ?? 0n));
  }

  /** The settle answer of a payment turned away for backpressure at the queue's door (counted). */
  shed(network: string, shed: Shed): SettleResponse {
    this.#deps.metrics.paymentShed?.(network, shed.reason);
    return {
      success: false,
      errorReason: SETTLEMENT_SHED,
      errorMessage: unchargedText(`settlement is behind right now (${shed.reason})`),
      transaction: '',
      network: network as SettleResponse['network'],
      extra: { reason: shed.reason, retryAfterSeconds: shed.retryAfterSeconds },
    };
  }

  #overBalance(request: VerifyRequest, payer: string): SettleResponse {
    const network = request.paymentRequirements.network;
    this.#deps.metrics.paymentShed?.(network, 'payer_over_balance');
    const scheme = schemeOfPayload(request.paymentPayload.payload);
    return {
      success: false,
      errorReason: scheme.reasons.insufficientBalance,
      errorMessage: unchargedText("the payer's balance does not cover this payment beside its payments in flight"),
      transaction: '',
      network: network as SettleResponse['network'],
      payer,
    };
  }

  /** Whose balance the payment draws on (as the payload claims it) and how much; undefined when not held to it. */
  #transferOf(request: VerifyRequest): { ref: PayerRef; value: bigint } | undefined {
    if (this.#deps.reserveBalances === false) return undefined;
    const network = request.paymentRequirements.network;
    if (!this.#deps.networks.has(network)) return undefined;
    try {
      const t = schemeOfPayload(request.paymentPayload.payload).expectedTransfer(request);
      return { ref: { network, token: t.token, payer: t.from }, value: t.value };
    } catch {
      return undefined;
    }
  }
}
