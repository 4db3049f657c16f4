-- Every collection's records, one row each, the value as JSON (json, not jsonb: it keeps any string a client sent,
-- \u0000 included). Keys compare byte by byte (COLLATE "C"), as LMDB orders them, so prefix listings agree.
CREATE TABLE records (
  collection text NOT NULL,
  key text COLLATE "C" NOT NULL,
  value json NOT NULL,
  PRIMARY KEY (collection, key)
);

-- Every set of claims (payment nonces, served payments, stock-order payments, sponsorships): one holder per key.
CREATE TABLE claims (
  space text NOT NULL,
  key text COLLATE "C" NOT NULL,
  holder text NOT NULL,
  PRIMARY KEY (space, key)
);
