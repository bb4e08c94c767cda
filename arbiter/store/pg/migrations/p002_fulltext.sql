-- Full text on PostgreSQL: Arbiter's own postings, scored as BM25 in SQL (arbiter/store/pg/fulltext.py).
--
-- An index is (tenant_id, kind, scope_id): kind 1 is an entries scope index (scope_id the visibility scope, as
-- SQLite's entries_fts_<scope>), 2 the tenant's past texts (entry_revisions_fts), 3 the tenant's facts
-- (facts_fts); 2 and 3 have scope_id 0. Every key starts with tenant_id, so Citus can distribute all three
-- tables by it, and every statistic is read within one index: another tenant's writes move no score.
-- Terms are the stems of SQLite's own FTS5 tokenizer (porter unicode61 remove_diacritics 2), computed in
-- Python, and compared bytewise (COLLATE "C"), as FTS5 compares them for a prefix.

CREATE TABLE fulltext_docs (
    tenant_id bigint NOT NULL,
    kind smallint NOT NULL CHECK (kind IN (1, 2, 3)),
    scope_id bigint NOT NULL,
    doc_id bigint NOT NULL,
    -- Tokens in every column, the scope column's too: FTS5's column_size(-1), BM25's document length.
    len integer NOT NULL,
    -- The scope column's tokens ("c12", "u3", "a5"; "s4", "u5" for facts), which MATCH filters test.
    scope text[] NOT NULL,
    -- The document's distinct terms: its postings' keys, so removing it is index lookups, not a scan.
    terms text[] COLLATE "C" NOT NULL,
    PRIMARY KEY (tenant_id, kind, scope_id, doc_id)
);

-- One row per (document, term): tokens per column (t0..t4, in the kind's column order, the scope column last)
-- and their positions, each (column << 24) | offset, so a phrase's next token is at position + 1 and tokens of
-- two columns are never near. The primary key carries what ranking reads (len, t0..t4), so a ranked
-- search is an index-only scan per term; positions are read only for phrases and NEAR.
CREATE TABLE fulltext_postings (
    tenant_id bigint NOT NULL,
    kind smallint NOT NULL,
    scope_id bigint NOT NULL,
    term text COLLATE "C" NOT NULL,
    doc_id bigint NOT NULL,
    len integer NOT NULL,
    t0 integer NOT NULL,
    t1 integer NOT NULL,
    t2 integer NOT NULL,
    t3 integer NOT NULL,
    t4 integer NOT NULL,
    pos integer[] NOT NULL,
    PRIMARY KEY (tenant_id, kind, scope_id, term, doc_id) INCLUDE (len, t0, t1, t2, t3, t4)
);

-- Per index, kept exactly by every write: documents and tokens (FTS5's row count and column_total_size(-1)).
CREATE TABLE fulltext_totals (
    tenant_id bigint NOT NULL,
    kind smallint NOT NULL,
    scope_id bigint NOT NULL,
    rows bigint NOT NULL,
    tokens bigint NOT NULL,
    PRIMARY KEY (tenant_id, kind, scope_id)
);
