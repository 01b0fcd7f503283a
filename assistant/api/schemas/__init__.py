"""The request and response bodies of the HTTP API, one module per route module of
`assistant.api.routes` (`schemas.chat` for `routes.chat`...), and `schemas.common` for pieces several
of them share. Routes import their bodies from here; these modules never import a route.

The layers below the API return dataclasses, never these models. Where a route answers with such a
dataclass as it is (core's `UserPublic`, `ConversationPublic`, `UploadPublic`, `JobRecord`...), that
dataclass is its `response_model` and FastAPI serialises it; where the API reshapes one (a document's
metadata with its route, a ticket's decision as its viewer may see it), the model here is built from it.
"""
