"""Sources focused on the question (answering/focus.py): the sentences that hold the question's words,
with their neighbours, within a per-source cap, in the page's order; a Chinese question finds its
words in an English page through the translation; packing then fits more sources into the same room."""

from __future__ import annotations

from dataclasses import replace

from assistant.answering.focus import GAP, focus_text, pieces, question_terms
from assistant.answering.packing import pack_context
from assistant.answering.prompt import format_source
from assistant.retrieval import RetrievedChunk
from assistant.retrieval.crosslingual import TermGroup, Translation


def words(text: str) -> int:
    """A token counter: one token a word or ideograph."""
    return len(text.split()) + sum(1 for ch in text if "\u4e00" <= ch <= "\u9fff")


PAGE = (
    "Security is everyone's job at the company.\n"
    "We review our practices every year. Reviews are announced in the newsletter.\n"
    "Laptops are bought through the IT portal and shipped to your home.\n"
    "Passwords must have 15 or more characters. Use 1Password to generate them.\n"
    "Never reuse a password between systems.\n"
    "Printers live on the second floor. Toner is in the cupboard next to them.\n"
    "Ask in #it-help when something is unclear."
)


def test_pieces_give_the_text_back():
    assert "".join(pieces(PAGE)) == PAGE
    assert "".join(pieces("第一句。第二句！\n第三句")) == "第一句。第二句！\n第三句"


def test_a_source_that_fits_is_left_whole():
    terms = question_terms("How long should my passwords be?")
    assert focus_text(PAGE, terms, max_tokens=500, count_tokens=words) is PAGE


def test_the_sentences_about_the_question_are_kept_with_their_neighbour_within_the_cap():
    terms = question_terms("How long should my passwords be?")
    text = focus_text(PAGE, terms, max_tokens=25, count_tokens=words)
    assert words(text) <= 25
    assert "Passwords must have 15 or more characters." in text
    assert "Never reuse a password between systems." in text  # the other sentence that holds "password"
    assert "Use 1Password to generate them." in text  # the sentence after the best one
    assert "Printers" not in text and "newsletter" not in text
    assert text.startswith(GAP.lstrip()) and text.endswith(GAP.rstrip())  # text left out before and after
    assert text.index("15 or more") < text.index("1Password")  # the page's order


def test_a_chinese_question_finds_its_words_in_an_english_page_through_the_translation():
    translation = Translation((TermGroup(("密码",), (("password",),)), TermGroup(("长度",), (("length",),))))
    terms = question_terms("密码长度要多少？", translate=lambda q: translation)
    text = focus_text(PAGE, terms, max_tokens=25, count_tokens=words)
    assert "15 or more characters" in text and "Printers" not in text


def test_without_any_word_of_the_question_the_start_is_kept():
    terms = question_terms("holiday calendar")
    text = focus_text(PAGE, terms, max_tokens=12, count_tokens=words)
    assert text.startswith("Security is everyone's job") and words(text) <= 12


def test_packing_with_focus_fits_more_sources_into_the_same_room():
    def chunk(n: int, text: str) -> RetrievedChunk:
        return RetrievedChunk(
            chunk_id=f"c{n}", doc_id=f"d{n}", chunk_index=0, text=text, source=f"page{n}.md", uri="", title="",
            heading="", page=None, lang="en", score=1.0, relevance=0.5,
        )

    chunks = [chunk(n, PAGE) for n in range(3)]
    chunks = [chunks[0]] + [
        chunk(n, PAGE.replace("Security", f"Topic {n}.").replace("Printers", f"Printers {n}")) for n in (1, 2)
    ]
    whole = pack_context(chunks, budget_tokens=130, count_tokens=words, format_source=format_source,
                         duplicate_threshold=1.01)
    terms = question_terms("How long should my passwords be?")
    focused = pack_context(
        chunks, budget_tokens=130, count_tokens=words, format_source=format_source, duplicate_threshold=1.01,
        shape=lambda c: replace(c, text=focus_text(c.text, terms, max_tokens=25, count_tokens=words)),
    )
    assert len(whole) == 1 and len(focused) == 3
    assert all("15 or more characters" in s.text for s in focused)


