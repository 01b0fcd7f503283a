"""The one question check: the same refusal for every entry point, at the one length bound."""

import pytest

from assistant.api.schemas.chat import ChatRequest
from assistant.api.schemas.search import SearchRequest
from assistant.core.errors import InvalidRequestError
from assistant.core.questions import MAX_QUERY_CHARS, check_query


def test_a_question_at_the_bound_passes_and_one_past_it_is_refused():
    check_query("x" * MAX_QUERY_CHARS)
    with pytest.raises(InvalidRequestError, match=f"{MAX_QUERY_CHARS + 1} characters; at most {MAX_QUERY_CHARS}"):
        check_query("x" * (MAX_QUERY_CHARS + 1))


@pytest.mark.parametrize("blank", ["", "   ", "\n\t"])
def test_a_blank_question_is_refused(blank):
    with pytest.raises(InvalidRequestError, match="empty"):
        check_query(blank)


def test_bytes_of_another_encoding_are_named():
    with pytest.raises(InvalidRequestError, match="character 4 is a lone surrogate"):
        check_query("pass\udcffword")


def test_the_api_models_declare_the_same_bound():
    for model, name in ((ChatRequest, "question"), (SearchRequest, "query")):
        schema = model.model_json_schema()["properties"][name]
        assert schema["maxLength"] == MAX_QUERY_CHARS, model
