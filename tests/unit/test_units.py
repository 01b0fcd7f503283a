"""Across languages a number keeps its unit (`answering.units`): invented statements that reuse a page's
numbers were kept by cross-lingual grounding (bench/calibrate_crosslingual.py)."""

import pytest

from assistant.answering.units import currency_as_in_sources, units_agree, units_in

PAGE = (
    "Change your laptop screen lock time from 5 Minutes (Sourcegraph standards) to 1 or 2 minutes. "
    "Use passwords of 15 or more characters. After 9am it costs 7 EUR per day. "
    "Itemized receipts must be included for any reimbursement requests over $25."
)


@pytest.mark.parametrize("sentence", [
    "出差前把笔记本电脑的锁屏时间从 5 分钟改为 1 或 2 分钟。",
    "密码至少要有 15 个字符。",
    "密码最好有 15 个或更多字符。",  # "个或更多" between: not a checked unit
    "停车场9点以后每天收费7欧元。",
    "报销金额超过２５美元时需要提供明细收据。",  # full-width digits
])
def test_a_number_with_the_pages_unit_agrees(sentence):
    assert units_agree(sentence, PAGE)


@pytest.mark.parametrize("sentence", [
    "密码必须每 15 天更换一次。",  # 15 characters, not days
    "出差时每 5 天要更换一次密码。",  # 5 minutes
    "报销时金额超过25元需要提供明细收据。",  # yuan, where the page says dollars
    "停车场9点以后每天收费7美元。",
])
def test_a_number_with_another_unit_does_not(sentence):
    assert not units_agree(sentence, PAGE)


def test_units_are_read_from_the_sentence():
    assert units_in("闲置 10 分钟后锁定，24小时内重置") == [("10", "分钟"), ("24", "小时")]
    assert units_in("最多 3 次") == []


BUYBACK = "The entire buyback process, including a full wipe, should be completed within two weeks of receiving a new device."


def test_a_number_in_chinese_numerals_is_checked_against_digits_and_english_words():
    # bench/calibrate_crosslingual.py: "两个月" was rescued by its rendering against "within two weeks".
    assert units_in("回购流程应在收到新设备后两个月内完成。") == [("2", "个月")]
    assert not units_agree("回购流程应在收到新设备后两个月内完成。", BUYBACK)
    assert units_agree("回购流程应在收到新设备后两周内完成。", BUYBACK)
    assert units_agree("一周内提交报销。", "Submit expenses within a week.")
    assert not units_agree("一周内提交报销。", "Submit expenses within a month.")
    assert units_agree("密码至少要有十五个字符。", PAGE) and not units_agree("密码至少要有十二个字符。", PAGE)
    # Not quantities: an ordinal, and 一点 ("a little").
    assert units_in("入职第一天要做什么？") == [] and units_in("请早一点到。") == []


def test_an_amount_in_yuan_takes_the_currency_that_the_english_sources_state_it_in():
    allowances = "entitled to the monthly benefit for mobile phone ($75), internet ($50), wellness ($100)"
    assert currency_as_in_sources("网络补贴为50元，手机补贴为 75 元。", [allowances]) == "网络补贴为50美元，手机补贴为 75 美元。"
    assert currency_as_in_sources("停车费每天7元。", [PAGE]) == "停车费每天7欧元。"  # "7 EUR per day"
    # An amount the sources do not state, or state in yuan too, or in two currencies: unchanged.
    assert currency_as_in_sources("网络补贴为60元。", [allowances]) == "网络补贴为60元。"
    assert currency_as_in_sources("补贴为50元。", [allowances, "or 50 RMB in China"]) == "补贴为50元。"
    assert currency_as_in_sources("补贴为50元。", [allowances, "EUR 50 in Europe"]) == "补贴为50元。"
    # Already in dollars, or no English source: unchanged.
    assert currency_as_in_sources("网络补贴为50美元。", [allowances]) == "网络补贴为50美元。"
    assert currency_as_in_sources("网络补贴为50元。", []) == "网络补贴为50元。"
