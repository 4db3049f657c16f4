-- Monotonic records (src/store/record-order.ts): an ordered collection's rows carry their record's rank and the
-- series it is compared within; the upsert keeps a stored row of higher rank. NULL: unordered (written as before).
ALTER TABLE records ADD COLUMN rank bigint, ADD COLUMN series text;
