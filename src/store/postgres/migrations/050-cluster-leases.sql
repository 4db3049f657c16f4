-- Leases of a cluster (src/store/postgres/leases.ts): a node's records, a relayer key, the stock desk key, each held
-- by one live node (its id and this run's boot id) until expires_at, by the database's clock.
CREATE TABLE gate402_leases (
  name text COLLATE "C" PRIMARY KEY,
  node text NOT NULL,
  boot text NOT NULL,
  expires_at timestamptz NOT NULL
);
