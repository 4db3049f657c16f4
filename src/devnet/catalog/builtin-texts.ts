/**
 * Human texts and machine-readable input shapes of the built-in catalog, keyed by slug and operation id.
 * The route table itself (paths, methods, prices, inputs) is `routes.json`.
 */
import { LLM_ALIAS_NAMES } from './llm-aliases.ts';
import type { JsonSchema, RouteParameter, RouteSegments, RouteShape } from '../../gateway/catalog/merchant.ts';

export interface MerchantText {
  name: string;
  description: string;
}

export interface RouteText {
  summary: string;
  description: string;
  shape: RouteShape;
}

export const MERCHANT_TEXTS: Readonly<Record<string, MerchantText>> = {
  'chain-stocks': {
    name: 'Chain Stocks',
    description: 'Tokenized stocks on the stock chain: the list of listed stocks, quotes, token details and a full market report.',
  },
  catjoke: { name: 'Cat Jokes', description: 'A random cat joke, for agents that need a smile.' },
  'llm-chat': {
    name: 'LLM Chat',
    description: 'Chat completions from a choice of large language models, by stable alias or by full vendor/model id.',
  },
  weather: {
    name: 'Weather',
    description: 'Weather forecasts, current conditions and air quality for any coordinate, plus place-name geocoding.',
  },
  fx: { name: 'FX Rates', description: 'Foreign exchange reference rates: latest, historical (since 1999) and the list of currencies.' },
  'crypto-prices': {
    name: 'Crypto Prices',
    description: 'Token prices by chain and contract address or by coin id: current, at a past timestamp, and price charts.',
  },
  defi: { name: 'DeFi Data', description: 'Total value locked of DeFi protocols and chains, and stablecoin supplies.' },
  wiki: { name: 'Encyclopedia', description: 'Encyclopedia article search and article summaries.' },
  words: { name: 'Words', description: 'Word definitions, and related words: synonyms, rhymes, similar meanings and spellings.' },
  'news-search': { name: 'Tech News Search', description: 'Full-text search of a technology news community, and its current front page.' },
  'world-data': { name: 'World Data', description: 'Country facts and development indicators (population, GDP and more) by country and year.' },
  'chain-explorer': {
    name: 'Chain Explorer',
    description: 'Blockchain explorer data: addresses, balances, tokens, holders, transactions, logs and chain statistics.',
  },
  books: { name: 'Books', description: 'Search an open catalog of books by title and author, and read work records.' },
  filings: {
    name: 'Company Filings',
    description: 'Public company filings: submission history, reported financial facts, and the ticker to company id map.',
  },
  treasury: {
    name: 'Treasury Data',
    description: 'Public finance data of the federal treasury: debt outstanding, exchange rates and average interest rates.',
  },
  'crypto-markets': { name: 'Crypto Markets', description: 'Market data of crypto assets by coin id: price, market cap, volume and change.' },
};

// ---- building blocks ----

const string = (extra: JsonSchema = {}): JsonSchema => ({ type: 'string', ...extra });

function q(name: string, description: string, schema: JsonSchema = string(), example?: string, required = false): RouteParameter {
  return { name, description, schema, ...(required ? { required: true } : {}), ...(example !== undefined ? { example } : {}) };
}

function p(name: string, description: string, schema: JsonSchema = string(), example?: string): RouteParameter {
  return { name, description, required: true, schema, ...(example !== undefined ? { example } : {}) };
}

function seg(key: string, template: string, description: string, ...parameters: RouteParameter[]): RouteSegments {
  return { key, template, description, parameters };
}

