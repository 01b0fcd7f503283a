"""Private RAG assistant: cited answers from internal documents, honouring each reader's ACL."""

__version__ = "0.1.0"
