"""Answering: prompt building, generation, citations."""

from assistant.answering.answerer import Answer, Answerer, Citation  # noqa: F401