const comma = (what: string): string => `Comma-separated list of ${what}.`;
const LATITUDE = q('latitude', 'Latitude in decimal degrees (WGS84).', { type: 'number', minimum: -90, maximum: 90 }, '52.52', true);
const LONGITUDE = q('longitude', 'Longitude in decimal degrees (WGS84).', { type: 'number', minimum: -180, maximum: 180 }, '13.41', true);
const SYMBOL_OR_ADDRESS: RouteParameter[] = [
  q('symbol', 'Stock ticker symbol, e.g. AAPL. Required unless `address` is given.', string({ minLength: 1 }), 'AAPL'),
  q('address', 'Token contract address of the stock on the stock chain, an alternative to `symbol`.', string({ pattern: '^0x[0-9a-fA-F]{40}$' })),
];
const SYMBOL_BODY: JsonSchema = {
  type: 'object',
  properties: { symbol: { type: 'string', minLength: 1 }, address: { type: 'string', pattern: '^0x[0-9a-fA-F]{40}$' } },
  required: ['symbol'],
  additionalProperties: false,
  examples: [{ symbol: 'AAPL' }],
};
const TREASURY_QUERY: RouteParameter[] = [
  q('sort', 'Field to sort by; prefix with `-` for descending.', string(), '-record_date'),
  q('page[size]', 'Records per page.', { type: 'integer', minimum: 1, maximum: 10000 }, '10'),
  q('filter', 'Filters as `field:operator:value`, comma-separated (operators eq, lt, lte, gt, gte, in).', string(), 'record_date:gte:2024-01-01'),
];
const ADDRESS = string({ pattern: '^0x[0-9a-fA-F]{40}$' });
const TX_HASH = string({ pattern: '^0x[0-9a-fA-F]{64}$' });
const CIK_JSON = p('company', 'Company id zero-padded to 10 digits, with the `.json` suffix.', string({ pattern: '^[0-9]{10}\\.json$' }), '0000320193.json');
const COINS = (example: string): RouteParameter => p('coins', `${comma('coins')} Each is \`{chain}:{address}\` or \`coingecko:{id}\`.`, string({ minLength: 1 }), example);

const CHAT_BODY: JsonSchema = {
  type: 'object',
  required: ['model', 'messages'],
  examples: [{ model: 'llm-fast', messages: [{ role: 'user', content: 'Tell me a joke about cats.' }] }],
  properties: {
    model: {
      type: 'string',
      description: `One of the aliases ${LLM_ALIAS_NAMES.join(', ')}, or a full model id vendor/model.`,
      anyOf: [{ enum: [...LLM_ALIAS_NAMES] }, { pattern: '^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._:-]*$' }],
    },
    messages: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        required: ['role', 'content'],
        properties: { role: { type: 'string', enum: ['system', 'user', 'assistant', 'tool'] }, content: {} },
        additionalProperties: true,
      },
    },
  },
  additionalProperties: true,
};

