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
    -- The write that indexed it: its postings are in the rows of that segment.
    seg bigint NOT NULL,
    -- The scope column's tokens ("c12", "u3", "a5"; "s4", "u5" for facts), which MATCH filters test.
    scope text[] NOT NULL,
    -- Its distinct terms, space-separated (a token never holds a space), and their positions: per term in that
    -- order, a count then the positions, int32 little-endian, each (column << 24) | offset. Only phrases and
    -- NEAR read them, in Python; SQL never looks inside.
    terms text COLLATE "C" NOT NULL,
    pos bytea NOT NULL,
    PRIMARY KEY (tenant_id, kind, scope_id, doc_id)
);

-- Postings in segments, as FTS5 keeps them: one row per (term, write), holding that write's documents with the
-- term, in id order, and per document its length and its tokens per column (t0..t4, in the kind's column order,
-- the scope column last). A bulk write of a thousand entries writes a row per distinct word, not per word and
-- entry; a ranked search reads a term's rows and unnests them. `min_doc` and `max_doc` let a search over an id
-- range (from an id up; a conversation's entries) skip the segments outside it.
CREATE SEQUENCE fulltext_segments;
CREATE TABLE fulltext_postings (
    tenant_id bigint NOT NULL,
    kind smallint NOT NULL,
    scope_id bigint NOT NULL,
    term text COLLATE "C" NOT NULL,
    seg bigint NOT NULL,
    min_doc bigint NOT NULL,
    max_doc bigint NOT NULL,
    doc_ids bigint[] NOT NULL,
    lens integer[] NOT NULL,
    t0 integer[] NOT NULL,
    t1 integer[] NOT NULL,
    t2 integer[] NOT NULL,
    t3 integer[] NOT NULL,
    t4 integer[] NOT NULL,
    PRIMARY KEY (tenant_id, kind, scope_id, term, seg)
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
