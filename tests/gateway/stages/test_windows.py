"""Window candidates: bounded per record, and the weightiest hits among them."""

from __future__ import annotations

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
