"""Real corpora: the Wikipedia summaries, your own documents, the papers' dataset formats."""
