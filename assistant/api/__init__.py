"""The HTTP API (FastAPI): chat, search, documents, jobs, and the web UI's static files."""
