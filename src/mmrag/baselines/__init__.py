"""Baseline systems: answer questions without any paper's full method, as traces the evaluator reads.

``single_shot``: one retrieval, one read (the flat dense-retrieval baseline of the cross-system
table and MM-R2's module ablations). ``bm25``: BM25 (bm25s) and dense flat top-k rankers, and the
"answer in retrieved context" share every retrieval and QA table reports for them.
"""
