import t from 'tap';
import { ConfigError } from '../src/config/env.ts';
import { facilitatorAdmissionConfigFromEnv } from '../src/facilitator/admission.ts';
import { checkPaymentPolicy, stricterPolicy, type PaymentPolicy } from '../src/policy/payment-policy.ts';

const payer = '0x1111111111111111111111111111111111111111';
const payee = '0x2222222222222222222222222222222222222222';
const relayer = '0x3333333333333333333333333333333333333333';
const engine: PaymentPolicy = { refusedPayees: new Set([relayer]), minAmount: 1n };
const reason = (policy: PaymentPolicy, terms: { kind?: 'eip3009' | 'permit2'; payer?: string; payee?: string; amount?: bigint }) => {
  const r = checkPaymentPolicy(policy, { kind: 'eip3009', payer, payee, amount: 10n, ...terms });
  return r.ok ? 'ok' : r.error.code;
};

t.test('what the engine never settles', async (t) => {
  t.equal(reason(engine, {}), 'ok', 'an ordinary payment passes');
  t.equal(reason(engine, { amount: 0n }), 'invalid_exact_evm_payload_authorization_value_mismatch', 'zero (EIP-3009)');
  t.equal(reason(engine, { amount: 0n, kind: 'permit2' }), 'permit2_amount_mismatch', 'zero (Permit2)');
  t.equal(reason({ ...engine, minAmount: 0n }, { amount: 0n }), 'invalid_exact_evm_payload_authorization_value_mismatch', 'zero even under a minimum of 0');
  t.equal(reason(engine, { payee: payer.toUpperCase().replace('0X', '0x') }), 'payer_is_payee', 'to itself, whatever the case');
  t.equal(reason(engine, { payee: relayer }), 'payee_not_allowed', 'to a relayer');
});

t.test("the operator's stricter policy", async (t) => {
  const open = stricterPolicy(engine, { refusedPayees: new Set(['0x4444444444444444444444444444444444444444']), payeeAllowlist: new Set([payee]), minAmount: 1000n });
  t.equal(reason(open, { amount: 1000n }), 'ok', 'an allowed payee at the minimum');
  t.equal(reason(open, { amount: 999n }), 'invalid_exact_evm_payload_authorization_value_mismatch', 'below the minimum');
  t.equal(reason(open, { amount: 1000n, payee: '0x5555555555555555555555555555555555555555' }), 'payee_not_allowed', 'off the allowlist');
  t.equal(reason(open, { amount: 1000n, payee: relayer }), 'payee_not_allowed', "the engine's refusals still hold");
  t.equal(reason(stricterPolicy(engine, { minAmount: 0n }), { amount: 1n }), 'ok', 'a lower minimum never loosens the engine');
});

t.test('admission settings from the environment', async (t) => {
  t.same(facilitatorAdmissionConfigFromEnv({}), { payerRate: { capacity: 20, refillPerSecond: 2 }, minAmount: 1n }, 'defaults');
  t.same(
    facilitatorAdmissionConfigFromEnv({
      GATE402_FACILITATOR_PAYEE_ALLOWLIST: ` ${payee.toUpperCase().replace('0X', '0x')} ,`,
      GATE402_FACILITATOR_MIN_AMOUNT: '1000',
      GATE402_FACILITATOR_PAYER_RATE_CAPACITY: '5',
      GATE402_FACILITATOR_PAYER_RATE_PER_SECOND: '0.5',
    }),
    { payerRate: { capacity: 5, refillPerSecond: 0.5 }, payeeAllowlist: [payee], minAmount: 1000n },
  );
  for (const [name, value] of [
    ['GATE402_FACILITATOR_PAYEE_ALLOWLIST', '0x12'],
    ['GATE402_FACILITATOR_MIN_AMOUNT', '0'],
    ['GATE402_FACILITATOR_MIN_AMOUNT', '1.5'],
    ['GATE402_FACILITATOR_PAYER_RATE_CAPACITY', '0'],
    ['GATE402_FACILITATOR_PAYER_RATE_PER_SECOND', 'fast'],
  ] as const) {
    let error: unknown;
    try {
      facilitatorAdmissionConfigFromEnv({ [name]: value });
    } catch (err) {
      error = err;
    }
    t.ok(error instanceof ConfigError && error.message.includes(name), `${name}=${value} is refused, naming the variable (${String(error)})`);
  }
});
