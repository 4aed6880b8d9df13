"""One params model per method (docs/protocol.md).

Strict JSON types (a string is not a number), unknown params ignored (§2).
Range checks that depend on a store's limits live in the store.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from gateway.a2m.errors import InvalidParams

Scalar = str | int | float | bool
WhereValue = Scalar | list[Scalar]


class Params(BaseModel):
    """Every method's params: strict JSON types, unknown params ignored."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class PromptOptions(Params):
    """§4.16: `prompt: true` is these defaults."""

    method: str = "template"
    style: str = "auto"
    budget: int | None = Field(default=None, ge=0)
    """Maximum characters of the rendered text; whole records are dropped to fit."""
    cite: bool = False
    model: str | None = None


class DescribeParams(Params):
    protocol: str | None = None
    owner: str | None = None


class ReadParams(Params):
    limit: int | None = None
    where: dict[str, WhereValue] | None = None
    key_prefix: str | None = None
    owner: str | None = None
    embeddings: bool = False
    prompt: bool | PromptOptions | None = None
    tier: str | None = None

    @field_validator("where")
    @classmethod
    def _where_lists_not_empty(
        cls, v: dict[str, WhereValue] | None
    ) -> dict[str, WhereValue] | None:
        if v is not None:
            for key, value in v.items():
                if isinstance(value, list) and not value:
                    raise ValueError(f"where.{key} is an empty any-of list, which matches nothing")
        return v

    def prompt_options(self) -> PromptOptions | None:
        if self.prompt is None or self.prompt is False:
            return None
        if self.prompt is True:
            return PromptOptions()
        return self.prompt


class RecallParams(ReadParams):
    query: str | None = None
    min_score: float | None = None
    embedding: list[float] | None = None


class TimelineParams(ReadParams):
    pass


class FetchParams(Params):
    key: str = Field(min_length=1)
    owner: str | None = None
    embeddings: bool = False


class PreviewParams(Params):
    """The try page's mapping preview (gateway/preview, not an A2M method)."""

    limit: int = Field(default=3, ge=1, le=10)


def limit_out_of_range(low: int, top: int) -> str:
    """The one wording of a `limit` outside its range, on every door (A2M, MCP, CLI).

    `low` is 0 on A2M (where 0 asks for as many as the store allows) and 1 on MCP.
    """
    text = f"'limit' must be between {low} and {top} (the store's max_recall_limit"
    return text + ("; 0: as many as it allows)" if low == 0 else ")")


def parse_params(model: type[Params], params: Any) -> Any:
    """Validate params into the method's model.

    Raises:
        InvalidParams: wrong shape or type; the message names the fields, never pydantic's text.
    """
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise InvalidParams("Invalid params: params must be an object (by-name parameters)")
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        fields = list(dict.fromkeys(_field(err) for err in _errors(exc)))
        raise InvalidParams(
            f"Invalid params: {explain(exc)}", data={"fields": fields[:20]}
        ) from None


_EXPECTED = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "list_type": "an array",
    "none_required": "null",
}
"""Pydantic's strict type errors, as the JSON type the field expects."""


def _errors(exc: ValidationError) -> list[Any]:
    return list(exc.errors(include_url=False, include_input=False))


def _field(err: Any) -> str:
    # The top-level name only: deeper locs carry pydantic's union tags, not user paths.
    return str(err["loc"][0])[:64] if err["loc"] else "params"


def _problem(err: Any) -> str:
    """One error in words, never pydantic's text (which can echo the input)."""
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind == "missing":
        return "is missing"
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}"
    if kind in ("greater_than_equal", "greater_than") and "ge" in ctx:
        return f"must be at least {ctx['ge']}"
    if kind == "less_than_equal" and "le" in ctx:
        return f"must be at most {ctx['le']}"
    if kind == "string_too_short":
        return "must not be empty" if ctx.get("min_length") == 1 else "is too short"
    if kind == "string_too_long":
        return f"must be at most {ctx.get('max_length')} characters"
    if kind == "extra_forbidden":
        return "is not an argument of this call"
    if kind == "value_error" and "error" in ctx:
        return str(ctx["error"])
    return "is not valid"


def explain(exc: ValidationError) -> str:
    """Each wrong field and what is wrong with it: "'query': expected a string".

    A field of several accepted types (a union) fails once per type; its
    problems are joined ("expected true or false or an object").
    """
    by_field: dict[str, list[str]] = {}
    for err in _errors(exc):
        problems = by_field.setdefault(_field(err), [])
        problem = _problem(err)
        if problem not in problems:
            problems.append(problem)
    parts = []
    for name, problems in list(by_field.items())[:5]:
        expected = [p.removeprefix("expected ") for p in problems if p.startswith("expected ")]
        text = (
            "expected " + " or ".join(expected) if len(expected) == len(problems) else problems[0]
        )
        parts.append(
            f"{name!r} {text}" if text.startswith(("is ", "must ")) else f"{name!r}: {text}"
        )
    return "; ".join(parts)


Style = Literal["list", "cited", "transcript"]
