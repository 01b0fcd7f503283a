"""Train a cross-encoder reranker on pseudo-questions drawn from an index, so that the "hybrid +
reranker" configuration of `bench_retrieval.py quality` can be measured where no trained
cross-encoder can be loaded (this machine reaches no model hub; MODELS.md).

Usage (an index built by `assistant ingest`; one process per Edge folder):

    ASSISTANT_DATA_DIR=/tmp/index .venv/bin/python bench/train_reranker.py --out /tmp/ce [--queries 1600]
    ASSISTANT_DATA_DIR=/tmp/index .venv/bin/python bench/bench_retrieval.py quality --with-reranker --reranker /tmp/ce

Method. Questions are never taken from the development set. Each pseudo-question is a sentence of an
English chunk (the inverse cloze task: Lee, Chang & Toutanova, "Latent Retrieval for Weakly
Supervised Open Domain Question Answering", ACL 2019); its positive is the chunk with that sentence
removed, as the reranker reads it (title and heading path first, `passages.passage_text`). Its
negatives are the product's own hybrid results for the sentence from other documents (hard) and one
chunk drawn at random. The model is all-MiniLM-L6-v2's encoder with a new one-logit head, trained on
groups of one positive and its negatives with a softmax cross-entropy over the group (the localised
contrastive estimation of Gao, Dai & Callan, "Rethink Training of BERT Rerankers in Multi-Stage
Retrieval Pipeline", ECIR 2021). The figures printed: pairs per second of training, and on held-out
pseudo-questions the MRR of the positive among its group by the trained model, and as baselines in the
same process by the untrained head and by chance.
"""

from __future__ import annotations

import argparse
import math
import random
import re
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from assistant.core.index.passages import passage_text  # noqa: E402
from assistant.core.principals import ANONYMOUS  # noqa: E402
from assistant.core.resources import Resources  # noqa: E402
from assistant.retrieval.retriever import Retriever  # noqa: E402
from bench.bench_retrieval import _all_points, build_untrained_cross_encoder  # noqa: E402

SENTENCE = re.compile(r"(?<=[.!?])\s+")
MIN_WORDS, MAX_WORDS = 6, 30


def pseudo_questions(points, *, n: int, rng: random.Random) -> list[dict]:
    """Up to `n` inverse-cloze examples from English chunks: `query` (a sentence of the chunk),
    `passage` (the chunk without it, with its title and heading), `doc_id`."""
    out = []
    chunks = [p.payload for p in points if p.payload.get("lang", "en") == "en" and p.payload.get("text")]
    rng.shuffle(chunks)
    for p in chunks:
        sentences = [s for s in SENTENCE.split(p["text"]) if MIN_WORDS <= len(s.split()) <= MAX_WORDS
                     and not s.lstrip().startswith(("|", "```", "<", "{"))]
        if len(sentences) < 2:
            continue
        query = rng.choice(sentences)
        rest = p["text"].replace(query, " ", 1)
        out.append({"query": query.strip(), "passage": passage_text(p.get("title", ""), p.get("heading", ""), rest),
                    "doc_id": p["doc_id"]})
        if len(out) == n:
            break
    return out


def with_negatives(examples, retriever: Retriever, points, *, hard: int, rng: random.Random) -> list[dict]:
    """Each example gains `negatives`: `hard` passages of other documents among the product's hybrid
    top 20 for its query (in hybrid order), then one chunk drawn at random from another document."""
    payloads = [p.payload for p in points]
    for ex in examples:
        hits = retriever.retrieve(ex["query"], principal=ANONYMOUS, top_k=20)
        others = [h for h in hits if h.doc_id != ex["doc_id"]][:hard]
        negs = [passage_text(h.title, h.heading, h.text) for h in others]
        while True:
            r = rng.choice(payloads)
            if r["doc_id"] != ex["doc_id"]:
                negs.append(passage_text(r.get("title", ""), r.get("heading", ""), r.get("text", "")))
                break
        ex["negatives"] = negs
    return [ex for ex in examples if len(ex["negatives"]) == hard + 1]


