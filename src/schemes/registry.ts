import type { Address, Hex } from 'viem';
import type { ExactEvmPayload, PaymentRequirements } from '../protocol/x402/types.ts';
import { erc3009DepositScheme, permit2DepositScheme } from './batch-settlement/deposit-scheme.ts';
import { eip3009Scheme } from './eip3009/scheme.ts';
import { permit2Scheme } from './permit2/scheme.ts';
import type { PaymentScheme, SchemeName, SettlementCall } from './scheme.ts';

/**
 * Every scheme gate402 verifies and settles. A new scheme is a folder beside these and one entry here. The channel
 * deposits come first: their requirements (`scheme: batch-settlement`) name no `exact` transfer method either.
 */
export const SCHEMES: readonly PaymentScheme[] = [erc3009DepositScheme, permit2DepositScheme, eip3009Scheme, permit2Scheme];

/** The scheme requirements ask for: the one their `extra.assetTransferMethod` names, else EIP-3009 (the reference's default). */
export function schemeForRequirements(requirements: PaymentRequirements): PaymentScheme {
  return SCHEMES.find((s) => s.asks(requirements)) ?? eip3009Scheme;
}

/** The scheme whose shape a payload has (exactly one, as the payload schema admits). */
export function schemeOfPayload(payload: ExactEvmPayload): PaymentScheme {
  const carried = SCHEMES.filter((s) => s.carries(payload));
  if (carried.length !== 1) throw new TypeError(carried.length === 0 ? 'the payload is of no known scheme' : 'the payload has the shape of several schemes');
  return carried[0] as PaymentScheme;
}

export function schemeNamed(name: SchemeName): PaymentScheme {
  const scheme = SCHEMES.find((s) => s.name === name);
  if (!scheme) throw new TypeError(`no scheme ${name}`);
  return scheme;
}

/** The settlement call `data` to `to` makes, read back from its calldata (what a batch transaction holds); else undefined. */
export function decodeSettlementCall(to: Address, data: Hex): SettlementCall | undefined {
  for (const s of SCHEMES) {
    const call = s.decodeCall(to, data);
    if (call) return call;
  }
  return undefined;
}
