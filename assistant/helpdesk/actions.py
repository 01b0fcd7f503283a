"""Whether a ticket asks someone to do something (reset, unlock, grant, install) rather than asks how.

A document can tell a requester how to request access; it cannot grant it. Such tickets go to an agent
whatever the documents say. The test is by rule, per sentence, in English and Chinese: a sentence is a
request for an action when it asks the helpdesk to act (an imperative or a "can you / I need you to"
form, or "I need ... reset/access") on an account, access or device, and is not a how-to question
("how do I reset my password?" is answered from documents).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Verbs of work only a person with admin rights can do for the requester.
_VERBS = (
    r"reset|unlock|unblock|re-?enable|enable|disable|deactivate|reactivate|grant|give|provision|create|set up|"
    r"add|remove|delete|revoke|restore|recover|approve|install|uninstall|upgrade|replace|change|update|assign|"
    r"transfer|extend|increase|renew|wipe|ship|order|send"
)
# "please reset ...", "can you unlock ...", "I need you to grant ...", "kindly add me to ..."
_ASK_TO_ACT = re.compile(
    rf"\b(?:please|pls|plz|kindly|can you|could you|would you|will you|can someone|could someone|can somebody|"
    rf"i need you to|i'd like you to|i would like you to|need you to|help me)\b[^.?!\n]{{0,40}}?\b(?:{_VERBS})\b",
    re.IGNORECASE,
)
# "Reset my password." / "Grant me access to X" at the start of a sentence.
_IMPERATIVE = re.compile(rf"^\s*(?:{_VERBS})\s+(?:me|my|our|us|the|a|an|access|this|that)\b", re.IGNORECASE)
# "I need access to X", "I need my account unlocked", "requesting admin rights".
_NEED = re.compile(
    r"\b(?:i need|i want|we need|i'd like|i would like|requesting|request for)\b[^.?!\n]{0,40}?"
    r"\b(?:access|permission|permissions|rights|account|license|licence|unlocked|reset|reinstated|admin)\b",
    re.IGNORECASE,
)
# A how-to question stays a question, whatever verbs it names.
_HOW_TO = re.compile(
    r"\b(?:how (?:do|can|should|would|to|long|often|many|much)|where (?:do|can|is|are)|what (?:is|are|do|should)|which|"
    r"who (?:do|can|should|has to|must|needs to|approves|is)|when (?:do|can|should|is|am)|"
    r"is there|is it possible|am i allowed|may i|can i|should i|do i)\b",
    re.IGNORECASE,
)
# Chinese: "请帮我重置", "帮我开通权限", "申请…权限", "给我开…", unless it asks 如何/怎么 (how).
_ZH_ACT = re.compile(r"(?:请|麻烦|帮我|帮忙|给我|替我)[^。？！?\n]{0,12}?(?:重置|解锁|开通|授权|添加|删除|恢复|安装|分配|启用|禁用|创建)")
_ZH_NEED = re.compile(r"(?:申请|需要|开通)[^。？！?\n]{0,12}?(?:权限|账号|账户|访问)")
_ZH_HOW_TO = re.compile(r"如何|怎么|怎样|哪里|在哪|是否可以|能否自己")
_SENTENCES = re.compile(r"[^.?!。？！\n]+[.?!。？！]?")


@dataclass(frozen=True)
class ActionRequest:
    """A sentence of the ticket that asks a person to act (`sentence`, as written, trimmed)."""

    sentence: str


def action_request(text: str) -> ActionRequest | None:
    """The first sentence of `text` that asks the helpdesk to do something for the requester, or None.

    Args:
        text: the ticket's subject and latest message.

    Returns:
        The sentence (trimmed, at most 200 characters), or None when every sentence is a question or a
        description ("Okta Verify is not prompting me", "how do I get access to X?").
    """
    for match in _SENTENCES.finditer(text):
        sentence = match.group(0).strip()
        if not sentence:
            continue
        if _ZH_ACT.search(sentence) or _ZH_NEED.search(sentence):
            if not _ZH_HOW_TO.search(sentence):
                return ActionRequest(sentence[:200])
            continue
        if _HOW_TO.search(sentence):
            continue
        if _ASK_TO_ACT.search(sentence) or _IMPERATIVE.search(sentence) or _NEED.search(sentence):
            return ActionRequest(sentence[:200])
    return None
