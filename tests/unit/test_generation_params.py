"""A request's generation parameters: the server's from settings, an OpenAI request's derived from them;
parameters equal to the server's (and only those) may use the answer cache."""

from __future__ import annotations

import pytest

from assistant.answering.request import GenerationParams
from assistant.answering.stops import STOP_SEQUENCES
from assistant.api.schemas.openai_compat import ChatCompletionRequest
from assistant.core.errors import InvalidRequestError
from assistant.core.settings import Settings

MESSAGES = [{"role": "user", "content": "How long should my password be?"}]


@pytest.fixture
def server(tmp_path) -> GenerationParams:
    return GenerationParams.from_settings(
        Settings(_env_file=None, data_dir=tmp_path, llm_max_tokens=24, llm_temperature=0.3)
    )


def params_of(defaults: GenerationParams, **fields) -> GenerationParams:
    return ChatCompletionRequest(model="assistant-rag", messages=MESSAGES, **fields).generation_params(defaults)


def test_the_servers_parameters_come_from_settings(server):
    assert server == GenerationParams(max_tokens=24, temperature=0.3, stop=STOP_SEQUENCES)


@pytest.mark.parametrize(
    "fields",
    [{}, {"max_tokens": 500}, {"max_completion_tokens": 24}, {"temperature": 0.3}, {"stop": STOP_SEQUENCES[0]}],
    ids=["nothing", "a-larger-limit", "the-same-limit", "the-same-temperature", "one-of-our-stops"],
)
def test_a_request_that_changes_nothing_has_the_servers_parameters(server, fields):
    assert params_of(server, **fields) == server


def test_a_request_narrows_the_limit_sets_the_temperature_and_adds_stops(server):
    params = params_of(server, max_tokens=50, max_completion_tokens=3, temperature=0.0, stop=["END", "\n\n["])
    assert params == GenerationParams(max_tokens=3, temperature=0.0, stop=(*STOP_SEQUENCES, "END"))
    assert params != server
    assert params_of(server, stop="END").stop == (*STOP_SEQUENCES, "END")  # a string is one sequence


def test_a_bad_stop_is_the_callers_error(server):
    with pytest.raises(InvalidRequestError, match="at most 4"):
        params_of(server, stop=["a", "b", "c", "d", "e"])
    with pytest.raises(InvalidRequestError, match="empty"):
        params_of(server, stop=[""])


@pytest.mark.parametrize(
    "fields, problem",
    [({"max_tokens": 0}, "max_tokens"), ({"temperature": 2.5}, "temperature"), ({"stop": ("a", "")}, "stop"),
     ({"stop": "END"}, "stop")],
)
def test_impossible_parameters_are_refused(fields, problem):
    with pytest.raises(ValueError, match=problem):
        GenerationParams(**fields)
