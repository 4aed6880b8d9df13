from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

from gateway.a2m.records import Record, format_timestamp, parse_timestamp

RFC3339_MS_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-07-28T10:15:30.123456Z", "2026-07-28T10:15:30.123Z"),
        ("2026-07-28T12:15:30+02:00", "2026-07-28T10:15:30.000Z"),
        ("2026-07-28", "2026-07-28T00:00:00.000Z"),
        ("2026-07-28T10:15:30", "2026-07-28T10:15:30.000Z"),
        (1785233730123, "2026-07-28T10:15:30.123Z"),
        ("1785233730123", "2026-07-28T10:15:30.123Z"),
        # A bare year is that year (as Elasticsearch reads it), not 2.026 s after 1970.
        ("2026", "2026-01-01T00:00:00.000Z"),
        (" 0999 ", "0999-01-01T00:00:00.000Z"),
        (datetime(2026, 7, 28, 10, 15, 30, 999999, tzinfo=UTC), "2026-07-28T10:15:30.999Z"),
    ],
)
def test_timestamps_are_rfc3339_utc_ms(value: object, expected: str) -> None:
    parsed = parse_timestamp(value)
    assert parsed is not None
    out = format_timestamp(parsed)
    assert out == expected
    assert RFC3339_MS_Z.match(out)


@pytest.mark.parametrize("value", [None, True, "yesterday", "", "0000", [], {"a": 1}])
def test_non_dates_are_none(value: object) -> None:
    assert parse_timestamp(value) is None


def test_other_zones_convert_to_utc() -> None:
    ts = datetime(2026, 1, 1, 1, 0, tzinfo=timezone(timedelta(hours=5)))
    assert format_timestamp(ts) == "2025-12-31T20:00:00.000Z"


def test_absent_fields_are_omitted_and_metadata_round_trips() -> None:
    meta = {"nested": {"list": [1, "two", None, {"x": 1.5}]}, "flag": False, "empty": {}}
    when = datetime(2026, 1, 2, tzinfo=UTC)
    wire = Record(id="r1", content="c", metadata=meta, created_at=when).to_wire()
    assert wire == {
        "id": "r1",
        "content": "c",
        "created_at": "2026-01-02T00:00:00.000Z",
        "metadata": meta,
    }
    assert wire["metadata"] is meta


def test_content_and_created_at_are_always_on_the_wire() -> None:
    """§3.1: both are required on every record."""
    assert Record(id="r1").to_wire() == {
        "id": "r1",
        "content": "",
        "created_at": "1970-01-01T00:00:00.000Z",
    }


def test_years_before_1000_are_zero_padded() -> None:
    assert format_timestamp(datetime(999, 1, 2, 3, 4, 5, 6000, tzinfo=UTC)) == (
        "0999-01-02T03:04:05.006Z"
    )


def test_over_long_digit_strings_are_not_dates() -> None:
    assert parse_timestamp("9" * 5000) is None
