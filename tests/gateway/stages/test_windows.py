"""Window candidates: bounded per record, and the weightiest hits among them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from gateway.stages.windows import CANDIDATES, windows


def test_windows_start_from_at_most_candidates_hits_and_keep_the_rare_terms_one() -> None:
    common = "The cell was studied again in this sentence. "
    answer = "Telomerase activity in stem cell niches declines with age. "
    text = (common * 30 + answer + common * 30).lower()
    found = windows(text, ["telom", "activ", "niche", "cell"], 200, paragraphs=False)
    assert 1 <= len(found) <= CANDIDATES
    best = found[0]
    assert best.start <= text.index("telomerase") < best.end
    assert best.score > found[-1].score


def test_the_heaviest_paragraph_starts_a_window_however_dense_the_others() -> None:
    # Every other paragraph repeats one term densely, so each of its windows outweighs any
    # window of the paragraph that holds all three terms, one a sentence.
    filler = "Nothing to see in this filler sentence at all here. "
    spread_out = f"Kinase studies. {filler}Receptor assays. {filler}Telomerase measured. {filler}"
    dense = [f"{w} {w} {w} {w}. " * 2 for w in ("kinase", "receptor", "telomerase")] * 4
    text = "\n\n".join([*dense[:6], spread_out, *dense[6:]]).lower()
    wanted = ["kinas", "recep", "telom"]
    without = windows(text, wanted, 40, paragraphs=False)
    assert without
    assert all(w.paragraph != 6 for w in without)  # not vacuous
    found = windows(text, wanted, 40, paragraphs=False, spread=1)
    assert [w for w in found if w.paragraph == 6]
    assert len(found) <= CANDIDATES + 1


def test_of_hits_weighing_the_same_the_earliest_start_the_windows() -> None:
    # One term, a sentence apart, each hit alone within the cap: every hit weighs the same.
    text = "".join(f"Telomeres in sample {i} here. " for i in range(CANDIDATES + 4)).lower()
    found = windows(text, ["telom"], 20, paragraphs=False)
    hits = [m.start() for m in re.finditer("telom", text)]
    assert sorted(w.start for w in found) == hits[:CANDIDATES]


_SEEDED = """
import json
from gateway.stages.windows import windows
words = ["alpha", "brava", "charl", "delta", "echoe", "foxtr", "golfo", "hotel"]
rare = " ".join(w + "x" for w in words[:3])
paras = [
    " ".join(f"{w}q." for w in words[i % 8 :] + words[: i % 8]) + (" " + rare if i % 5 == 0 else "")
    for i in range(12)
]
found = windows("\\n\\n".join(paras), words, 30, paragraphs=False, spread=3)
print(json.dumps([w.start for w in found]))
"""


def test_the_windows_of_a_text_do_not_depend_on_the_processs_string_hashes() -> None:
    # Paragraphs holding the same terms in other orders weigh the same but for the order
    # their weights are summed in: a set's order (its strings' hashes) varied the sum.
    root = Path(__file__).resolve().parents[3]
    outputs = {
        subprocess.run(
            [sys.executable, "-c", _SEEDED],
            env={**os.environ, "PYTHONHASHSEED": str(seed), "PYTHONPATH": str(root)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in range(8)
    }
    assert len(outputs) == 1
    assert json.loads(outputs.pop())  # windows were found at all
