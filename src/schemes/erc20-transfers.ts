import { toEventSelector, type Address, type Hex, type Log } from 'viem';
import type { ExpectedTransfer } from './scheme.ts';

/** The ERC-20 `Transfer` event's topic, which every scheme's settlement logs. */
export const TRANSFER_TOPIC = toEventSelector('Transfer(address indexed from, address indexed to, uint256 value)');

/** The ERC-20 `Transfer` event, for log queries. */
export const transferEvent = {
  type: 'event',
  name: 'Transfer',
  inputs: [
    { name: 'from', type: 'address', indexed: true },
    { name: 'to', type: 'address', indexed: true },
    { name: 'value', type: 'uint256', indexed: false },
  ],
} as const;

export const topicAddress = (topic: Hex) => `0x${topic.slice(26)}` as Address;

/**
 * The ERC-20 Transfers among `logs` (read by their topics: both addresses indexed, the amount in the data). Decoded
 * here rather than by viem's parseEventLogs, which hashes the event's signature again for every log.
 */
export function loggedTransfers(logs: readonly Log[]): ExpectedTransfer[] {
  const out: ExpectedTransfer[] = [];
  for (const l of logs) {
    const [topic, from, to] = l.topics;
    if (topic !== TRANSFER_TOPIC || !from || !to || l.topics.length !== 3 || l.data.length !== 66) continue;
    out.push({ token: l.address, from: topicAddress(from), to: topicAddress(to), value: BigInt(l.data) });
  }
  return out;
}

/** The logs hold a Transfer of exactly the amount, of the token, from the payer to the payee. */
export function movedExactly(logs: readonly Log[], expect: ExpectedTransfer): boolean {
  const lc = (a: string) => a.toLowerCase();
  return loggedTransfers(logs).some((t) => lc(t.token) === lc(expect.token) && lc(t.from) === lc(expect.from) && lc(t.to) === lc(expect.to) && t.value === expect.value);
}
