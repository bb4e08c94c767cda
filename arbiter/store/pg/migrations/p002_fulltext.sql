-- Full text on PostgreSQL: filled in by store/pg/fulltext.py's step (being built on its own branch).
SELECT 1;
