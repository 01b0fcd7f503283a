"""Offline evaluation of retrieval and answers against a set of judged questions."""
