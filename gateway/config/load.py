"""The one load step: read the file, expand references, validate, then the file-backed parts.

Secrets never sit in the file: any string value may be ``${NAME}`` (an
environment variable) or ``${file:/abs/path}`` (a mounted secret file, trailing
newline stripped); ``$${`` writes a literal ``${``. Everything here that touches
the file system or the environment happens in this module, in order: expand
references, validate (pure validators), resolve relative storage paths against
the config file's folder, read ``auth.api_keys_file``, and check that each
embedder's optional extra is installed. Errors name the field, never a
secret's value.
"""

from __future__ import annotations

import difflib
import os
import re
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from gateway.config.auth import ApiKeyEntry, parse_api_keys
from gateway.config.base import ConfigError
from gateway.config.document import GatewayConfig
from gateway.config.engines import STORE_MODELS
from gateway.config.search import EmbedderKind

# `$${` is a literal `${` (as in docker compose); anything else `${...}` is a reference.
_REF = re.compile(r"\$(\$)\{|\$\{(?:(file):)?([^}]+)\}")
_BACKENDS = ", ".join(STORE_MODELS)


def expand_references(value: Any, where: str = "") -> Any:
    """``value`` with every ``${NAME}`` and ``${file:/path}`` replaced by what it names.

    Raises:
        ConfigError: a variable is not set or a secret file cannot be read (the
            message names the field and the reference, never a value).
    """
    if isinstance(value, dict):
        return {
            k: expand_references(v, f"{where}.{k}" if where else str(k)) for k, v in value.items()
        }
    if isinstance(value, list):
        return [expand_references(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value

    def sub(m: re.Match[str]) -> str:
        if m.group(1):
            return "${"
        kind, ref = m.group(2), m.group(3).strip()
        if kind == "file":
            try:
                return Path(ref).read_text(encoding="utf-8").rstrip("\r\n")
            except OSError:
                raise ConfigError(f"{where}: secret file {ref!r} cannot be read") from None
        if ref not in os.environ:
            raise ConfigError(f"{where}: environment variable {ref} is not set")
        return os.environ[ref]

    return _REF.sub(sub, value)


def read_api_keys(path: str) -> list[ApiKeyEntry]:
    """The entries of an API-key file (at load, and again by gateway.security.auth when it changed).

    Raises:
        ValueError: unreadable, not a YAML list, or an entry is invalid (never quoting it).
    """
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        raise ValueError("auth.api_keys_file cannot be read as YAML/JSON") from None
    return parse_api_keys(data)


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds (``X``, ``X | None``), if it holds one."""
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _backends_with(path: tuple[str, ...]) -> list[str]:
    """The backends whose store model has the key at ``path`` (e.g. connection.aws_sigv4)."""
    found = []
    for backend, store_model in STORE_MODELS.items():
        model: type[BaseModel] | None = store_model
        for name in path[:-1]:
            field = model.model_fields.get(name) if model is not None else None
            model = _model_of(field.annotation) if field is not None else None
        if model is not None and path[-1] in model.model_fields:
            found.append(backend)
    return found


_EXPECTED = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "list_type": "a list",
}
"""Pydantic's type errors, as the YAML type the key expects."""


def _problem(err: Any) -> str:
    """What is wrong with one key, in the project's words rather than pydantic's."""
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind == "missing":
        return "is required"
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}"
    if kind in ("enum", "literal_error") and "expected" in ctx:
        return f"must be one of {ctx['expected'].replace(' or ', ', ').replace(chr(39), '')}"
    if kind in ("value_error", "assertion_error") and "error" in ctx:
        return str(ctx["error"])
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        sign = {"greater_than_equal": "at least", "greater_than": "more than"}
        sign |= {"less_than_equal": "at most", "less_than": "less than"}
        bound = next(iter(ctx.values()), "")
        return f"must be {sign[kind]} {bound}"
    if kind == "string_too_short":
        return "must not be empty" if ctx.get("min_length") == 1 else "is too short"
    if kind == "too_short":
        return f"needs at least {ctx.get('min_length')} item(s)"
    msg: str = err["msg"]
    return msg


def _error_line(err: Any) -> str:
    """One ``field: problem`` line; a store's backend tag is left out of the field path."""
    loc = [str(p) for p in err["loc"]]
    msg = _problem(err)
    if err["type"] in ("union_tag_invalid", "union_tag_not_found"):
        return f"{'.'.join([*loc, 'backend'])}: must be one of {_BACKENDS}"
    backend = None
    if len(loc) >= 3 and loc[0] == "stores" and loc[2] in STORE_MODELS:
        backend = loc.pop(2)
    if err["type"] == "extra_forbidden":
        msg = _unknown_key(loc, backend)
    return f"{'.'.join(loc) or 'config'}: {msg}"


def _unknown_key(loc: list[str], backend: str | None) -> str:
    """Another engine's key says so; a typo gets the nearest key ("did you mean ...?")."""
    if backend is not None:
        others = [b for b in _backends_with(tuple(loc[2:])) if b != backend]
        if others:
            return f"does not apply to backend {backend} (a key of {' and '.join(others)} stores)"
        keys = _keys_at(STORE_MODELS[backend], loc[2:-1])
    else:
        keys = _keys_at(GatewayConfig, loc[:-1])
    near = difflib.get_close_matches(loc[-1], keys, n=1, cutoff=0.6)
    if near:
        return f"unknown key; did you mean `{near[0]}`?"
    return "unknown key" + (f" (the keys here: {', '.join(sorted(keys))})" if keys else "")


def _keys_at(model: type[BaseModel] | None, path: list[str]) -> list[str]:
    """The keys the model at ``path`` takes (a mapping's entry name is skipped)."""
    i = 0
    while model is not None and i < len(path):
        field = model.model_fields.get(path[i])
        if field is None:
            return []
        annotation = field.annotation
        if typing.get_origin(annotation) is dict:
            model, i = _model_of(typing.get_args(annotation)[1]), i + 2
        else:
            model, i = _model_of(annotation), i + 1
    return list(model.model_fields) if model is not None and i == len(path) else []


def _validate(data: Any) -> GatewayConfig:
    try:
        return GatewayConfig.model_validate(data)
    except ValidationError as exc:
        lines = [_error_line(err) for err in exc.errors(include_url=False, include_input=False)]
        if len(lines) == 1:  # one line on stderr: what is wrong and where
            raise ConfigError(f"invalid config: {lines[0]}") from None
        raise ConfigError("invalid config:\n  " + "\n  ".join(lines)) from None


def _resolve_paths(cfg: GatewayConfig, base_dir: Path) -> GatewayConfig:
    """Relative paths in a connection are relative to the config file, not the working
    directory."""
    stores = dict(cfg.stores)
    for name, store in cfg.stores.items():
        conn = store.connection.relative_to(base_dir)
        if conn is not store.connection:
            stores[name] = store.model_copy(update={"connection": conn})
    return cfg.model_copy(update={"stores": stores})


def _with_key_file(cfg: GatewayConfig) -> GatewayConfig:
    auth = cfg.server.auth
    if not auth.enabled or auth.api_keys_file is None:
        return cfg
    try:
        auth = auth.with_file_keys(read_api_keys(auth.api_keys_file))
    except ValueError as exc:
        raise ConfigError(f"invalid config: server.auth: {exc}") from None
    return cfg.model_copy(update={"server": cfg.server.model_copy(update={"auth": auth})})


def _check_extras(cfg: GatewayConfig) -> None:
    """Stop at load, in one line naming the extra, when an embedder's package is missing."""
    for name, store in cfg.stores.items():
        embedder = store.search.embedder
        if embedder.kind is EmbedderKind.MINILM:
            from gateway.embedders.minilm_extra import missing_message

            missing = missing_message(embedder.weights)
            if missing is not None:
                raise ConfigError(f"invalid config: stores.{name}.search.embedder: {missing}")


def parse_config(data: Any, base_dir: Path | None = None) -> GatewayConfig:
    """Validate an already-loaded YAML document.

    Raises:
        ConfigError: with a message that names each bad field, never a secret value.
    """
    if not isinstance(data, dict):
        raise ConfigError("config: the top level must be a mapping with 'stores'")
    cfg = _validate(expand_references(data))
    if base_dir is not None:
        cfg = _resolve_paths(cfg, base_dir)
    cfg = _with_key_file(cfg)
    _check_extras(cfg)
    return cfg


def load_config(path: str | Path) -> GatewayConfig:
    """Read and validate a config file.

    Raises:
        ConfigError: the file is missing, is not YAML, or is invalid.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file {str(p)!r} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {str(p)!r} is a directory, not a file") from None
    except UnicodeDecodeError:
        raise ConfigError(f"config file {str(p)!r} is not UTF-8 text") from None
    except OSError as exc:
        raise ConfigError(f"config file {str(p)!r} cannot be read: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {str(p)!r} is not valid YAML{_yaml_where(exc)}") from None
    return parse_config(data, base_dir=p.parent)


def _yaml_where(exc: yaml.YAMLError) -> str:
    """ " at line L, column C: <the parser's cause>" (the cause never quotes a value)."""
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None)
    return f"{where}: {problem}" if problem else where
