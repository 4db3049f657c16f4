import { schemeNamed } from '../schemes/registry.ts';
import type { SchemeName } from '../schemes/scheme.ts';
import { fail, pass, type CheckResult } from './checks.ts';
import { GatewayReason } from './reasons.ts';

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
}

export interface PaymentTerms {
  /** The payment's scheme, whose reason code an amount too small is refused with. */
  kind: SchemeName;
  payer: string;
  payee: string;
  amount: bigint;
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

/** Two policies in one: refused by either is refused, the higher minimum holds, and an allowlist narrows. */
export function stricterPolicy(base: PaymentPolicy, extra: Partial<PaymentPolicy>): PaymentPolicy {
  return {
    refusedPayees: extra.refusedPayees ? new Set([...base.refusedPayees, ...extra.refusedPayees]) : base.refusedPayees,
    ...((extra.payeeAllowlist ?? base.payeeAllowlist) ? { payeeAllowlist: extra.payeeAllowlist ?? base.payeeAllowlist } : {}),
    minAmount: (extra.minAmount ?? 0n) > base.minAmount ? (extra.minAmount as bigint) : base.minAmount,
  };
}
