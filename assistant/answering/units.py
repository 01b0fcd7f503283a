"""Across languages, a number must keep its unit: "每 15 天" (every 15 days) is not the page's "15 characters".

Cross-lingual grounding (a Chinese answer sentence, an English source) checks that every number of the
sentence is one the source states, and weighs the sentence's words through the dictionary and its
embedding; neither sees which quantity a number counts. On `bench/calibrate_crosslingual.py` it kept 3 of
5 invented statements that reuse a page's numbers with another unit ("密码必须每 15 天更换一次。" against
"15 characters or more"; "出差时每 5 天要更换一次密码。" against "5 Minutes"). Here a number written with a
unit in the Chinese sentence must appear with that unit in the English source, or the source does not
support the sentence. Units are a short closed list; a number with any other counter ("15 个", "3 次")
is not checked. A number may be written in Chinese numerals ("两周", "十五天"); the source may then write
it in digits or in English words ("two weeks"): "回购流程应在收到新设备后两个月内完成。" is not the page's
"within two weeks".

One slip is corrected rather than judged: the model writes a page's "$50" as "50元" (yuan) in a Chinese
answer. `currency_as_in_sources` gives such an amount the currency that the English sources write it
in, so that the reader is not told yuan where the page says dollars and the sentence is kept.
"""

from __future__ import annotations

import re
import unicodedata

# Chinese unit -> the English forms that may follow the number in the source (lower case, regex).
_AFTER = {
    "分钟": r"min(?:ute)?s?",
    "小时": r"h(?:ou)?rs?|h",
    "天": r"days?",
    "个工作日": r"(?:business|working) days?|days?",
    "工作日": r"(?:business|working) days?|days?",
    "周": r"weeks?",
    "个星期": r"weeks?",
    "星期": r"weeks?",
    "个月": r"months?",
    "秒": r"sec(?:ond)?s?|s",
    "个字符": r"(?:[\w-]+ ){0,3}char(?:acter)?s?",  # "15 or more characters"
    "字符": r"(?:[\w-]+ ){0,3}char(?:acter)?s?",
    "美元": r"usd|dollars?",
    "欧元": r"eur|euros?",
    "元": r"cny|rmb|yuan",
    "点": r"am|pm|a\.m\.|p\.m\.|o'clock|:\d\d",
}
# Currency symbols written before the number in English ("$25", "€7", "EUR 7").
_BEFORE = {"美元": r"\$|usd ?", "欧元": r"€|eur ?", "元": r"¥|cny ?|rmb ?"}
_UNIT = "|".join(sorted(map(re.escape, _AFTER), key=len, reverse=True))
_WITH_UNIT = re.compile(rf"(\d+(?:[.,]\d+)?)\s*({_UNIT})")
# Chinese numerals up to 99 before a unit; not after 第 ("第一天" is "the first day"), and not before 点
# ("一点" is "a little").
_CN_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_CN_UNIT = "|".join(sorted((re.escape(u) for u in _AFTER if u != "点"), key=len, reverse=True))
_CN_WITH_UNIT = re.compile(rf"(?<![第\d零一二两三四五六七八九十几])([零一二两三四五六七八九十]+)({_CN_UNIT})")
# English number words a source may use for the same numbers ("一周内" is "within a week").
_WORDS = dict(enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split()
)) | {1: "(?:one|an?)", 30: "thirty", 40: "forty", 45: "forty-five", 60: "sixty", 90: "ninety"}


def chinese_number(numeral: str) -> int | None:
    """The value of a Chinese numeral below 100 ("两" 2, "十五" 15, "三十" 30), None for other forms."""
    if "十" not in numeral:
        return _CN_DIGITS.get(numeral) if len(numeral) == 1 else None
    tens, _, ones = numeral.partition("十")
    if len(tens) > 1 or len(ones) > 1 or (tens and tens not in _CN_DIGITS) or (ones and ones not in _CN_DIGITS):
        return None
    return (_CN_DIGITS[tens] if tens else 1) * 10 + (_CN_DIGITS[ones] if ones else 0)


def units_in(sentence: str) -> list[tuple[str, str]]:
    """The (number, unit) pairs of a Chinese `sentence` whose unit is one of the checked units:
    "闲置 10 分钟后锁定" -> [("10", "分钟")], "两周内" -> [("2", "周")]. Full-width digits read as ASCII
    (NFKC); Chinese numerals as their value (`chinese_number`)."""
    text = unicodedata.normalize("NFKC", sentence)
    pairs = [(m.group(1), m.group(2)) for m in _WITH_UNIT.finditer(text)]
    for m in _CN_WITH_UNIT.finditer(text):
        value = chinese_number(m.group(1))
        if value is not None:
            pairs.append((str(value), m.group(2)))
    return pairs


