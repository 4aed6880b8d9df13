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
