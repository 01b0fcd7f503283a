"""Personal data found and masked in Chinese, English and mixed text; look-alikes left alone."""

from __future__ import annotations

import pytest

from assistant.compliance.pii import PII_KINDS, find_pii, mask_pii

# A valid resident ID (GB 11643 check character X) and Luhn-valid card numbers made for the test.
RESIDENT_ID = "11010519491231002X"
VISA = "4111 1111 1111 1111"
UNIONPAY = "6222021234567890123"

FOUND = [
    # (text, kind, the span that must be masked)
    ("联系人：alice.wang@example.com.cn，谢谢", "email", "alice.wang@example.com.cn"),
    ("mail bob+hr@corp.example.org today", "email", "bob+hr@corp.example.org"),
    ("请拨打13812345678咨询", "phone", "13812345678"),
    ("手机 138-1234-5678", "phone", "138-1234-5678"),
    ("电话：010-62345678", "phone", "010-62345678"),
    ("Tel. +86 21 6234 5678 (Shanghai)", "phone", "+86 21 6234 5678"),
    ("call +1 650-253-0000 now", "phone", "+1 650-253-0000"),
    (f"身份证号{RESIDENT_ID}。", "cn_resident_id", RESIDENT_ID),
    ("ID 110105 19491231 002X ok", "cn_resident_id", "110105 19491231 002X"),
    (f"card {VISA}.", "bank_card", VISA),
    (f"银行卡号：{UNIONPAY}", "bank_card", UNIONPAY),
]

LEFT_ALONE = [
    "Released on 2024-01-15, version 3.12.4, in the year 2019.",
    "会议在2023年5月12日召开，预算 1,250,000 元。",
    "order number 1234567890123 was shipped",  # 13 digits, Luhn-invalid, not 62-prefixed
    "ID 110105194912310021 is not valid",  # resident ID with a wrong check character
    "user@localhost and name@ are not addresses",
]


@pytest.mark.parametrize(("text", "kind", "span"), FOUND, ids=[f"{k}-{i}" for i, (_, k, _) in enumerate(FOUND)])
def test_found_and_masked(text: str, kind: str, span: str) -> None:
    spans = find_pii(text)
    assert [(s.kind, text[s.start : s.end]) for s in spans] == [(kind, span)]
    masked = mask_pii(text)
    assert span not in masked.text
    assert masked.counts[kind] == 1 and masked.total == 1
    assert masked.text == text.replace(span, {"email": "[EMAIL]", "phone": "[PHONE]",
                                              "cn_resident_id": "[ID_NUMBER]", "bank_card": "[BANK_CARD]"}[kind])


@pytest.mark.parametrize("text", LEFT_ALONE)
def test_look_alikes_left_alone(text: str) -> None:
    result = mask_pii(text)
    assert result.text == text
    assert result.total == 0
    assert set(result.counts) == set(PII_KINDS)


def test_mixed_document_counts_each_kind() -> None:
    text = (
        f"张三 zhang.san@example.com 13912345678；李四 li.si@example.com 0755-8888 6666；"
        f"身份证 {RESIDENT_ID}，卡号 {VISA}。其余文字保持不变: the quarterly report."
    )
    result = mask_pii(text)
    assert result.counts == {"email": 2, "cn_resident_id": 1, "bank_card": 1, "phone": 2}
    assert "其余文字保持不变: the quarterly report." in result.text
    assert "张三" in result.text and "李四" in result.text


def test_overlap_prefers_the_email() -> None:
    result = mask_pii("QQ邮箱 13812345678@qq.com")
    assert result.text == "QQ邮箱 [EMAIL]"
    assert result.counts["phone"] == 0


def test_only_asked_kinds() -> None:
    result = mask_pii("a@example.com 13812345678", kinds=["phone"])
    assert result.text == "a@example.com [PHONE]"
    assert result.counts == {"phone": 1}


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="'passport' is not one of"):
        mask_pii("x", kinds=["passport"])
