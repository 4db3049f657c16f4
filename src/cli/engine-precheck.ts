/**
 * The local engine's chain-free checks in the shape remote settlement asks for. Wiring only: each line is the
 * engine's own answer.
 */
import type { SettlementEngine } from '../engine/settlement-engine.ts';
import { ok, type Err, type Ok } from '../protocol/result.ts';
import type { VerifyRequest } from '../protocol/x402/types.ts';
import type { PaymentRefusal } from '../verify/checks.ts';

/** The engine's checks that need no chain: refused, or whether a key (not a contract) made the signature. */
export function enginePrecheck(engine: SettlementEngine): (request: VerifyRequest) => Promise<Ok<{ signedByKey: boolean }> | Err<PaymentRefusal>> {
  return async (request) => {
    const pre = await engine.precheck(request);
    if (pre.ok) return ok({ signedByKey: pre.signedByKey });
    return { ok: false, error: { code: pre.reason, message: pre.message, ...(pre.payer ? { payer: pre.payer } : {}) } };
  };
}
