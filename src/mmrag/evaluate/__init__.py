"""The two-axis evaluator: task-level and process-level scores of any system, from its traces only.

``metrics`` (answers, retrieval, routing, sparsity, cost), ``judge`` (LLM judge and its
deterministic lexical proxy), ``fidelity`` (summary-only answering), ``evaluator`` (files ->
scores -> summaries), ``tables`` (ours beside the papers'). CLI: ``python -m mmrag.evaluate``.
"""
