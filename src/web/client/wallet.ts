/**
 * The injected EIP-1193 wallet (`window.ethereum`): accounts, chain, reads through the wallet's own node, typed-data
 * signatures and transactions. Every failure becomes a {@link WalletError} whose message says what to do.
 */

type Hex = `0x${string}`;

interface Eip1193Provider {
  request(args: { method: string; params?: unknown[] | Record<string, unknown> }): Promise<unknown>;
  on?(event: string, listener: (...args: unknown[]) => void): void;
}

declare global {
  interface Window {
    ethereum?: Eip1193Provider;
  }
}

export class WalletError extends Error {
  readonly code: number | undefined;
  constructor(message: string, code?: number) {
    super(message);
    this.name = 'WalletError';
    this.code = code;
  }
}

/** What an EIP-1193 error means for the person holding the wallet. */
export function describeWalletError(err: unknown, doing: string): WalletError {
  if (err instanceof WalletError) return err;
  const e = (err ?? {}) as { code?: unknown; message?: unknown; data?: { message?: unknown } };
  const code = typeof e.code === 'number' ? e.code : undefined;
  const detail = typeof e.data?.message === 'string' ? e.data.message : typeof e.message === 'string' ? e.message : String(err);
  switch (code) {
    case 4001:
      return new WalletError(`You declined ${doing} in your wallet; nothing happened.`, code);
    case 4100:
      return new WalletError(`Your wallet has not authorised this page; connect it first, then try ${doing} again.`, code);
    case 4200:
      return new WalletError(`Your wallet does not support ${doing}; try another wallet.`, code);
    case 4900:
    case 4901:
      return new WalletError(`Your wallet is not connected to the chain; reconnect it and try ${doing} again.`, code);
    case -32002:
      return new WalletError('Your wallet already has a request waiting: open it and answer that one first.', code);
    default:
      return new WalletError(`Your wallet could not complete ${doing}: ${detail.split('\n')[0]}`, code);
  }
}

export function shortAddress(a: string): string {
  return `${a.slice(0, 6)}…${a.slice(-4)}`;
}

export interface TransactionRequest {
  to: Hex;
  data?: Hex;
  value?: Hex;
}

export interface AddChainParams {
  chainId: number;
  chainName: string;
  rpcUrl?: string;
}

export class Wallet {
  address: Hex | undefined;
  readonly #listeners = new Set<() => void>();

  get provider(): Eip1193Provider | undefined {
    return window.ethereum;
  }

  get available(): boolean {
    return typeof window.ethereum?.request === 'function';
  }

  /** Calls `fn` whenever the account or the chain changes (wallets that report it). */
  onChange(fn: () => void): void {
    if (this.#listeners.size === 0) {
      const notify = () => {
        for (const l of this.#listeners) l();
      };
      this.provider?.on?.('accountsChanged', (accounts) => {
        const [first] = Array.isArray(accounts) ? (accounts as Hex[]) : [];
        this.address = first;
        notify();
      });
      this.provider?.on?.('chainChanged', notify);
    }
    this.#listeners.add(fn);
  }

  async request<T>(method: string, params: unknown[] | undefined, doing: string): Promise<T> {
    const p = this.provider;
    if (!p) throw new WalletError('No wallet was found in this browser. Install a browser wallet (an EIP-1193 wallet such as a browser extension) and reload the page.');
    try {
      return (await p.request(params === undefined ? { method } : { method, params })) as T;
    } catch (err) {
      throw describeWalletError(err, doing);
    }
  }

  async connect(): Promise<Hex> {
    const accounts = await this.request<Hex[]>('eth_requestAccounts', undefined, 'connecting');
    const [first] = accounts;
    if (!first) throw new WalletError('Your wallet shared no account with this page; unlock it or choose an account, then connect again.');
    this.address = first;
    for (const l of this.#listeners) l();
    return first;
  }

  /** The account already shared with this page, without asking (a page reload keeps the connection). */
  async reconnect(): Promise<Hex | undefined> {
    if (!this.available) return undefined;
    const accounts = await this.request<Hex[]>('eth_accounts', undefined, 'reading your account').catch(() => []);
    this.address = accounts[0];
    return this.address;
  }

  requireAddress(): Hex {
    if (!this.address) throw new WalletError('Connect your wallet first.');
    return this.address;
  }

  async chainId(): Promise<number> {
    return Number(await this.request<string>('eth_chainId', undefined, 'reading the chain'));
  }

  /** Asks the wallet to switch to `chain`, offering to add it when the wallet does not know it. */
  async ensureChain(chain: AddChainParams): Promise<void> {
    if ((await this.chainId()) === chain.chainId) return;
    const chainId = `0x${chain.chainId.toString(16)}`;
    try {
      await this.request('wallet_switchEthereumChain', [{ chainId }], `switching to the ${chain.chainName}`);
    } catch (err) {
      if ((err as WalletError).code !== 4902) throw err;
      if (!chain.rpcUrl) throw new WalletError(`Your wallet does not know the ${chain.chainName} (chain id ${chain.chainId}). Add it to your wallet, then try again.`);
      await this.request(
        'wallet_addEthereumChain',
        [{ chainId, chainName: chain.chainName, rpcUrls: [chain.rpcUrl], nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 } }],
        `adding the ${chain.chainName}`,
      );
    }
    if ((await this.chainId()) !== chain.chainId) throw new WalletError(`Your wallet is still on another chain; switch it to the ${chain.chainName} (chain id ${chain.chainId}).`);
  }

  call(to: Hex, data: Hex): Promise<Hex> {
    return this.request<Hex>('eth_call', [{ to, data }, 'latest'], 'reading the chain');
  }

  async balance(address: Hex): Promise<bigint> {
    return BigInt(await this.request<Hex>('eth_getBalance', [address, 'latest'], 'reading your balance'));
  }

  sendTransaction(tx: TransactionRequest, doing: string): Promise<Hex> {
    return this.request<Hex>('eth_sendTransaction', [{ from: this.requireAddress(), ...tx }], doing);
  }

  /** Polls the wallet's node until `hash` is mined; true when it succeeded. */
  async waitForReceipt(hash: Hex, timeoutMs = 120_000): Promise<boolean> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const receipt = await this.request<{ status?: Hex } | null>('eth_getTransactionReceipt', [hash], 'waiting for your transaction');
      if (receipt) return receipt.status === '0x1';
      if (Date.now() > until) throw new WalletError(`Transaction ${hash} was not mined within ${Math.round(timeoutMs / 1000)} seconds; check it in your wallet.`);
      await new Promise((r) => setTimeout(r, 500));
    }
  }

  /** `eth_signTypedData_v4`: the typed data as JSON, with numbers as decimal strings. */
  signTypedData(typedData: unknown, doing: string): Promise<Hex> {
    const json = JSON.stringify(typedData, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
    return this.request<Hex>('eth_signTypedData_v4', [this.requireAddress(), json], doing);
  }
}
