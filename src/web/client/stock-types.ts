/** The stock purchase API's answers, as the pages read them (see `src/stock/http.ts`). */
import type { PaymentRequirements, ResourceInfo } from '../../protocol/x402/types.ts';
import type { OrderState } from '../../stock/order-states.ts';

export { FINAL_ORDER_STATES } from '../../stock/order-states.ts';

export interface StockRow {
  symbol: string;
  name: string;
  address: `0x${string}`;
  decimals: number;
  pool: string;
  priceUsd: string | null;
  fees: { amount: string; percent: string };
  limits: { minStableAmount: string; maxStableAmount: string };
  slippageBps: number;
}

export interface StockList {
  network: string;
  stablecoin: { address: `0x${string}`; symbol: string; decimals: number };
  stocks: StockRow[];
}

export interface StockQuote {
  symbol: string;
  stableAmount: string;
  total: { amount: string; atomic: string };
  fees: { amount: string; percent: string };
  estimatedShares: string;
  minimumShares: string;
  slippageBps: number;
  source: string;
  quotedAt: string;
}

export interface BuyChallenge {
  x402Version: 2;
  error?: string;
  resource?: ResourceInfo;
  accepts: PaymentRequirements[];
  terms: { symbol: string; stableAmount: string; total: { amount: string; atomic: string }; estimatedShares: string; minimumShares: string; slippageBps: number; quoteExpires: string };
}

export interface StockOrderView {
  orderId: string;
  status: OrderState;
  symbol: string;
  payer: `0x${string}`;
  recipient: `0x${string}`;
  stableAmount: string;
  amountAtomic: string;
  quotedShares?: string;
  minimumShares?: string;
  requotedShares?: string;
  delivered?: string;
  settlementTx?: string;
  swapTx?: string;
  refundTx?: string;
  failure?: { reason: string; message: string };
  createdAt: string;
  updatedAt: string;
  /** On a buy's answer: what went wrong, or that it is still running. */
  error?: string;
  detail?: string;
}
