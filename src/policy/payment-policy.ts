import { schemeNamed } from '../schemes/registry.ts';
import type { SchemeName } from '../schemes/scheme.ts';
import { fail, pass, type CheckResult } from '../verify/checks.ts';
import { describeFloor, type Floor, type PriceFloorSource } from './price-floor.ts';
import { unchargedText } from '../protocol/result.ts';
import { GatewayReason } from '../verify/reasons.ts';

/**
 * Which payments are worth our gas: pure checks on the terms a payment was signed for, run before any chain is asked
 * anything. A relayer pays the gas of every settlement, so a payment that moves nothing of value (zero, below the
 * operator's minimum, to its own payer, or into one of our own relayers or known contracts) is refused.
 */
export interface PaymentPolicy {
  /** Lower-case addresses never paid: our relayers and every contract the networks name. */
  refusedPayees: ReadonlySet<string>;
  /** When set, the only payees served (lower-case). */
  payeeAllowlist?: ReadonlySet<string>;
  /** The smallest amount settled, in the token's base units; at least 1. */
  minAmount: bigint;
  /** The live price floor per network (see `price-floor.ts`): a payment below it would not pay for its gas. */
  floor?: PriceFloorSource;
}

export interface PaymentTerms {
  /** The payment's scheme, whose reason code an amount too small is refused with. */
  kind: SchemeName;
  payer: string;
  payee: string;
  amount: bigint;
  /** The CAIP-2 network it settles on: the price floor is per network. */
  network?: string;
}

export function checkPaymentPolicy(policy: PaymentPolicy, terms: PaymentTerms): CheckResult {
  const min = policy.minAmount > 0n ? policy.minAmount : 1n;
  if (terms.amount < min) {
    const reason = schemeNamed(terms.kind).reasons.amountMismatch;
    return fail(reason, terms.amount === 0n ? 'a payment of zero is not settled' : `amount ${terms.amount} is below the ${min} this facilitator settles at least`);
  }
  const payer = terms.payer.toLowerCase();
  const payee = terms.payee.toLowerCase();
  if (payer === payee) return fail(GatewayReason.payerIsPayee, 'the payer pays itself: nothing would move but our gas');
  if (policy.refusedPayees.has(payee)) return fail(GatewayReason.payeeRefused, `${terms.payee} is one of this facilitator's relayers or contracts: it is never paid`);
  if (policy.payeeAllowlist && !policy.payeeAllowlist.has(payee)) return fail(GatewayReason.payeeRefused, `${terms.payee} is not a payee this facilitator settles for`);
  return pass;
}

/** An amount below the network's live price floor is refused: its settlement's gas would cost us more than it moves. */
export function checkPriceFloor(terms: Pick<PaymentTerms, 'amount'>, floor: Floor | undefined): CheckResult {
  if (floor === undefined || terms.amount >= floor.atoms) return pass;
  return fail(GatewayReason.belowPriceFloor, unchargedText(`amount ${terms.amount} is below ${describeFloor(floor)}`));
}

/**
 * {@link checkPaymentPolicy}, then (for a payment that passed it, so a refusal on its terms never costs an RPC) the
 * price floor of its network, whose gas price may be read from the chain (cached; a failed read never throws here: the
 * last price read holds, and without one only the static minimum does).
 */
export async function checkPaymentTerms(policy: PaymentPolicy, terms: PaymentTerms): Promise<CheckResult> {
  const fixed = checkPaymentPolicy(policy, terms);
  if (!fixed.ok || !policy.floor || terms.network === undefined) return fixed;
  const floor = await policy.floor.floorOn(terms.network).catch(() => undefined);
  const checked = checkPriceFloor(terms, floor);
  if (!checked.ok) policy.floor.refused?.(terms.network);
  return checked;
}

/** The policy without its price floor: for checks that must cost no RPC (the facilitator's door, before its quota). */
export function withoutFloor(policy: PaymentPolicy): PaymentPolicy {
  const { floor: _floor, ...rest } = policy;
  return rest;
}

/** Two policies in one: refused by either is refused, the higher minimum holds, and an allowlist narrows. */
export function stricterPolicy(base: PaymentPolicy, extra: Partial<PaymentPolicy>): PaymentPolicy {
  return {
    refusedPayees: extra.refusedPayees ? new Set([...base.refusedPayees, ...extra.refusedPayees]) : base.refusedPayees,
    ...((extra.payeeAllowlist ?? base.payeeAllowlist) ? { payeeAllowlist: extra.payeeAllowlist ?? base.payeeAllowlist } : {}),
    minAmount: (extra.minAmount ?? 0n) > base.minAmount ? (extra.minAmount as bigint) : base.minAmount,
    ...((extra.floor ?? base.floor) ? { floor: extra.floor ?? base.floor } : {}),
  };
}