def test_an_item_of_a_do_not_list_keeps_its_lead_in():
    page = (
        "## Password requirements\n\nKeep in mind that the passwords we choose protect the company.\n\n**Do:**\n\n"
        "- Make passwords hard to guess.\n- Create a password that is ideally 15 characters or longer.\n\n**Do not:**\n\n"
        "- Use the browser based auto-fill.\n- Use a password that is the same or similar to one you use on other websites.\n"
        "- Mix personal and work-related passwords.\n"
    )
    terms = Translation((TermGroup(("similar",)), TermGroup(("websites",))))
    focused = focus_text(page, terms, max_tokens=30, count_tokens=words)
    assert "**Do not:**" in focused and "the same or similar" in focused, focused
    assert "**Do:**" not in focused


def test_the_piece_with_the_questions_rarer_word_comes_before_pieces_that_only_share_the_common_one():
    # "How long should my passwords be?" on the handbook's password page: every line says "password",
    # one says "15 characters or longer" (Snowball leaves "longer" unstemmed: "long" starts it).
    page = (
        "Keep in mind that the passwords we choose protect our systems.\n"
        "Administrators must be thoughtful when selecting a password.\n"
        "Below is guidance for passwords of company accounts.\n"
        "- Make passwords hard to guess.\n"
        "- Create a new password for every system.\n"
        "- Create a password that is ideally 15 characters or longer.\n"
    )
    focused = focus_text(page, question_terms("How long should my passwords be?"), max_tokens=16, count_tokens=words)
    assert "15 characters or longer" in focused, focused


def test_a_source_in_another_language_than_the_question_stays_whole():
    from assistant.answering.focus import focused_source

    chunk = RetrievedChunk(chunk_id="c", doc_id="d", chunk_index=0, text=PAGE, source="it/security.md", uri="",
                           title="Security", heading="Security", page=None, lang="en", score=1.0, relevance=0.8)
    zh_terms = Translation((TermGroup(("密码",), (("password",),)),))
    assert focused_source(chunk, zh_terms, lang="zh", max_tokens=20, count_tokens=words) is chunk
    focused = focused_source(chunk, question_terms("How many characters must passwords have?"), lang="en",
                             max_tokens=20, count_tokens=words)
    assert focused.full_text == PAGE and "15 or more characters" in focused.text and len(focused.text) < len(PAGE)


def test_the_room_a_first_source_leaves_goes_to_the_next_document_focused_to_fit():
    # Issue 42: one focused source of 100 tokens filled most of the 180-196 tokens the CPU window leaves
    # for sources; the second document, focused to 100 tokens as well, did not fit and was left out.
    def chunk(n: int, text: str) -> RetrievedChunk:
        return RetrievedChunk(
            chunk_id=f"c{n}", doc_id=f"d{n}", chunk_index=0, text=text, source=f"page{n}.md", uri="", title="",
            heading="", page=None, lang="en", score=1.0, relevance=0.5,
        )

    other = PAGE.replace("Passwords must have 15 or more characters.", "Badges are collected at the front desk.")
    chunks = [chunk(0, other), chunk(1, PAGE)]
    terms = question_terms("How long should my passwords be?")

    def shape(c: RetrievedChunk, cap: int = 40) -> RetrievedChunk:
        return replace(c, text=focus_text(c.full_text or c.text, terms, max_tokens=cap, count_tokens=words),
                       full_text=c.full_text or c.text)

    kwargs = dict(budget_tokens=50, count_tokens=words, format_source=format_source, duplicate_threshold=1.01, shape=shape)
    assert [s.source for s in pack_context(chunks, **kwargs)] == ["page0.md"]
    packed = pack_context(chunks, **kwargs, refit=shape, min_refit_tokens=10)
    assert [s.source for s in packed] == ["page0.md", "page1.md"]
    assert "15 or more characters" in packed[1].text
    assert sum(words(format_source(n, s)) + 2 for n, s in enumerate(packed, start=1)) <= 50
