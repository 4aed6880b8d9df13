"""The install command of an optional extra, as it works where this gateway runs.

The gateway is not on a package index, so ``pip install 'a2m-gateway[x]'`` fails
everywhere. From a checkout (an editable install: the package imported from
the source tree beside its ``pyproject.toml``) the command is ``pip install -e
'<checkout>[x]'``, with ``.`` for the checkout when it is the working
directory; from an installed wheel, the extra's own requirements by name. The
pip named is the running interpreter's (``.venv/bin/pip``), so the command
installs where this gateway looks, activated or not.

Hints with local paths go to the operator (stderr, the CLI), never into what a
remote caller reads (describe).
"""

from __future__ import annotations

import shlex
import sys
from importlib import metadata
from pathlib import Path

DIST = "a2m-gateway"


def checkout() -> Path | None:
    """The source tree this gateway is imported from, if it is one."""
    root = Path(__file__).resolve().parents[1]
    try:
        text = (root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return None
    return root if f'name = "{DIST}"' in text else None


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it is under it, else absolute."""
    try:
        rel = path.relative_to(Path.cwd())
    except ValueError:
        return str(path)
    text = str(rel)
    return text if text == "." or "/" in text else f"./{text}"


def pip() -> str:
    """The pip of the running interpreter."""
    candidate = Path(sys.executable).parent / "pip"
    if sys.prefix != sys.base_prefix and candidate.exists():
        return _shown(candidate)
    return f"{shlex.quote(sys.executable)} -m pip"


def _requirements(extra: str) -> list[str]:
    try:
        declared = metadata.requires(DIST) or []
    except metadata.PackageNotFoundError:
        return []
    out = []
    for line in declared:
        req, _, marker = line.partition(";")
        if marker.replace("'", '"').replace(" ", "").find(f'extra=="{extra}"') >= 0:
            out.append(req.strip())
    return out


def extra_command(extra: str, *more: str) -> str:
    """The one command that installs ``extra`` (and the packages ``more``) here."""
    root = checkout()
    tail = "".join(f" {shlex.quote(m)}" for m in more)
    if root is not None:
        return f"{pip()} install -e '{_shown(root)}[{extra}]'{tail}"
    reqs = _requirements(extra)
    names = " ".join(shlex.quote(r) for r in reqs) if reqs else f"'{DIST}[{extra}]'"
    return f"{pip()} install {names}{tail}"
