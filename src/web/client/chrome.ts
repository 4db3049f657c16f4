/**
 * What every page shares: the wallet button in the header, message areas, and the rule that nothing fails
 * silently (an unexpected error anywhere is shown in the page's alert bar).
 */
import { ApiError } from './api.ts';
import { byId, el, replaceChildren } from './dom.ts';
import { shortAddress, type Wallet, WalletError } from './wallet.ts';

export type MessageKind = 'error' | 'info' | 'success' | 'progress';

/** The words for an error: ours are written for people already; anything else is said to be unexpected. */
export function messageOf(err: unknown): string {
  if (err instanceof ApiError || err instanceof WalletError) return err.message;
  const text = err instanceof Error ? err.message : String(err);
  return `Something went wrong in this page: ${text}. Reload the page and try again.`;
}

/** Replaces the content of a message area (`role="status"` or `"alert"` in the markup). */
export function showMessage(target: HTMLElement, kind: MessageKind, ...content: Array<Node | string>): void {
  target.className = `message ${kind}`;
  target.hidden = false;
  replaceChildren(target, ...content);
}

export function clearMessage(target: HTMLElement): void {
  target.className = 'message';
  target.hidden = true;
  replaceChildren(target);
}

/** The page-wide alert bar, for errors that belong to no form. */
export function pageAlert(text: string): void {
  const bar = byId('page-alert');
  replaceChildren(bar, el('span', { text }), el('button', { class: 'link', text: 'Dismiss', attrs: { type: 'button' }, on: { click: () => (bar.hidden = true) } }));
  bar.hidden = false;
}

/** Uncaught errors and rejected promises end in the alert bar, never only in the console. */
export function reportUncaughtErrors(): void {
  window.addEventListener('error', (e) => pageAlert(messageOf(e.error ?? e.message)));
  window.addEventListener('unhandledrejection', (e) => pageAlert(messageOf(e.reason)));
}

/**
 * Runs `action` with `button` disabled (and marked busy); its error goes to `target` as an error message.
 * Returns whether it succeeded.
 */
export async function guarded(button: HTMLButtonElement | undefined, target: HTMLElement, action: () => Promise<void>): Promise<boolean> {
  if (button) {
    button.disabled = true;
    button.setAttribute('aria-busy', 'true');
  }
  try {
    await action();
    return true;
  } catch (err) {
    showMessage(target, 'error', messageOf(err));
    return false;
  } finally {
    if (button) {
      button.disabled = false;
      button.removeAttribute('aria-busy');
    }
  }
}

/** The header's wallet button: connects, then shows the account. `changed` runs on every account or chain change. */
export function mountWalletButton(wallet: Wallet, changed: () => void): void {
  const button = byId<HTMLButtonElement>('connect');
  const render = () => {
    button.textContent = wallet.address ? shortAddress(wallet.address) : 'Connect wallet';
    button.title = wallet.address ? `Connected: ${wallet.address}` : 'Connect a browser wallet';
    button.classList.toggle('connected', Boolean(wallet.address));
  };
  wallet.onChange(() => {
    render();
    changed();
  });
  button.addEventListener('click', () => {
    if (!wallet.available) {
      pageAlert('No wallet was found in this browser. Install a browser wallet (an EIP-1193 wallet such as a browser extension) and reload the page.');
      return;
    }
    void wallet.connect().catch((err: unknown) => pageAlert(messageOf(err)));
  });
  render();
  void wallet.reconnect().then((address) => {
    if (address) {
      render();
      changed();
    }
  });
}
