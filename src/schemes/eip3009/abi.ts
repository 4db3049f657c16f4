import { parseAbi, parseAbiItem, toEventSelector } from 'viem';

/**
 * Exactly what EIP-3009 settlement calls and reads on a token (FiatToken v2.2 and gate402's devnet stablecoins alike).
 * One entry per function: viem resolves overloads and hashes every function of the ABI it is given on each encode
 * and decode, so the settlement call is the bytes-signature overload alone (EOAs and ERC-1271 wallets alike).
 */
export const transferWithAuthorizationAbi = parseAbi([
  'function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, bytes signature)',
]);

/** Whether an (authorizer, nonce) is used or cancelled. */
export const authorizationStateAbi = parseAbi(['function authorizationState(address authorizer, bytes32 nonce) view returns (bool)']);

/** Logged by the token for every use (or cancellation) of an authorization. */
export const authorizationUsedEvent = parseAbiItem('event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)');

export const AUTHORIZATION_USED_TOPIC = toEventSelector(authorizationUsedEvent);
