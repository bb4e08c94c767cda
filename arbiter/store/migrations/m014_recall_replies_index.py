"""m014_recall_replies_index: `recall_entries_conversation`: the reply lookup of recall seeks by (conversation,
valid_from, id).

Recall's reply lookup (`recall._sql.neighbours`: the turns before and after a candidate, by valid time within
its conversation) seeks instead of scanning every row of `recall_entries`.
"""

SQL = """
        CREATE INDEX recall_entries_conversation ON recall_entries(conversation_id, valid_from, entry_id)
            WHERE conversation_id IS NOT NULL;
        """
