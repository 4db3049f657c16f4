/**
 * The pure check of a wallet address typed by a person or sent by a client: a merchant's `payTo`, a stock buyer's
 * `recipient`. Shared by the marketplace and the stock desk, so it lives with the protocol, not in either.
 */
import { getAddress, type Address } from 'viem';
import { ok, refusal, type Err, type HttpFailure, type Ok } from './result.ts';

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;

/**
 * `text` as a checksummed address. Mixed case must carry a valid EIP-55 checksum (all lower or all upper case
 * carries none and is accepted); the zero address is refused. `field` names the value in the message.
 */
export function checkAddress(text: string, field: string): Ok<Address> | Err<HttpFailure<'invalid_address'>> {
  if (!ADDRESS.test(text)) return refusal('invalid_address', `${field} must be a 0x-prefixed 20-byte hex address`, 400);
  const hex = text.slice(2);
  const checksummed = getAddress(`0x${hex.toLowerCase()}`);
  const mixed = hex !== hex.toLowerCase() && hex !== hex.toUpperCase();
  if (mixed && checksummed !== text) return refusal('invalid_address', `${field} ${text} has a wrong EIP-55 checksum (mixed-case addresses must be checksummed; did you mean ${checksummed}?)`, 400);
  if (/^0+$/.test(hex)) return refusal('invalid_address', `${field} must not be the zero address`, 400);
  return ok(checksummed);
}
