import type { Address, Hex } from 'viem';

/**
 * The signed-transaction trail: every version of one logical transaction (a settlement, a batch, a swap, a refund)
 * signed before it is sent, so its hash is stored first; the last version is current, and the trail only grows.
 */
/** A settlement transaction, signed before it is sent so that its hash can be stored first. */
export interface SignedTx {
  hash: Hex;
  raw: Hex;
  chainId: number;
  relayer: Address;
  nonce: number;
  to: Address;
  data: Hex;
  /** Native value sent with the call, in wei (absent: none). */
  value?: string;
  gas: string;
  maxFeePerGas: string;
  maxPriorityFeePerGas: string;
}

/** What a relayer is asked to send: a call, with native value only where one is meant (gas sponsorship). */
export interface RelayerCall {
  to: Address;
  data: Hex;
  gas: bigint;
  value?: bigint;
}

/** A trail only grows: the new one is the old one and more. */
export function extendsTrail(old: readonly SignedTx[], next: readonly SignedTx[]): boolean {
  return next.length > old.length && old.every((tx, i) => next[i]?.hash === tx.hash);
}

/** The call a signed transaction makes, to sign it again (replacement or a new nonce). */
export function callOf(tx: SignedTx): RelayerCall {
  return { to: tx.to, data: tx.data, gas: BigInt(tx.gas), ...(tx.value ? { value: BigInt(tx.value) } : {}) };
}
