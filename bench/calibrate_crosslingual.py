"""Cross-lingual attribution (a Chinese answer sentence, English sources): how often the grounder keeps
a faithful rendering and how often an unsupported one, with the product's embedder and translation.

Sources: the opening passage (`calibrate_grounding.PASSAGE_CHARS`) of each page of
`calibrate_grounding.CROSS_LINGUAL_PAGES` (7 handbook pages on security and devices). Sentences:
`CROSS_LINGUAL` (11 faithful Chinese renderings of sentences of those pages) and `UNSUPPORTED` below
(Chinese sentences on the same topics that no page states: invented rules, wrong names, the kind a
1.5B model writes when its sources do not answer). For each sentence: the grounder's verdict, its
dictionary coverage and cosine for the closest page, and the runner-up cosine. `FAITHFUL_LATER` and
`UNSUPPORTED_LATER` were written later (3 December, third session), after the thresholds were set: a
second sample of the same kinds.

Run: PYTHONPATH=. python bench/calibrate_crosslingual.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibrate_grounding import CROSS_LINGUAL, CROSS_LINGUAL_PAGES, ROOTS, chunk, passages  # noqa: E402

from assistant.answering.grounded_stream import grounder_for  # noqa: E402
from assistant.answering.grounding import split_sentences  # noqa: E402
from assistant.core.embedder import BUILTIN_E5, Embedder  # noqa: E402
from assistant.retrieval.crosslingual import preload, translate  # noqa: E402

# (sentence, a page it is about, or None: about none of them) - none of them is stated by any page.
UNSUPPORTED = [
    ("出差时，请在 Okta 中为所有账户开启多因素认证。", 3),
    ("出差前需要向经理申请一台备用笔记本电脑并填写 Jira 工单。", 3),
    ("在酒店请使用公共 WiFi 连接公司 VPN，速度更快。", 3),
    ("密码可以在多个系统之间重复使用，只要足够长。", 0),
    ("浏览器的自动填充功能是保存公司密码的推荐方式。", 0),
    ("电脑必须安装 CrowdStrike 杀毒软件并每周扫描。", 1),
    ("旧电脑可以免费带回家，无需支付任何费用。", 5),
    ("申请应用访问权限需要 CEO 批准。", 4),
    ("公司会监控员工设备上的所有个人浏览记录。", 6),
    ("收到可疑邮件时，请直接回复发件人确认身份。", 2),
    ("预订机票和酒店请使用 Expensify 平台。", None),
    ("新员工入职第一天需要参加安全培训考试。", None),
    # With numbers the page states, in a statement it does not make.
    ("密码必须每 15 天更换一次。", 0),
    ("电脑闲置 10 分钟后会自动关机。", 1),
    ("出差时每 5 天要更换一次密码。", 3),
    ("回购旧电脑需要等待 50 天。", 5),
    ("出差时最多只能带 2 台电脑。", 3),
]

# Written after the thresholds above were set (page index as above).
FAITHFUL_LATER = [
    ("垃圾邮件会被自动移到用户的垃圾邮件文件夹。", 2),
    ("公司使用 Google Workspace 管理所有收发邮件。", 2),
    ("出差前要在笔记本电脑上安装所有软件更新。", 3),
    ("出差前请提高所有设备的密码复杂度。", 3),
    ("回购流程应在收到新设备后两周内完成。", 5),
    ("回购时 Tech Ops 会对设备进行出厂重置。", 5),
    ("所有应用访问申请都应发到 #ask-it-tech-ops 频道。", 4),
    ("密码最好是随机生成的。", 0),
    ("应用访问申请由 Jira Service Desk 跟踪。", 4),
]
UNSUPPORTED_LATER = [
    ("垃圾邮件会被自动删除。", 2),
    ("公司使用 Microsoft Outlook 管理所有邮件。", 2),
    ("出差前要把所有数据备份到个人硬盘。", 3),
    ("出差时请关闭笔记本电脑的防火墙。", 3),
    ("回购流程应在收到新设备后两个月内完成。", 5),
    ("员工可以自己对设备进行出厂重置。", 5),
    ("应用访问申请应通过电子邮件发送给经理。", 4),
    ("经理必须批准所有应用访问申请。", 4),
    ("密码应该每个月更换一次。", 0),
    ("可以在多个系统中使用同一个密码。", 0),
    ("公司会读取员工的私人邮件以确保安全。", 6),
    ("笔记本电脑在闲置 10 分钟后会自动注销用户。", 1),
]


class _Retriever:
    def __init__(self, embedder):
        self.embedder = embedder
        self.translate = translate


def main() -> None:
    preload()
    root = ROOTS["en"]
    sources = [chunk(passages((root / p).read_text(encoding="utf-8"))[0], p, i) for i, p in enumerate(CROSS_LINGUAL_PAGES)]
    grounder = grounder_for(_Retriever(Embedder(BUILTIN_E5)), sources)
    sets = {"faithful": CROSS_LINGUAL, "unsupported": UNSUPPORTED, "faithful, written later": FAITHFUL_LATER,
            "unsupported, written later": UNSUPPORTED_LATER}
    kept = dict.fromkeys(sets, 0)
    right = 0
    for kind, rows in sets.items():
        print(f"\n{kind}: verdict [source], page (for unsupported ones about no page: the best covered), "
              "its coverage and cosine, the best cosine of the other pages")
        for sentence, page in rows:
            verdict = grounder.judge(split_sentences(sentence)[0])
            cosines = grounder._cosines(sentence).tolist()
            translation = translate(sentence)
            coverage = [translation.coverage(s.text) if translation else 0.0 for s in sources]
            kept[kind] += verdict.source is not None
            right += kind.startswith("faithful") and verdict.source == (page + 1 if page is not None else None)
            target = page if page is not None else max(range(len(sources)), key=lambda i: coverage[i])
            others = max(c for i, c in enumerate(cosines) if i != target)
            print(f"  {'kept [' + str(verdict.source) + ']' if verdict.source else 'removed':9} page {target + 1} "
                  f"cov {coverage[target]:.2f} cos {cosines[target]:.3f} best other {others:.3f}  {sentence}")
    print(f"\nright page for {right} of the faithful ones kept")
    for kind, rows in sets.items():
        print(f"{kind}: kept {kept[kind]}/{len(rows)}")


if __name__ == "__main__":
    main()
