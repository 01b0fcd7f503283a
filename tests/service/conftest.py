"""Fixtures of the service tier (functions called directly against real services)."""

from tests.conftest_llm_server import llm_server, llm_server_factory  # noqa: F401