def units_agree(sentence: str, source: str) -> bool:
    """True when every number that the Chinese `sentence` writes with a checked unit appears in the
    English `source` with that unit: after it ("10 Minutes", "10-minute", "9am") or, for a currency,
    before it ("$25", "EUR 7"), in digits or, up to twenty and for a few round numbers, in English
    words ("two weeks"). A sentence without such a number always agrees.

    Args:
        sentence: an answer sentence (Chinese).
        source: the text of the source it is attributed to (English), as the prompt showed it or whole.
    """
    pairs = units_in(sentence)
    if not pairs:
        return True
    text = unicodedata.normalize("NFKC", source).lower()
    for number, unit in pairs:
        value = re.escape(number)
        word = _WORDS.get(int(number)) if number.isdigit() else None
        written = rf"(?:(?<![\d.,]){value}|\b{word})" if word else rf"(?<![\d.,]){value}"
        after = rf"{written}(?:\s|-)?(?:{_AFTER[unit]})\b"
        before = rf"(?:{_BEFORE[unit]})\s?{value}(?![\d])" if unit in _BEFORE else None
        if not re.search(after, text) and not (before and re.search(before, text)):
            return False
    return True


# English units of time as an English answer writes them after a number, and the forms an English source
# may give the same quantity in ("3 years", "3yrs", "3-year", "three (3) years").
_EN_TIME_UNITS = {
    "minute": r"min(?:ute)?s?", "hour": r"h(?:ou)?rs?", "day": r"days?", "week": r"w(?:ee)?ks?",
    "month": r"mo(?:nth)?s?", "year": r"y(?:ea)?rs?",
}
_EN_WITH_UNIT = re.compile(
    r"(?<![\d.,])(\d+(?:\.\d+)?)[\s-]*(minutes?|mins?|hours?|hrs?|days?|weeks?|wks?|months?|mos?|years?|yrs?)\b",
    re.IGNORECASE,
)


def english_time_units_agree(sentence: str, source: str) -> bool:
    """True when every number that the English `sentence` writes with a unit of time (minutes to years)
    appears in the English `source` with that unit: after it, with at most two words between ("10
    Minutes", "3yrs", "30 calendar days", "seven (7) years"), in digits or, up to twenty, in words. A
    sentence without such a number always agrees.

    Fresh-user trial: "The laptops for the Technical Success team are refreshed every 3 months [1]." was kept
    against "Technical Success: 3yrs": every word and the number are the page's, the unit is not.
    """
    pairs = [(m.group(1), m.group(2).lower()) for m in _EN_WITH_UNIT.finditer(unicodedata.normalize("NFKC", sentence))]
    if not pairs:
        return True
    text = unicodedata.normalize("NFKC", source).lower()
    for number, unit in pairs:
        family = next(name for name, pattern in _EN_TIME_UNITS.items() if re.fullmatch(pattern, unit))
        word = _WORDS.get(int(number)) if number.isdigit() else None
        value = re.escape(number)
        written = rf"(?:(?<![\d.,]){value}|\b{word})" if word else rf"(?<![\d.,]){value}"
        if not re.search(rf"{written}\)?(?:[\s-]+[a-z]+){{0,2}}?[\s-]*(?:{_EN_TIME_UNITS[family]})\b", text):
            return False
    return True


# An amount in yuan as the model writes it: digits then 元 (not 美元, 欧元: a letter between them).
_YUAN = re.compile(r"(?<![\d.,])(\d+(?:[.,]\d+)?)(\s*)元")
# The currencies an English source may state an amount in, and their Chinese names.
_SOURCE_CURRENCIES = {"美元": "美元", "欧元": "欧元"}


def currency_as_in_sources(sentence: str, sources: list[str]) -> str:
    """`sentence` (Chinese) with each amount written in yuan ("50元") given the currency that the English
    `sources` state that amount in ("$50" -> "50美元"), when they state it in exactly one currency and
    never in yuan; other amounts unchanged.

    Qwen2.5-Coder-1.5B wrote the allowances of a page that says "internet ($50)" and "mobile phone
    ($75)" as 50元 and 75元 (bench/bench_crosslingual_answers.py): right amounts in the wrong
    currency, which the unit check (`units_agree`) then removed, declining a right answer.

    Args:
        sentence: an answer sentence.
        sources: the texts of the answer's English sources (title and heading included).

    Returns:
        The sentence, amounts in yuan that the sources state in dollars or euros rewritten as such.
    """
    if "元" not in sentence or not sources:
        return sentence
    text = unicodedata.normalize("NFKC", " ".join(sources)).lower()

    def stated_in(amount: str, unit: str) -> bool:
        value = re.escape(amount)
        after = rf"(?<![\d.,]){value}\s?(?:{_AFTER[unit]})\b"
        return bool(re.search(after, text) or re.search(rf"(?:{_BEFORE[unit]})\s?{value}(?![\d])", text))

    def fix(m: re.Match) -> str:
        amount = unicodedata.normalize("NFKC", m.group(1))
        if stated_in(amount, "元"):
            return m.group(0)
        currencies = [name for name in _SOURCE_CURRENCIES if stated_in(amount, name)]
        return f"{m.group(1)}{m.group(2)}{currencies[0]}" if len(currencies) == 1 else m.group(0)

    return _YUAN.sub(fix, sentence)
