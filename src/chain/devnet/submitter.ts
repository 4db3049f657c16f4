import { encodeDeployData, type Abi, type Account, type Address, type Chain, type Hex, type PublicClient, type TransactionReceipt, type Transport, type WalletClient } from 'viem';
import { publicClientFor, walletClientFor } from '../clients.ts';

/** Sends one account's transactions to a local chain, each awaited to its receipt and checked for success. */
export class Submitter {
  readonly wallet: WalletClient<Transport, Chain, Account>;
  readonly client: PublicClient<Transport, Chain>;

  constructor(chainId: number, rpcUrl: string, account: Account) {
    this.client = publicClientFor(chainId, rpcUrl, { pollingIntervalMs: 10 });
    this.wallet = walletClientFor(chainId, rpcUrl, account, { pollingIntervalMs: 10 });
  }

  get address(): Address {
    return this.wallet.account.address;
  }

  async deploy(artifact: { abi: Abi | readonly unknown[]; bytecode: Hex }, args: readonly unknown[] = []): Promise<Address> {
    const data = encodeDeployData({ abi: artifact.abi as Abi, bytecode: artifact.bytecode, args: args as unknown[] });
    const hash = await this.wallet.sendTransaction({ data });
    const receipt = await this.#confirm(hash, 'deploy');
    if (!receipt.contractAddress) throw new Error(`deploy ${hash} created no contract`);
    return receipt.contractAddress;
  }

  async call(address: Address, abi: Abi | readonly unknown[], functionName: string, args: readonly unknown[] = []): Promise<TransactionReceipt> {
    const hash = await this.wallet.writeContract({ address, abi: abi as Abi, functionName, args: args as unknown[] });
    return this.#confirm(hash, functionName);
  }

  async #confirm(hash: Hex, what: string): Promise<TransactionReceipt> {
    const receipt = await this.client.waitForTransactionReceipt({ hash, timeout: 30_000 });
    if (receipt.status !== 'success') throw new Error(`${what} reverted on chain ${this.client.chain.id}: ${hash}`);
    return receipt;
  }
}
