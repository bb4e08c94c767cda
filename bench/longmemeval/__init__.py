"""LongMemEval retrieval benchmark for Arbiter: `python -m bench.longmemeval run --dataset FILE`.

The protocol, kept identical to the one behind Arbiter's published figures:

- One tenant holds every question's haystack; each question gets its own
  conversation. Sessions shared between questions are ingested once per
  question, as the benchmark gives them.
- One `context` entry per turn: title = the turn's first 200 bytes with
  whitespace folded and control characters read as spaces (cut on a character boundary), content = the turn, no
  source, valid_from = the session's date (read as UTC) + 60 s x turn index.
  Which turn an entry is lives in the harness's state file (entry ids per
  conversation), never in the store: gold session ids start with `answer_`,
  and round 1 wrote them into `source`, which FTS5 indexes.
- Turns whose content is empty or only whitespace are skipped and counted (the
  store requires content); turns over the store's 64 KiB limit are cut on a
  character boundary and counted. Turn indexes keep counting skipped turns, so
  a source always names the turn's position in the dataset.
- Ground truth: the entries of the question's `has_answer` turns. Scored as
  the official code does: `_abs` questions are queried but not scored, and a
  question with no flagged turn scores 0 (no correct unit). Round 1's fallback (every entry of the
  `answer_session_ids` when no turn is flagged, abstention included) is
  reported beside it.
- Hits count by entry id: a copy of the same turn in another question's
  conversation is not this question's ground truth.
- Variants: `bm25` (tenant-wide), `graduated` (the question's conversation with
  tenant fill), `graph` (graduated + graph recall), `expand` (graduated + LLM
  query expansion), `rerank` (graduated + LLM rerank), `cascade` (graduated +
  rerank + fine rerank). The LLM variants run only with ANTHROPIC_API_KEY.
- Metrics over the top 10: R@1, R@5, R@10, MRR, NDCG@10 (binary relevance,
  the official discount: ranks 1 and 2 undiscounted),
  answer-session turn@5 (a turn of an answer session among the top 5; not
  LongMemEval's session recall, which `official.py` computes), latency percentiles of
  the recall round trip through the daemon's socket; overall and per type.
- LoCoMo files are recognised and read in their own format (`locomo.py`);
  `official.py` is LongMemEval's own protocol; `phrasing.py` the
  third-person rewrite.
"""
