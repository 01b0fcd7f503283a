"""Several API processes: with prometheus-client's multiprocess folder, one scrape sums every process's counts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parents[2]
RECORD = (
    "from assistant.core import metrics; metrics.ANSWER_CACHE.labels('hit').inc(); "
    "metrics.count_tokens(100, 7); metrics.FIRST_TOKEN_SECONDS.observe(0.2)"
)
SCRAPE = (
    "import sys; from pathlib import Path; from assistant.operations.metrics import exposition; "
    "sys.stdout.write(exposition(None, Path(sys.argv[1]))[0].decode())"
)


def test_counts_of_separate_processes_are_summed_in_one_scrape(tmp_path):
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    for _ in range(3):  # three worker processes, each recording once and exiting
        subprocess.run([sys.executable, "-c", RECORD], env=env, check=True, timeout=60)
    text = subprocess.run([sys.executable, "-c", SCRAPE, str(tmp_path)], env=env, check=True, timeout=60,
                          capture_output=True, text=True).stdout
    values = {(s.name, tuple(sorted(s.labels.items()))): s.value
              for family in text_string_to_metric_families(text) for s in family.samples}
    assert values[("assistant_answer_cache_requests_total", (("result", "hit"),))] == 3
    assert values[("assistant_llm_tokens_total", (("direction", "prompt"),))] == 300
    assert values[("assistant_llm_tokens_total", (("direction", "completion"),))] == 21
    assert values[("assistant_time_to_first_token_seconds_count", ())] == 3