export const ROUTE_TEXTS: Readonly<Record<string, RouteText>> = {
  'chain-stocks-quote': {
    summary: 'Quote a tokenized stock',
    description:
      'Live quote of one tokenized stock on the stock chain, by ticker `symbol` (required) or by token contract `address`. ' +
      'GET takes them as query parameters; POST takes the same as an optional JSON body `{symbol, address}` with no other properties.',
    shape: {
      query: SYMBOL_OR_ADDRESS,
      body: { required: false, description: 'The same as the query: `symbol` (required) and optionally `address`.', schema: SYMBOL_BODY },
    },
  },
  'chain-stocks-report': {
    summary: 'Tokenized stock market report',
    description: 'A full report on the tokenized stock market. Query: a free-form `params` object forwarded verbatim. ' + 'POST takes an optional JSON object, forwarded verbatim.',
    shape: {
      freeFormQuery: true,
      body: { required: false, description: 'Any JSON object, forwarded verbatim.', schema: { type: 'object', additionalProperties: true } },
    },
  },
  'chain-stocks-stocks': {
    summary: 'List tokenized stocks',
    description: 'All tokenized stocks listed on the stock chain, with contract addresses, live prices, fees and limits. No input; POST takes an empty JSON object.',
    shape: {
      body: { required: false, description: 'An empty JSON object.', schema: { type: 'object', maxProperties: 0, additionalProperties: false } },
    },
  },
  'chain-stocks-token': {
    summary: 'Tokenized stock token details',
    description:
      'Token details of one tokenized stock (contract, decimals, supply), by ticker `symbol` (required) or token contract `address`. ' +
      'Same input as the quote: query parameters for GET, an optional JSON body `{symbol, address}` for POST.',
    shape: {
      query: SYMBOL_OR_ADDRESS,
      body: { required: false, description: 'The same as the query: `symbol` (required) and optionally `address`.', schema: SYMBOL_BODY },
    },
  },
  'catjoke-joke': {
    summary: 'A random cat joke',
    description: 'Returns a cat joke with setup and punchline. Query: a free-form `params` object forwarded verbatim.',
    shape: { freeFormQuery: true },
  },
  'llm-chat-chat': {
    summary: 'Chat completion',
    description:
      'Chat-completions style request, forwarded verbatim: a JSON body with `model` and `messages` (a list of `{role, content}`). ' +
      `\`model\` is one of the aliases ${LLM_ALIAS_NAMES.map((a) => `\`${a}\``).join(', ')} (mapped to the operator's configured models) ` +
      'or a full model id of the form `vendor/model`. Query: a free-form `params` object.',
    shape: {
      freeFormQuery: true,
      body: { required: true, description: 'Chat-completions request.', schema: CHAT_BODY },
    },
  },
  'weather-air-quality': {
    summary: 'Air quality',
    description:
      'Current and hourly air quality (particulate matter, ozone, nitrogen dioxide, AQI) at a coordinate. ' +
      'Query: `latitude`, `longitude`, `current` (comma list of variables) and other upstream keys, e.g. `hourly`.',
    shape: {
      query: [LATITUDE, LONGITUDE, q('current', comma('current variables'), string(), 'european_aqi,pm10,pm2_5'), q('hourly', comma('hourly variables'), string(), 'pm10,pm2_5')],
      freeFormQuery: true,
    },
  },
  'weather-forecast': {
    summary: 'Weather forecast',
    description:
      'Weather forecast for a coordinate, up to 16 days: current conditions plus hourly and daily series. ' +
      'Query: `latitude`, `longitude`, and comma lists of variables in `current`, `hourly` and `daily`; `forecast_days` (1-16).',
    shape: {
      query: [
        LATITUDE,
        LONGITUDE,
        q('current', comma('current variables'), string(), 'temperature_2m,wind_speed_10m'),
        q('hourly', comma('hourly variables'), string(), 'temperature_2m,precipitation'),
        q('daily', comma('daily variables'), string(), 'temperature_2m_max,temperature_2m_min'),
        q('forecast_days', 'Number of forecast days.', { type: 'integer', minimum: 1, maximum: 16 }, '7'),
      ],
      freeFormQuery: true,
    },
  },
  'weather-geocode': {
    summary: 'Geocode a place name',
    description: 'Finds places by name and returns their coordinates, country, region, time zone and population. Query: `name`, `count`.',
    shape: {
      query: [q('name', 'Place name to search for.', string({ minLength: 1 }), 'Berlin', true), q('count', 'Maximum number of results.', { type: 'integer', minimum: 1, maximum: 100 }, '5')],
    },
  },
  'fx-currencies': {
    summary: 'List currencies',
    description: 'Map of every supported currency code to its name. No input.',
    shape: {},
  },
  'fx-historical': {
    summary: 'Historical exchange rates',
    description:
      'Reference rates on a past date, or a time series over a date range, since 1999. Append the date (`YYYY-MM-DD`) or ' +
      'the range joined by two dots (`YYYY-MM-DD..YYYY-MM-DD`) to the path. Query: `base`, `symbols`.',
    shape: {
      query: [q('base', 'Base currency code.', string(), 'USD'), q('symbols', comma('currency codes to return'), string(), 'EUR,GBP')],
      segments: [
        seg(
          'dates',
          '{dates}',
          'A date, or a date range joined by two dots.',
          p(
            'dates',
            'A date `YYYY-MM-DD`, or a range `YYYY-MM-DD..YYYY-MM-DD` (open-ended when the end is left out).',
            string({ pattern: '^\\d{4}-\\d{2}-\\d{2}(\\.\\.(\\d{4}-\\d{2}-\\d{2})?)?$' }),
            '2024-01-02',
          ),
        ),
      ],
    },
  },
  'fx-latest': {
    summary: 'Latest exchange rates',
    description: 'The latest reference exchange rates. Query: `base` currency and `symbols` (comma list of currency codes).',
    shape: { query: [q('base', 'Base currency code.', string(), 'EUR'), q('symbols', comma('currency codes to return'), string(), 'USD,GBP')] },
  },
  'crypto-prices-chart': {
    summary: 'Token price chart',
    description: 'Price series of one or more coins. Append comma-separated coin ids to the path. Query: `period` (spacing, e.g. `1d`), `span` (number of points).',
    shape: {
      query: [q('period', 'Spacing of the points, e.g. `1h` or `1d`.', string(), '1d'), q('span', 'Number of points.', { type: 'integer', minimum: 1 }, '10')],
      segments: [seg('coins', '{coins}', 'The coins to chart.', COINS('coingecko:ethereum'))],
    },
  },
  'crypto-prices-current': {
    summary: 'Current token prices',
    description: 'Current prices of tokens. Append comma-separated coins, each `{chain}:{address}` or `coingecko:{id}`, to the path.',
    shape: { segments: [seg('coins', '{coins}', 'The coins to price.', COINS('coingecko:bitcoin,ethereum:0xdac17f958d2ee523a2206206994597c13d831ec7'))] },
  },
  'crypto-prices-historical': {
    summary: 'Token prices at a timestamp',
    description: 'Prices of tokens at a past moment. Append `{unix_timestamp}/{coins}` to the path (coins comma-separated, as for current prices).',
    shape: {
      segments: [
        seg(
          'at',
          '{timestamp}/{coins}',
          'A unix timestamp and the coins.',
          p('timestamp', 'Unix timestamp in seconds.', string({ pattern: '^[0-9]{1,12}$' }), '1704067200'),
          COINS('coingecko:bitcoin'),
        ),
      ],
    },
  },
  'defi-chains': {
    summary: 'TVL of all chains',
    description: 'Current total value locked of every chain. No input.',
    shape: {},
  },
  'defi-protocols': {
    summary: 'All DeFi protocols',
    description: 'Every tracked DeFi protocol with its category, chains and total value locked. No input; large response.',
    shape: {},
  },
  'defi-stablecoins': {
    summary: 'Stablecoin supplies',
    description: 'Every tracked stablecoin with its peg and circulating supply. Query: `includePrices` (boolean) adds current prices.',
    shape: { query: [q('includePrices', 'Include current prices.', { type: 'boolean' }, 'true')] },
  },
  'defi-tvl': {
    summary: 'TVL of a protocol',
    description: 'Current total value locked of one protocol in USD. Append the protocol slug to the path. Returns a bare number.',
    shape: {
      segments: [seg('protocol', '{protocol}', 'The protocol.', p('protocol', 'Protocol slug.', string({ minLength: 1 }), 'uniswap'))],
      response: 'number',
    },
  },
  'wiki-search': {
    summary: 'Search articles',
    description: 'Full-text search of encyclopedia articles, returning titles and excerpts. Query: `q`, `limit`.',
    shape: {
      query: [q('q', 'Search terms.', string({ minLength: 1 }), 'solar eclipse', true), q('limit', 'Maximum number of results.', { type: 'integer', minimum: 1, maximum: 100 }, '5')],
    },
  },
  'wiki-summary': {
    summary: 'Article summary',
    description: 'Summary of one encyclopedia article: title, description and lead extract. Append the article title to the path.',
    shape: {
      segments: [seg('title', '{title}', 'The article.', p('title', 'Article title, spaces as underscores.', string({ minLength: 1 }), 'Alan_Turing'))],
    },
  },
  'words-define': {
    summary: 'Define a word',
    description: 'Dictionary definitions of a word, by part of speech, with phonetics and examples. Append the word to the path.',
    shape: { segments: [seg('word', '{word}', 'The word.', p('word', 'The word to define.', string({ minLength: 1 }), 'serendipity'))] },
  },
  'words-related': {
    summary: 'Related words',
    description: 'Words related to a query, scored: similar meaning (`ml`), rhymes (`rel_rhy`), synonyms (`rel_syn`), spelling pattern (`sp`), at most `max` results.',
    shape: {
      query: [
        q('ml', 'Means like: words with a similar meaning.', string(), 'ringing in the ears'),
        q('rel_rhy', 'Words that rhyme with this word.', string(), 'grape'),
        q('rel_syn', 'Synonyms of this word.', string(), 'ocean'),
        q('sp', 'Spelled like: a pattern with `?` and `*` wildcards.', string(), 'hipopatamus'),
        q('max', 'Maximum number of results.', { type: 'integer', minimum: 1, maximum: 1000 }, '10'),
      ],
    },
  },
  'news-search-front-page': {
    summary: 'Tech news front page',
    description: 'The stories currently on the front page of the technology news community. No input required.',
    shape: { freeFormQuery: true },
  },
  'news-search-search': {
    summary: 'Search tech news',
    description: 'Full-text search of stories and comments. Query: `query`, `tags` (e.g. `story`), `hitsPerPage`, `numericFilters` (e.g. `points>100`).',
    shape: {
      query: [
        q('query', 'Search terms.', string(), 'webassembly'),
        q('tags', 'Tag filter, e.g. `story`, `comment`, `author_pg`.', string(), 'story'),
        q('hitsPerPage', 'Results per page.', { type: 'integer', minimum: 1, maximum: 1000 }, '10'),
        q('numericFilters', 'Numeric conditions, e.g. `points>100,created_at_i>1700000000`.', string(), 'points>100'),
      ],
    },
  },
  'world-data-country': {
    summary: 'Country facts',
    description:
      'Country facts (region, income level, capital, coordinates). Append a country ISO code to the path for one country, or leave it out for all. ' + 'Query: `format` (`json`), `per_page`.',
    shape: {
      query: [q('format', 'Response format; use `json`.', string(), 'json'), q('per_page', 'Records per page.', { type: 'integer', minimum: 1 }, '50')],
      segments: [seg('iso', '{iso}', 'One country.', p('iso', 'ISO 3166 alpha-2 or alpha-3 country code.', string({ pattern: '^[A-Za-z]{2,3}$' }), 'DE'))],
    },
  },
  'world-data-indicator': {
    summary: 'Development indicator of a country',
    description:
      'Yearly values of a development indicator (e.g. `NY.GDP.MKTP.CD`, `SP.POP.TOTL`) for a country. Append `{iso}/indicator/{code}` to the path. ' +
      'Query: `format` (`json`), `date` (a year or a range joined by a colon, e.g. `2000:2020`).',
    shape: {
      query: [q('format', 'Response format; use `json`.', string(), 'json'), q('date', 'A year, or a range joined by a colon.', string(), '2015:2020')],
      segments: [
        seg(
          'series',
          '{iso}/indicator/{code}',
          'A country and an indicator.',
          p('iso', 'ISO 3166 alpha-2 or alpha-3 country code.', string({ pattern: '^[A-Za-z]{2,3}$' }), 'BR'),
          p('code', 'Indicator code.', string({ minLength: 1 }), 'SP.POP.TOTL'),
        ),
      ],
    },
  },
  'chain-explorer-address': {
    summary: 'Address details',
    description: 'Balance and activity of an address. Append the address to the path, optionally followed by `transactions` or `token-balances`.',
    shape: {
      segments: [
        seg('address', '{address}', 'The address.', p('address', 'Address.', ADDRESS, '0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045')),
        seg(
          'address-view',
          '{address}/{view}',
          'A view of the address.',
          p('address', 'Address.', ADDRESS, '0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045'),
          p('view', 'Which list to return.', { type: 'string', enum: ['transactions', 'token-balances'] }, 'transactions'),
        ),
      ],
    },
  },
  'chain-explorer-stats': {
    summary: 'Chain statistics',
    description: 'Network statistics: blocks, transactions, addresses, gas prices and coin price. No input.',
    shape: {},
  },
  'chain-explorer-token': {
    summary: 'Tokens and holders',
    description: 'Search tokens with query `q`, or append a token contract address to the path for its details, optionally followed by `holders`.',
    shape: {
      query: [q('q', 'Token name or symbol to search for.', string(), 'USD')],
      segments: [
        seg('contract', '{address}', 'One token.', p('address', 'Token contract address.', ADDRESS, '0xdAC17F958D2ee523a2206206994597C13D831ec7')),
        seg('holders', '{address}/holders', 'Holders of one token.', p('address', 'Token contract address.', ADDRESS, '0xdAC17F958D2ee523a2206206994597C13D831ec7')),
      ],
    },
  },
  'chain-explorer-tx': {
    summary: 'Transactions',
    description: 'The latest transactions, or append a transaction hash to the path for one transaction, optionally followed by `logs` or `token-transfers`.',
    shape: {
      segments: [
        seg('hash', '{hash}', 'One transaction.', p('hash', 'Transaction hash.', TX_HASH, `0x${'ab'.repeat(32)}`)),
        seg(
          'hash-view',
          '{hash}/{view}',
          'A view of one transaction.',
          p('hash', 'Transaction hash.', TX_HASH, `0x${'ab'.repeat(32)}`),
          p('view', 'Which list to return.', { type: 'string', enum: ['logs', 'token-transfers'] }, 'logs'),
        ),
      ],
    },
  },
  'books-search': {
    summary: 'Search books',
    description: 'Searches the open book catalog by free text, title words and author. Query: `q`, `author`, `limit`.',
    shape: {
      query: [
        q('q', 'Search terms.', string(), 'the lord of the rings'),
        q('author', 'Author name.', string(), 'tolkien'),
        q('limit', 'Maximum number of results.', { type: 'integer', minimum: 1, maximum: 1000 }, '5'),
      ],
    },
  },
  'books-work': {
    summary: 'Work record',
    description: 'The catalog record of one work: title, description, subjects, covers. Append the work record path (e.g. `OL45804W.json`) to the path.',
    shape: {
      segments: [seg('record', '{record}', 'The work record.', p('record', 'Work id, optionally with the `.json` suffix.', string({ pattern: '^OL[0-9]+W(\\.json)?$' }), 'OL45804W.json'))],
    },
  },
  'filings-facts': {
    summary: 'Company financial facts',
    description: 'All reported financial facts of a company (revenues, assets, shares outstanding by period). Append the zero-padded company id with the `.json` suffix.',
    shape: { segments: [seg('company', '{company}', 'The company.', CIK_JSON)] },
  },
  'filings-filings': {
    summary: 'Company filing history',
    description: 'The filing history of a company (forms, dates, accession numbers) with its names and tickers. Append the zero-padded company id with the `.json` suffix.',
    shape: { segments: [seg('company', '{company}', 'The company.', CIK_JSON)] },
  },
  'filings-tickers': {
    summary: 'Ticker to company map',
    description: 'Maps every ticker to its company id and company name. No input.',
    shape: {},
  },
  'treasury-debt': {
    summary: 'Federal debt outstanding',
    description: 'Daily total public debt outstanding. Query: `sort`, `page[size]`, `filter`.',
    shape: { query: TREASURY_QUERY },
  },
  'treasury-exchange-rates': {
    summary: 'Treasury reporting exchange rates',
    description: 'Quarterly exchange rates of foreign currencies used for federal reporting. Query: `sort`, `page[size]`, `filter`.',
    shape: { query: TREASURY_QUERY },
  },
  'treasury-interest-rates': {
    summary: 'Average interest rates on federal debt',
    description: 'Monthly average interest rates on treasury securities, by security type. Query: `sort`, `page[size]`.',
    shape: { query: TREASURY_QUERY.slice(0, 2) },
  },
  'crypto-markets-coin': {
    summary: 'Coin market data',
    description: 'Market data of one crypto asset: price, market cap, volume and 24h change. Append the coin id (e.g. `bitcoin`) to the path.',
    shape: { segments: [seg('id', '{id}', 'The coin.', p('id', 'Coin id.', string({ minLength: 1 }), 'bitcoin'))] },
  },
};
