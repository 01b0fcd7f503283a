"""Request-scoped dependencies as `Annotated` aliases: the composed assistant and the current principal."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from assistant.composition import Assistant
from assistant.core.jobs import JobDispatcher
from assistant.core.principals import ANONYMOUS, Principal


def get_assistant(request: Request) -> Assistant:
    return request.app.state.assistant


def get_dispatcher(request: Request) -> JobDispatcher:
    return request.app.state.dispatcher


def get_principal(request: Request) -> Principal:
    """The caller. Until sign-in is configured, every caller reads what `everyone` may read."""
    return ANONYMOUS


AssistantDep = Annotated[Assistant, Depends(get_assistant)]
DispatcherDep = Annotated[JobDispatcher, Depends(get_dispatcher)]
PrincipalDep = Annotated[Principal, Depends(get_principal)]
