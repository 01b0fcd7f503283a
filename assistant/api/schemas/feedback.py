"""The admins' quality view (`assistant.api.routes.feedback`): the quality report with the slowest
answers and the knowledge gaps. A dataclass, as the reports it extends; ratings themselves are
`assistant.answering.store.FeedbackPublic`."""

from __future__ import annotations

from dataclasses import dataclass, field

from assistant.answering.store import QualityReport
from assistant.operations.knowledge_gaps import KnowledgeGap
from assistant.operations.store import SlowAnswer


@dataclass(frozen=True)
class QualityView(QualityReport):
    """The quality report with the slowest answers (slowest first) and the knowledge gaps (largest
    first); `gaps_withheld` counts the unserved questions left out of the gaps because their answer
    cited a document the viewer may not read."""

    slowest: list[SlowAnswer] = field(default_factory=list)
    gaps: list[KnowledgeGap] = field(default_factory=list)
    gaps_withheld: int = 0
