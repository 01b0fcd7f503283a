"""Stop sequences applied to a token stream, whatever the backend.

Small models tend to echo the prompt's source blocks after their answer ("\n\n[6] path ..."); the
answer ends where such a block would begin. Held-back text is released once it cannot be a stop.
"""

from __future__ import annotations

STOP_SEQUENCES = ("\n\n[", "\nSources:", "\nQuestion:", "\n\nSources", "<|im_end|>")


class StopFilter:
    """Feed deltas with `push`; it returns the text safe to emit and sets `stopped` at a stop."""

    def __init__(self, stops: tuple[str, ...] = STOP_SEQUENCES):
        self.stops = stops
        self.pending = ""
        self.stopped = False

    def push(self, delta: str) -> str:
        """Text that may be shown now (possibly empty)."""
        if self.stopped:
            return ""
        self.pending += delta
        cut = min((i for i in (self.pending.find(s) for s in self.stops) if i >= 0), default=-1)
        if cut >= 0:
            self.stopped = True
            out, self.pending = self.pending[:cut], ""
            return out
        keep = max((len(s) - 1 for s in self.stops), default=0)
        # Hold back only a suffix that could still grow into a stop sequence.
        hold = 0
        for size in range(1, min(keep, len(self.pending)) + 1):
            tail = self.pending[-size:]
            if any(s.startswith(tail) for s in self.stops):
                hold = size
        out, self.pending = self.pending[: len(self.pending) - hold], self.pending[len(self.pending) - hold :]
        return out

    def flush(self) -> str:
        """Whatever is still held back, at the end of the stream."""
        out, self.pending = ("" if self.stopped else self.pending), ""
        return out
