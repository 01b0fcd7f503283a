"""Liveness."""

from fastapi import APIRouter

router = APIRouter()


@router.get("/healthz")
def healthz() -> dict:
    """`{"status": "ok"}` while the process serves requests."""
    return {"status": "ok"}
