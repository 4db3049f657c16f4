import { parseAbi } from 'viem';

/**
 * Exactly what Permit2 settlement calls and reads: the x402 exact-permit proxy's two entry points (`settle`, and
 * `settleWithPermit`, which runs the same Permit2 transfer for the same signed permit after an EIP-2612 permit) and
 * Permit2's `nonceBitmap`.
 */
const structs = [
  'struct TokenPermissions { address token; uint256 amount; }',
  'struct PermitTransferFrom { TokenPermissions permitted; uint256 nonce; uint256 deadline; }',
  'struct Witness { address to; uint256 validAfter; }',
  'struct EIP2612Permit { uint256 value; uint256 deadline; bytes32 r; bytes32 s; uint8 v; }',
] as const;

/** The proxy's `settle`: pulls `permitted.amount` from the owner to `witness.to` through Permit2. The settlement call. */
export const settleAbi = parseAbi([...structs, 'function settle(PermitTransferFrom permit, address owner, Witness witness, bytes signature)']);

/** Both of the proxy's entry points, to recognise a settlement of the same signed permit by either. */
export const proxySettlementAbi = parseAbi([
  ...structs,
  'function settle(PermitTransferFrom permit, address owner, Witness witness, bytes signature)',
  'function settleWithPermit(EIP2612Permit permit2612, PermitTransferFrom permit, address owner, Witness witness, bytes signature)',
]);

/** Permit2's unordered nonces: bit `nonce & 0xff` of word `nonce >> 8` of the owner is set once the nonce is used. */
export const nonceBitmapAbi = parseAbi(['function nonceBitmap(address owner, uint256 wordPos) view returns (uint256)']);
