-- Fencing (src/store/fence.ts): every lease carries the epoch of its holder's grant, drawn from one sequence, so a
-- new holder always gets a higher epoch than any before it, even after the row was deleted (a lease given back)
-- and taken again. A write carries the writer's lease name and epoch and commits only while they still match.
CREATE SEQUENCE gate402_lease_epochs;
ALTER TABLE gate402_leases ADD COLUMN epoch bigint NOT NULL DEFAULT nextval('gate402_lease_epochs');
