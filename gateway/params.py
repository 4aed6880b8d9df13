"""One params model per method (DECISIONS.md §4).

Strict JSON types (a string is not a number), unknown params ignored (§2).
Range checks that depend on a store's limits live in the store.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from gateway.errors import InvalidParams

Scalar = str | int | float | bool
WhereValue = Scalar | list[Scalar]


class _Params(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class PromptOptions(_Params):
    """§4.16: `prompt: true` is these defaults."""

    method: str = "template"
    style: str = "auto"
    budget: int | None = Field(default=None, ge=0)
    """Maximum characters of the rendered text; whole records are dropped to fit."""
    cite: bool = False
    model: str | None = None


class DescribeParams(_Params):
    protocol: str | None = None
    owner: str | None = None


class _ReadParams(_Params):
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
                    raise ValueError(f"where.{key}: an empty any-of list matches nothing")
        return v

    def prompt_options(self) -> PromptOptions | None:
        if self.prompt is None or self.prompt is False:
            return None
        if self.prompt is True:
            return PromptOptions()
        return self.prompt

    @field_validator("limit")
    @classmethod
    def _limit_not_negative(cls, v: int | None) -> int | None:
        if v is not None and v < 0:
            raise ValueError("limit must be >= 0")
        return v


class RecallParams(_ReadParams):
    query: str | None = None
    min_score: float | None = None
    embedding: list[float] | None = None


class TimelineParams(_ReadParams):
    pass


class FetchParams(_Params):
    key: str = Field(min_length=1)
    owner: str | None = None
    embeddings: bool = False


class PreviewParams(_Params):
    """The try page's mapping preview (gateway/preview, not an A2M method)."""

    limit: int = Field(default=3, ge=1, le=10)


PARAMS_MODELS: dict[str, type[_Params]] = {
    "memory/describe": DescribeParams,
    "memory/recall": RecallParams,
    "memory/timeline": TimelineParams,
    "memory/fetch": FetchParams,
}


def parse_params(model: type[_Params], params: Any) -> Any:
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
        # Top-level param names only: deeper locs carry pydantic's union tags, not user paths.
        fields = list(
            dict.fromkeys(
                str(err["loc"][0]) if err["loc"] else "params"
                for err in exc.errors(include_url=False, include_input=False)
            )
        )
        names = ", ".join(repr(f) for f in fields[:5])
        raise InvalidParams(
            f"Invalid params: {names} missing, of the wrong type or out of range",
            data={"fields": fields[:20]},
        ) from None


Style = Literal["list", "cited", "transcript"]
