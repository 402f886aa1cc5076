"""Baseline systems: answer questions without any paper's full method, as traces the evaluator reads.

``single_shot``: one retrieval, one read (the flat dense-retrieval baseline of the cross-system
table and MM-R2's module ablations). Each is a :class:`mmrag.systems.System`.
"""
