/**
 * Who the open facilitator settles for, beyond what the engine refuses anyway: the operator's payee allowlist and
 * minimum amount, payees that belong to this deployment (the stock desk), and a quota per payer beside the per-IP
 * rate limit. Judged before any chain is asked anything.
 *
 * | variable | default | meaning |
 * |---|---|---|
 * | `GATE402_FACILITATOR_PAYER_RATE_CAPACITY` | `20` | verify + settle burst per payer |
 * | `GATE402_FACILITATOR_PAYER_RATE_PER_SECOND` | `2` | per-payer refill |
 * | `GATE402_FACILITATOR_PAYEE_ALLOWLIST` | (any payee) | comma-separated addresses: the only payees settled |
 * | `GATE402_FACILITATOR_MIN_AMOUNT` | `floor` | smallest amount settled: `floor`, the network's live price floor (see `policy/price-floor.ts`), or a whole number of the token's base units, which raises the minimum above the floor (it never lowers it) |
 *
 * The price floor is the engine's, so it holds at the facilitator's /verify and /settle as on the gateway's paid
 * route; the door here checks it only after the payer's quota (reading the gas price may cost an RPC call, and a
 * payer over its quota must cost none).
 */
import type { Address } from 'viem';
import { ConfigError, envInt, envPositiveNumber, envString } from '../config/env.ts';
import type { Precheck } from '../engine/settlement-engine.ts';
import { TokenBucketLimiter } from '../http/rate-limit.ts';
import { ok, type Err, type Ok } from '../protocol/result.ts';
import type { VerifyRequest } from '../protocol/x402/types.ts';
import { refusedPayer, type PaymentRefusal } from '../verify/checks.ts';
import { stricterPolicy, withoutFloor, type PaymentPolicy } from '../policy/payment-policy.ts';
import { GatewayReason } from '../verify/reasons.ts';

export interface FacilitatorAdmissionConfig {
  payerRate: { capacity: number; refillPerSecond: number };
  /** Lower-case; undefined: any payee. */
  payeeAllowlist?: string[];
  /** A static minimum (token base units) on top of the engine's price floor; 1 when `floor`. */
  minAmount: bigint;
}

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;

export function facilitatorAdmissionConfigFromEnv(env: NodeJS.ProcessEnv = process.env): FacilitatorAdmissionConfig {
  const allow = envString(env, 'GATE402_FACILITATOR_PAYEE_ALLOWLIST', '')
    .split(',')
    .map((a) => a.trim())
    .filter(Boolean);
  for (const a of allow) if (!ADDRESS.test(a)) throw new ConfigError(`GATE402_FACILITATOR_PAYEE_ALLOWLIST must be 0x-prefixed 20-byte addresses separated by commas, got '${a}'`);
  const min = envString(env, 'GATE402_FACILITATOR_MIN_AMOUNT', 'floor');
  if (min !== 'floor' && (!/^[0-9]{1,78}$/.test(min) || BigInt(min) < 1n))
    throw new ConfigError(`GATE402_FACILITATOR_MIN_AMOUNT must be 'floor' (the network's price floor) or a whole number of at least 1 (token base units), got '${min}'`);
  return {
    payerRate: {
      capacity: envInt(env, 'GATE402_FACILITATOR_PAYER_RATE_CAPACITY', 20, { min: 1, max: 1_000_000 }),
      refillPerSecond: envPositiveNumber(env, 'GATE402_FACILITATOR_PAYER_RATE_PER_SECOND', 2),
    },
    ...(allow.length ? { payeeAllowlist: allow.map((a) => a.toLowerCase()) } : {}),
    minAmount: min === 'floor' ? 1n : BigInt(min),
  };
}

/** Admitted (the payer is named), or refused with the protocol's reason code as the failure's code. */
export type Admission = Ok<{ payer: Address }> | Err<PaymentRefusal>;

export interface AdmissionDeps {
  /** The engine's refusals, which this adds to. */
  policy: PaymentPolicy;
  precheck(request: VerifyRequest, policy: PaymentPolicy): Promise<Precheck>;
  /** Payees of this deployment that the open facilitator never pays (the stock desk). */
  ownPayees?: readonly string[];
  now?: () => number;
}

/** The open facilitator's door: pure checks under the operator's policy, then the payer's quota. */
export class PaymentAdmission {
  readonly #deps: AdmissionDeps;
  readonly #policy: PaymentPolicy;
  readonly #quota: TokenBucketLimiter;

  constructor(deps: AdmissionDeps, config: FacilitatorAdmissionConfig) {
    this.#deps = deps;
    this.#policy = stricterPolicy(deps.policy, {
      refusedPayees: new Set((deps.ownPayees ?? []).map((a) => a.toLowerCase())),
      ...(config.payeeAllowlist ? { payeeAllowlist: new Set(config.payeeAllowlist) } : {}),
      minAmount: config.minAmount,
    });
    // Bounded: the least recently seen payers are forgotten first (a forgotten payer starts with a full bucket).
    this.#quota = new TokenBucketLimiter({ ...config.payerRate, maxKeys: 100_000, ...(deps.now ? { now: deps.now } : {}) });
  }

  async admit(request: VerifyRequest): Promise<Admission> {
    // The floor comes after the quota: the engine checks it again before anything is sent (verify and settle).
    const pre = await this.#deps.precheck(request, withoutFloor(this.#policy));
    if (!pre.ok) return pre;
    const { payer, signedByKey } = pre.value;
    // A signature no key made counts against a separate bucket: a forger cannot use up a real payer's quota.
    const key = `${signedByKey ? 'key' : 'unproven'}:${payer.toLowerCase()}`;
    const taken = this.#quota.take(key);
    if (!taken.allowed) return refusedPayer({ code: GatewayReason.payerRateLimited, message: `too many payments from ${payer}; try again in ${taken.retryAfterSeconds} s` }, payer);
    return ok({ payer });
  }
}
