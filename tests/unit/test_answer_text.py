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


def test_without_markers_no_source_is_listed_as_if_cited():
    assert make_citations("An answer without markers.", [_chunk(n) for n in range(1, 6)]) == []


def test_citations_carry_the_relative_path_and_document_route_not_the_server_path():
    (cit,) = make_citations("Fact [1].", [_chunk(1)])
    assert (cit.source, cit.route) == ("f1.md", "/api/documents/d1/content")
    assert "file://" not in str(cit.to_dict())
