"""mmrag: BRIT, DnC and MM-R2 for multimodal multi-hop RAG, reproduced and compared."""

__version__ = "0.1.0"
