import { ExactEvmScheme } from '@x402/evm/exact/client';
import { maxUint256, parseEther, toHex, type Account, type Address, type LocalAccount } from 'viem';
import { CAIP2, EXACT_PERMIT2_PROXY_ADDRESS, PERMIT2_ADDRESS } from '../../src/chain/canonical.ts';
import { stablecoinArtifact } from '../../src/devnet/contracts/artifacts/index.ts';
import type { NetworkEntry } from '../../src/chain/network-types.ts';
import { rpcCall } from '../../src/chain/rpc.ts';
import type { PaymentPayload, PaymentRequirements } from '../../src/protocol/x402/types.ts';
import { clientsFor, freshAccount } from './devnet.ts';

/** Requirements as a resource server would advertise them: Permit2 on the stock chain, EIP-3009 elsewhere. */
export function requirementsFor(caip2: string, n: NetworkEntry, payTo: Address, amount: string): PaymentRequirements {
  const base = { scheme: 'exact' as const, network: caip2 as `eip155:${string}`, amount, asset: n.stablecoin.address, payTo, maxTimeoutSeconds: 120 };
  return caip2 === CAIP2.stockChain
    ? { ...base, extra: { assetTransferMethod: 'permit2', spender: EXACT_PERMIT2_PROXY_ADDRESS } }
    : { ...base, extra: { name: n.stablecoin.name, version: n.stablecoin.version } };
}

/** A payment made by the official @x402/evm client scheme, wrapped as the official HTTP client sends it. */
export async function officialPayment(payer: LocalAccount, req: PaymentRequirements): Promise<PaymentPayload> {
  const made = await new ExactEvmScheme(payer).createPaymentPayload(2, req);
  return { x402Version: 2, accepted: req, payload: made.payload as PaymentPayload['payload'] };
}

/** A fresh payer holding `amount` of the network's stablecoin; on the stock chain also Permit2-approved unless told not to. */
export async function fundedPayer(n: NetworkEntry, caip2: string, funder: Account, amount: bigint, opts: { approvePermit2?: boolean } = {}): Promise<LocalAccount> {
  const payer = freshAccount();
  const { pub, wallet } = clientsFor(n, funder);
  if (amount > 0n) {
    await pub.waitForTransactionReceipt({ hash: await wallet.writeContract({ address: n.stablecoin.address, abi: stablecoinArtifact.abi, functionName: 'mint', args: [payer.address, amount] }) });
  }
  if (caip2 === CAIP2.stockChain && (opts.approvePermit2 ?? true)) {
    await rpcCall(n.rpcUrl, 'anvil_setBalance', [payer.address, toHex(parseEther('1'))]);
    const own = clientsFor(n, payer);
    await pub.waitForTransactionReceipt({
      hash: await own.wallet.writeContract({ address: n.stablecoin.address, abi: stablecoinArtifact.abi, functionName: 'approve', args: [PERMIT2_ADDRESS, maxUint256] }),
    });
  }
  return payer;
}

export async function stableBalance(n: NetworkEntry, who: Address): Promise<bigint> {
  const { pub } = clientsFor(n, freshAccount());
  return pub.readContract({ address: n.stablecoin.address, abi: stablecoinArtifact.abi, functionName: 'balanceOf', args: [who] });
}

export async function postJson(url: string, body: unknown): Promise<{ status: number; json: unknown; contentType: string | null }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, contentType: res.headers.get('content-type') };
}