def group_scores(model, tokenizer, examples, *, max_length: int, batch: int = 64) -> list[np.ndarray]:
    """The model's score for every passage of each example's group (positive first)."""
    import torch

    pairs = [(ex["query"], p) for ex in examples for p in [ex["passage"], *ex["negatives"]]]
    scores = []
    model.eval()
    with torch.inference_mode():
        for i in range(0, len(pairs), batch):
            q, p = zip(*pairs[i : i + batch])
            enc = tokenizer(list(q), list(p), truncation=True, max_length=max_length, padding=True, return_tensors="pt")
            scores.extend(model(**enc).logits[:, 0].tolist())
    size = 1 + len(examples[0]["negatives"])
    return [np.asarray(scores[i : i + size]) for i in range(0, len(scores), size)]


def mrr_of_positive(groups: list[np.ndarray]) -> float:
    """Mean reciprocal rank of the positive (index 0) in each group, ties counted against it."""
    return float(np.mean([1.0 / (1 + int((g[1:] >= g[0]).sum())) for g in groups]))


def train(args) -> dict:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    res = Resources.open()
    points = _all_points(res.store)
    retriever = Retriever(store=res.store, embedder=res.embedder)
    examples = pseudo_questions(points, n=args.queries + args.held_out, rng=rng)
    t0 = time.perf_counter()
    examples = with_negatives(examples, retriever, points, hard=args.hard_negatives, rng=rng)
    res.close()
    held_out, training = examples[: args.held_out], examples[args.held_out :]
    print(f"{len(training)} training and {len(held_out)} held-out pseudo-questions from {len(points)} chunks "
          f"(negatives mined in {time.perf_counter() - t0:.0f} s)", flush=True)

    folder = build_untrained_cross_encoder(Path(args.out))
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder, num_labels=1)
    untrained = mrr_of_positive(group_scores(model, tokenizer, held_out, max_length=args.max_length))
    print(f"held-out MRR of the positive: untrained head {untrained:.3f}", flush=True)

    torch.set_num_threads(args.threads)
    steps = math.ceil(len(training) / args.batch) * args.epochs
    optimiser = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup))))
    size = 1 + args.hard_negatives + 1
    step, pairs_seen, t0, losses = 0, 0, time.perf_counter(), []
    model.train()
    for _ in range(args.epochs):
        rng.shuffle(training)
        for i in range(0, len(training), args.batch):
            group = training[i : i + args.batch]
            q = [ex["query"] for ex in group for _ in range(size)]
            p = [x for ex in group for x in [ex["passage"], *ex["negatives"]]]
            enc = tokenizer(q, p, truncation=True, max_length=args.max_length, padding=True, return_tensors="pt")
            logits = model(**enc).logits.view(len(group), size)
            loss = torch.nn.functional.cross_entropy(logits, torch.zeros(len(group), dtype=torch.long))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimiser.step()
            schedule.step()
            optimiser.zero_grad()
            step += 1
            pairs_seen += len(q)
            losses.append(loss.item())
            if step % 20 == 0 or step == steps:
                print(f"step {step}/{steps} loss {np.mean(losses[-20:]):.3f} "
                      f"({pairs_seen / (time.perf_counter() - t0):.1f} pairs/s)", flush=True)
    train_s = time.perf_counter() - t0
    trained = mrr_of_positive(group_scores(model, tokenizer, held_out, max_length=args.max_length))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    out = {"training_questions": len(training), "held_out": len(held_out), "pairs": pairs_seen,
           "train_s": round(train_s, 1), "pairs_per_s": round(pairs_seen / train_s, 2),
           "chance_mrr": round(float(np.mean([1.0 / k for k in range(1, size + 1)])), 3),
           "untrained_mrr": round(untrained, 3), "trained_mrr": round(trained, 3),
           "first_loss": round(float(np.mean(losses[:20])), 3), "last_loss": round(float(np.mean(losses[-20:])), 3)}
    print(f"held-out MRR of the positive among {size}: trained {trained:.3f}, untrained {untrained:.3f}, "
          f"chance {out['chance_mrr']:.3f}; {out['pairs_per_s']} pairs/s; saved to {folder}", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for the trained CrossEncoder")
    parser.add_argument("--queries", type=int, default=1600, help="training pseudo-questions")
    parser.add_argument("--held-out", type=int, default=200)
    parser.add_argument("--hard-negatives", type=int, default=3)
    parser.add_argument("--batch", type=int, default=4, help="groups per step")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--max-length", type=int, default=192)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()
    train(args)


if __name__ == "__main__":
    main()
