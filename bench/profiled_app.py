"""The app under uvicorn, as `bench/bench_load.py` starts it, with a profiler switched on and off by
signals: SIGUSR1 starts cProfile, SIGUSR2 stops it and writes the stats (thread CPU time) to
`<prefix>.<n>.prof` (n = 0, 1, ... per start/stop), the event loop's thread only, and to
`<prefix>.<n>.all.prof`, the loop merged with the work done in other threads while it ran: each call
that `asyncio.to_thread` (or any thread pool) runs (retrieval, SQL, prompt packing, audit) and each
batch of the query-embedding batcher's thread, each profiled on its own thread's CPU clock.

Usage: python bench/profiled_app.py PREFIX [uvicorn options...]   (as `python -m uvicorn ...`)
"""

from __future__ import annotations

import cProfile
import functools
import pstats
import signal
import sys
import threading
import time
from concurrent.futures import thread as pool_thread

import uvicorn.main

from assistant.retrieval.query_batcher import QueryBatcher

prefix = sys.argv.pop(1)
state: dict = {"profile": None, "n": 0, "threads": []}
_lock = threading.Lock()


def start(*_) -> None:
    """SIGUSR1: a new profile from now on."""
    with _lock:
        state["threads"] = []
    state["profile"] = cProfile.Profile(time.thread_time)  # CPU of the loop thread, not wall time
    state["profile"].enable()


def stop(*_) -> None:
    """SIGUSR2: stop the profile and write it (the loop alone, then with the other threads' work)."""
    profile = state["profile"]
    if profile is not None:
        state["profile"] = None
        profile.disable()
        with _lock:
            others = list(state["threads"])
        merged = pstats.Stats(profile)
        for other in others:
            merged.add(other)
        merged.dump_stats(f"{prefix}.{state['n']}.all.prof")
        # Written last: bench_load.py waits for this file before its next run (and its SIGUSR1), so
        # the merge above is in no run's profile.
        profile.dump_stats(f"{prefix}.{state['n']}.prof")
        state["n"] += 1


def profiled(method):
    """`method`, run under a profile of its own thread's CPU while the loop's profile is on."""

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        if state["profile"] is None or threading.current_thread() is threading.main_thread():
            return method(*args, **kwargs)
        profile = cProfile.Profile(time.thread_time)
        profile.enable()
        try:
            return method(*args, **kwargs)
        finally:
            profile.disable()
            with _lock:
                state["threads"].append(profile)

    return wrapper


pool_thread._WorkItem.run = profiled(pool_thread._WorkItem.run)  # asyncio.to_thread's work
QueryBatcher._embed = profiled(QueryBatcher._embed)  # the batcher's own thread
signal.signal(signal.SIGUSR1, start)
signal.signal(signal.SIGUSR2, stop)
sys.exit(uvicorn.main.main())
