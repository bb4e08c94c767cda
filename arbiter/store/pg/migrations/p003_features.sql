-- Entities, facts and associations on PostgreSQL.
SELECT 1;
