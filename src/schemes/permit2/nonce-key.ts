/** Claim key of a Permit2 payment: Permit2's unordered nonces are per owner across all tokens. */
export function permit2NonceKey(network: string, from: string, nonce: bigint | string): string {
  return `permit2|${network}|${from.toLowerCase()}|${BigInt(nonce).toString()}`;
}
