"""The project's JSON Schema of A2M 0.1 responses (a2m-0.1.wire.schema.json), as validators.

The schema is written from the canonical tables (docs/protocol.md), not
generated from the gateway's models, so a change in the gateway's wire shape that
the tables do not allow fails every test that received it.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

SCHEMA_PATH = Path(__file__).with_name("a2m-0.1.wire.schema.json")

RESULT_DEFS = {
    "memory/describe": "describeResult",
    "memory/recall": "recallResult",
    "memory/timeline": "timelineResult",
    "memory/fetch": "fetchResult",
}
"""Every method whose result the gateway can return."""


@functools.cache
def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(loaded)
    return loaded


@functools.cache
def validator(definition: str) -> Draft202012Validator:
    """A validator for one of the schema's $defs."""
    root = schema()
    if definition not in root["$defs"]:
        raise KeyError(definition)
    return Draft202012Validator({**root, "$ref": f"#/$defs/{definition}"})


def problems(definition: str, instance: Any) -> list[str]:
    found = sorted(validator(definition).iter_errors(instance), key=lambda e: list(e.path))
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message[:300]}" for e in found]


def assert_valid(definition: str, instance: Any, context: str = "") -> None:
    errors = problems(definition, instance)
    assert not errors, f"{context} violates the A2M 0.1 wire schema ({definition}): {errors[:5]}"


def assert_response(obj: Any, method: str | None = None, context: str = "") -> None:
    """A JSON-RPC response: envelope and error object; the result too when `method` is known.

    A method the gateway has no result for (any other name) may only be answered
    with an error, which the envelope check already covers.
    """
    assert_valid("response", obj, context)
    if method is None or not isinstance(obj, dict) or "result" not in obj:
        return
    definition = RESULT_DEFS.get(method)
    assert definition is not None, f"{context}: {method!r} answered with a result"
    assert_valid(definition, obj["result"], f"{context} {method}")
