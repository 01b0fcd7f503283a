"""The kinds of personal data a source's ACL manifest may ask to mask (`mask_pii`): named here, below
the ACL manifest (`assistant.auth.acl_manifest`) and the masking (`assistant.compliance.pii`) alike."""

from __future__ import annotations

from typing import Literal

# `assistant.compliance.pii` finds and masks each. The order is the priority when two findings
# overlap: an e-mail address such as 13812345678@qq.com is one address, not a phone number; an
# 18-digit resident ID is not read as a card or a phone.
PiiKind = Literal["email", "phone", "cn_resident_id", "bank_card"]
PII_KINDS: tuple[PiiKind, ...] = ("email", "cn_resident_id", "bank_card", "phone")
