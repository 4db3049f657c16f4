-- A merchant change is told to every node in the transaction that makes it: a row of the merchants collection
-- written (by any statement: a put, a claim's write, a transaction of several) NOTIFYs gate402_merchants with its
-- slug. PostgreSQL delivers it when, and only if, that transaction commits; so no write is committed untold, and
-- none told that did not commit (src/cli/compose-merchants.ts listens; src/gateway/merchants/merchant-records.ts).
CREATE FUNCTION gate402_merchant_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    PERFORM pg_notify('gate402_merchants', OLD.key);
  ELSE
    PERFORM pg_notify('gate402_merchants', NEW.key);
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER gate402_merchant_written
  AFTER INSERT OR UPDATE ON records
  FOR EACH ROW
  WHEN (NEW.collection = 'merchants')
  EXECUTE FUNCTION gate402_merchant_changed();

CREATE TRIGGER gate402_merchant_removed
  AFTER DELETE ON records
  FOR EACH ROW
  WHEN (OLD.collection = 'merchants')
  EXECUTE FUNCTION gate402_merchant_changed();
