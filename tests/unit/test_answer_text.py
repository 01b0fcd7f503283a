"""Stop sequences on a token stream and the mapping of [n] markers to citations."""

import pytest

from assistant.answering.citations import cited_numbers, make_citations
from assistant.answering.stops import STOP_SEQUENCES, StopFilter
from assistant.core.llm.base import stop_list
from assistant.retrieval import RetrievedChunk


@pytest.mark.parametrize(
    "deltas, expected",
    [
        (["Use 15 chars [1", "].", "\n", "\n[6] comp", "any"], "Use 15 chars [1]."),
        (["a\n", "b"], "a\nb"),
        (["x\nQues", "tion: y"], "x"),
        (["[1] and [2]"], "[1] and [2]"),
    ],
)
def test_stop_filter(deltas, expected):
    f = StopFilter()
    out = "".join(f.push(d) for d in deltas) + f.flush()
    assert out == expected


def test_stop_sequences_travel_to_the_backend_as_a_list():
    assert stop_list(STOP_SEQUENCES) == list(STOP_SEQUENCES)
    assert stop_list("\nQuestion:") == ["\nQuestion:"]  # one sequence, not its characters
    assert stop_list(()) == []
    with pytest.raises(ValueError):
        stop_list(["\n\n[", ""])  # a server would stop before the first token


def _chunk(n: int) -> RetrievedChunk:
    return RetrievedChunk(f"c{n}", f"d{n}", 0, f"text {n}", f"f{n}.md", f"file:///f{n}.md", "", "", None, "en", 1.0 / n, 0.5)


def test_markers_map_to_sources_in_order_of_appearance():
    assert cited_numbers("A [2]. B [1, 3]。C【x】 [2]") == [2, 1, 3]
    cits = make_citations("Fact [2]. Other [9].", [_chunk(1), _chunk(2)])
    assert [(c.n, c.source, c.inline) for c in cits] == [(2, "f2.md", True)]


def test_without_markers_every_source_used_is_listed():
    cits = make_citations("An answer without markers.", [_chunk(n) for n in range(1, 6)])
    assert [(c.n, c.source, c.inline) for c in cits] == [(n, f"f{n}.md", False) for n in range(1, 6)]
