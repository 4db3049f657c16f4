/**
 * Browser tests: Debian's Chromium driven by playwright-core (no browser download), and a test wallet injected into
 * the page as `window.ethereum` (EIP-1193) whose requests are answered in Node: signed with a devnet key by viem,
 * sent to the devnet's RPC.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { toHex, type Hex, type LocalAccount, type TypedDataDefinition } from 'viem';
import type { NetworkEntry } from '../../src/chain/network-types.ts';
import { rpcCall } from '../../src/chain/rpc.ts';
import { clientsFor } from './devnet.ts';

export const CHROMIUM = process.env.GATE402_CHROMIUM ?? '/usr/bin/chromium';

/** Without the background-networking flags, Chromium's own connections are refused on a closed network and slow it down. */
export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

export const VIEWPORTS = {
  desktop: { width: 1280, height: 800 },
  phone: { width: 390, height: 844 },
} as const;
export type ViewportName = keyof typeof VIEWPORTS;

/** Where the test run writes its screenshots (git ignores it). */
export const SCREENSHOT_DIR = resolve(process.env.GATE402_SCREENSHOT_DIR ?? 'test-output/screenshots');

/** Chromium with a fresh, empty profile (Playwright's temporary one). */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium; bash .ci/run does) or set GATE402_CHROMIUM`);
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS, timeout: 60_000 });
}

export function newContext(browser: Browser, viewport: ViewportName): Promise<BrowserContext> {
  return browser.newContext(viewport === 'phone' ? { viewport: VIEWPORTS.phone, isMobile: true, hasTouch: true, deviceScaleFactor: 1 } : { viewport: VIEWPORTS.desktop, deviceScaleFactor: 1 });
}

export interface TestWallet {
  account: LocalAccount;
  /** Every method the page asked for, in order. */
  calls: string[];
  /** Runs after the page asks for a typed-data signature and before it is given (a test moves the market there). */
  beforeSign?: (primaryType: string) => Promise<void>;
}

type Eip1193Answer = { result: unknown } | { error: { code: number; message: string } };

/** Decimal strings (as `eth_signTypedData_v4` carries them) to the bigints viem wants, by the message's own types. */
function typedValues(types: Record<string, Array<{ name: string; type: string }>>, type: string, value: unknown): unknown {
  if (type.endsWith(']')) return (value as unknown[]).map((v) => typedValues(types, type.slice(0, type.lastIndexOf('[')), v));
  const fields = types[type];
  if (fields) return Object.fromEntries(fields.map((f) => [f.name, typedValues(types, f.type, (value as Record<string, unknown>)[f.name])]));
  if (/^u?int\d*$/.test(type)) return BigInt(value as string | number);
  return value;
}

async function answer(n: NetworkEntry, w: TestWallet, method: string, params: unknown[]): Promise<unknown> {
  const address = w.account.address;
  switch (method) {
    case 'eth_requestAccounts':
    case 'eth_accounts':
      return [address];
    case 'eth_chainId':
      return toHex(n.chainId);
    case 'wallet_switchEthereumChain': {
      if (Number((params[0] as { chainId: string }).chainId) === n.chainId) return null;
      throw Object.assign(new Error('Unrecognized chain ID'), { code: 4902 });
    }
    case 'eth_signTypedData_v4': {
      const [from, json] = params as [string, string];
      if (from.toLowerCase() !== address.toLowerCase()) throw Object.assign(new Error('not this wallet'), { code: 4100 });
      const typed = JSON.parse(json) as { types: Record<string, Array<{ name: string; type: string }>>; primaryType: string; domain: Record<string, unknown>; message: Record<string, unknown> };
      const { EIP712Domain: _domain, ...types } = typed.types;
      await w.beforeSign?.(typed.primaryType);
      const domain = { ...typed.domain, ...(typed.domain.chainId === undefined ? {} : { chainId: Number(typed.domain.chainId) }) };
      return w.account.signTypedData({ domain, types, primaryType: typed.primaryType, message: typedValues(types, typed.primaryType, typed.message) } as unknown as TypedDataDefinition);
    }
    case 'eth_sendTransaction': {
      const tx = params[0] as { to: Hex; data?: Hex; value?: Hex };
      const { wallet } = clientsFor(n, w.account);
      return wallet.sendTransaction({ account: w.account, chain: wallet.chain, to: tx.to, ...(tx.data ? { data: tx.data } : {}), ...(tx.value ? { value: BigInt(tx.value) } : {}) });
    }
    default:
      return rpcCall(n.rpcUrl, method, params);
  }
}

/**
 * Installs the test wallet into every page of `context`: `window.ethereum.request` forwards to Node, which answers
 * as {@link answer} says. Errors keep their EIP-1193 code.
 */
export async function injectWallet(context: BrowserContext, n: NetworkEntry, w: TestWallet): Promise<void> {
  await context.exposeFunction('__gate402TestWallet', async (request: string): Promise<string> => {
    const { method, params } = JSON.parse(request) as { method: string; params?: unknown[] };
    w.calls.push(method);
    let out: Eip1193Answer;
    try {
      out = { result: await answer(n, w, method, params ?? []) };
    } catch (err) {
      const e = err as { code?: unknown; message?: unknown };
      out = { error: { code: typeof e.code === 'number' ? e.code : -32603, message: String(e.message ?? err).split('\n')[0] ?? 'error' } };
    }
    return JSON.stringify(out);
  });
  await context.addInitScript(() => {
    const bridge = (globalThis as unknown as { __gate402TestWallet: (r: string) => Promise<string> }).__gate402TestWallet;
    (globalThis as unknown as { ethereum: unknown }).ethereum = {
      async request(args: { method: string; params?: unknown[] }) {
        const out = JSON.parse(await bridge(JSON.stringify(args))) as { result?: unknown; error?: { code: number; message: string } };
        if (out.error) throw Object.assign(new Error(out.error.message), { code: out.error.code });
        return out.result;
      },
      on() {},
      removeListener() {},
    };
  });
}

/**
 * Problems the page reported: uncaught errors and console errors (a CSP violation is one). Chromium's notes on
 * answers with an error status are left out: a 402 or a 404 is an answer the page reads, not a problem.
 */
export function watchPageProblems(page: Page): string[] {
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource: the server responded with a status of')) problems.push(`console: ${m.text()}`);
  });
  return problems;
}

/** How far the page is wider than its viewport (0 when nothing overflows). */
export async function horizontalOverflow(page: Page): Promise<number> {
  return page.evaluate('document.documentElement.scrollWidth - window.innerWidth') as Promise<number>;
}

/** Whether `selector`'s box lies within the viewport's width, once scrolled into view. */
export async function fitsViewportWidth(page: Page, selector: string): Promise<boolean> {
  const target = page.locator(selector).first();
  await target.scrollIntoViewIfNeeded();
  const box = await target.boundingBox();
  const width = page.viewportSize()?.width ?? 0;
  return box !== null && box.width > 0 && box.x >= 0 && box.x + box.width <= width + 0.5;
}

/**
 * Elements marked `hidden` that the browser nevertheless lays out: each as `#id` (or its tag and classes) with its
 * box. Reads what is drawn (the layout box and the computed display), not the attribute: a class that sets its own
 * `display` later in the stylesheet would show a "hidden" element.
 */
export async function hiddenButDrawn(page: Page): Promise<string[]> {
  return page.evaluate(`[...document.querySelectorAll('[hidden]')].flatMap((e) => {
    const r = e.getBoundingClientRect();
    const display = getComputedStyle(e).display;
    if (r.width === 0 && r.height === 0 && display === 'none') return [];
    const name = e.id ? '#' + e.id : e.tagName.toLowerCase() + [...e.classList].map((c) => '.' + c).join('');
    return [name + ' ' + Math.round(r.width) + 'x' + Math.round(r.height) + ' display:' + display];
  })`) as Promise<string[]>;
}

/** The layout box of `selector`'s first match in CSS pixels ({0, 0} when it is not drawn). */
export async function drawnSize(page: Page, selector: string): Promise<{ width: number; height: number }> {
  const box = await page.locator(selector).first().boundingBox();
  return { width: box?.width ?? 0, height: box?.height ?? 0 };
}

export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const path = join(SCREENSHOT_DIR, `${name}.png`);
  await page.screenshot({ path, fullPage: true, animations: 'disabled' });
  return path;
}
