/**
 * The 14 tokenized stocks the devnet lists, with the prices their pools are seeded at (USD per share).
 * Devnet data: production reads the official token contracts and pools from the networks file.
 */
export interface StockSeed {
  symbol: string;
  name: string;
  priceUsd: string;
}

export const DEVNET_STOCKS: readonly StockSeed[] = [
  { symbol: 'TSLA', name: 'Tesla, Inc.', priceUsd: '342.150000' },
  { symbol: 'AAPL', name: 'Apple Inc.', priceUsd: '231.870000' },
  { symbol: 'NVDA', name: 'NVIDIA Corporation', priceUsd: '181.320000' },
  { symbol: 'MSFT', name: 'Microsoft Corporation', priceUsd: '428.560000' },
  { symbol: 'AMZN', name: 'Amazon.com, Inc.', priceUsd: '219.410000' },
  { symbol: 'GOOGL', name: 'Alphabet Inc. Class A', priceUsd: '192.740000' },
  { symbol: 'META', name: 'Meta Platforms, Inc.', priceUsd: '702.180000' },
  { symbol: 'NFLX', name: 'Netflix, Inc.', priceUsd: '112.630000' },
  { symbol: 'AMD', name: 'Advanced Micro Devices, Inc.', priceUsd: '158.920000' },
  { symbol: 'PLTR', name: 'Palantir Technologies Inc.', priceUsd: '176.050000' },
  { symbol: 'COIN', name: 'Coinbase Global, Inc.', priceUsd: '327.400000' },
  { symbol: 'HOOD', name: 'Robinhood Markets, Inc.', priceUsd: '118.770000' },
  { symbol: 'SPY', name: 'SPDR S&P 500 ETF Trust', priceUsd: '661.230000' },
  { symbol: 'QQQ', name: 'Invesco QQQ Trust', priceUsd: '589.960000' },
];
