"""Stop sequences applied to a token stream, whatever the backend.

Small models tend to echo the prompt's source blocks after their answer ("\n\n[6] path ..."); the
answer ends where such a block would begin. Held-back text is released once it cannot be a stop.
"""

from __future__ import annotations

import re

STOP_SEQUENCES = ("\n\n[", "\nSources:", "\nQuestion:", "\n\nSources", "<|im_end|>")


class StopFilter:
    """Feed deltas with `push`; it returns the text safe to emit and sets `stopped` at a stop."""

    def __init__(self, stops: tuple[str, ...] = STOP_SEQUENCES):
        self.stops = stops
        self.pending = ""
        self.stopped = False
        self._keep = max((len(s) - 1 for s in stops), default=0)
        self._firsts = frozenset(s[0] for s in stops if s)

    def push(self, delta: str) -> str:
        """Text that may be shown now (possibly empty)."""
        if self.stopped:
            return ""
        self.pending += delta
        if not any(c in self.pending for c in self._firsts):  # no stop can start in it (most deltas)
            out, self.pending = self.pending, ""
            return out
        cut = min((i for i in (self.pending.find(s) for s in self.stops) if i >= 0), default=-1)
        if cut >= 0:
            self.stopped = True
            out, self.pending = self.pending[:cut], ""
            return out
        keep = self._keep
        # Hold back only a suffix that could still grow into a stop sequence: one that starts with a
        # stop's first character (most deltas have none in their last `keep` characters: nothing held).
        hold = 0
        recent = self.pending[-keep:] if keep else ""
        if any(c in recent for c in self._firsts):
            for size in range(1, min(keep, len(self.pending)) + 1):
                tail = self.pending[-size:]
                if tail[0] in self._firsts and any(s.startswith(tail) for s in self.stops):
                    hold = size
        out, self.pending = self.pending[: len(self.pending) - hold], self.pending[len(self.pending) - hold :]
        return out

    def flush(self) -> str:
        """Whatever is still held back, at the end of the stream."""
        out, self.pending = ("" if self.stopped else self.pending), ""
        return out


class RepetitionGuard:
    """Detects a looping model in a token stream: the same stretch of text again and again.

    Feed deltas with `push`; it returns True once the last `ngram_chars` characters have occurred
    `max_repeats` times within the last `window_chars` (white space collapsed; a sentence repeated to the token limit, as
    SmolLM2-135M does, trips it on its third copy). 32 characters thrice is rare in a real answer
    (a list whose items share a 32-character opening is the nearest case) and short enough to catch a
    looping Chinese phrase, which has no spaces to count words by. Whole repeated sentences are caught
    earlier by `GroundedStream` (a sentence equal to an earlier one ends the answer).
    """

    def __init__(self, *, ngram_chars: int = 32, max_repeats: int = 3, window_chars: int = 1200):
        self.ngram_chars = ngram_chars
        self.max_repeats = max_repeats
        self.window_chars = window_chars
        self.flat = ""  # the text so far with white space collapsed, its last `window_chars` characters
        self.looping = False
        self.loop_at = 0  # characters of the delta that tripped the guard before the loop was found in it

    def push(self, delta: str) -> bool:
        """True once the text so far loops (and from then on). Each delta is collapsed once and appended
        (not the whole window again per delta: this runs for every streamed delta). On the delta that
        trips it, `loop_at` says how much of the delta came before: a delta of many tokens (one read of
        the server) is replayed a word at a time, so that it ends where a token-by-token stream would."""
        if self.looping:
            return True
        before = self.flat
        if self._push(delta):
            self.loop_at = len(delta)
            probe = RepetitionGuard(
                ngram_chars=self.ngram_chars, max_repeats=self.max_repeats, window_chars=self.window_chars
            )
            probe.flat = before
            for word in _WORD.finditer(delta):
                if probe._push(word.group()):
                    self.loop_at = word.start()
                    break
        return self.looping

    def _push(self, delta: str) -> bool:
        piece = _WHITE.sub(" ", delta)
        if piece[:1] == " " and (not self.flat or self.flat[-1] == " "):
            piece = piece[1:]
        flat = self.flat = (self.flat + piece)[-self.window_chars :]
        tail = flat[-self.ngram_chars - 1 :].rstrip()[-self.ngram_chars :]
        if len(tail) == self.ngram_chars:
            self.looping = flat.count(tail) >= self.max_repeats
        return self.looping


_WHITE = re.compile(r"\s+")
# A word, or one CJK character (Chinese has no spaces): the pieces a tripping delta is replayed in.
_WORD = re.compile(r"\s*(?:[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]|[^\s\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]+)")
