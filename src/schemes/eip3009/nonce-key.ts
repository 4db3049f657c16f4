/** Claim key of an EIP-3009 payment: the token enforces one use per (from, nonce) on its own contract. */
export function eip3009NonceKey(network: string, asset: string, from: string, nonce: string): string {
  return `eip3009|${network}|${asset.toLowerCase()}|${from.toLowerCase()}|${nonce.toLowerCase()}`;
}
