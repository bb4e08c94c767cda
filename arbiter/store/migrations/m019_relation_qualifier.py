"""m019_relation_qualifier: `relations.qualifier`: null, or `enables`/`prevents` on a `causes` relation only (a
CHECK) (see Associations).

Mnemon's causal sub-types as a qualifier of `causes` (store/relations.py): null is a direct cause; `enables`
an enabling condition, `prevents` a preventing factor. No other relation takes one. A column, not two more
relation types: they are the same edge for every reader that does not ask (graph recall walks them as causal,
one causal link per pair).
"""

SQL = """
        ALTER TABLE relations ADD COLUMN qualifier TEXT
            CHECK (qualifier IS NULL OR (relation = 'causes' AND qualifier IN ('enables', 'prevents')));
        """
