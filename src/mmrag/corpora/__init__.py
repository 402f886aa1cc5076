"""Corpora: the generated world, real corpora, loaders, document ingestion."""
