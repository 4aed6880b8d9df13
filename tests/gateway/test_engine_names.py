"""Engines live in connectors/ and its registry: few gateway modules name one in code."""

from __future__ import annotations

from pathlib import Path

import gateway
from tests.support.engine_names import engine_modules, names_an_engine

ALLOWED = 4
"""The registry's gateway side (gateway/config/engines.py) and the demo's modules."""


def test_code_naming_an_engine_is_found_and_prose_is_not() -> None:
    # Controls: each form of code is caught, each form of prose is not.
    assert names_an_engine("x = 'qdrant'\n")
    assert names_an_engine("from connectors.lucene.config import LuceneSearchKeys\n")
    assert names_an_engine("if isinstance(c, QdrantConnection):\n    pass\n")
    assert names_an_engine("f = Field(title='Elasticsearch hosts')\n")
    assert not names_an_engine('"""Reads Qdrant and OpenSearch."""\n# elasticsearch\nx = 1\n')
    assert not names_an_engine("f = Field(description='index (ES/OS) or collection (Qdrant)')\n")
    assert not names_an_engine('class A:\n    x: int = 1\n    """As Lucene does."""\n')


def test_at_most_a_few_gateway_modules_name_an_engine() -> None:
    found = engine_modules(Path(gateway.__file__).parent)
    assert len(found) <= ALLOWED, found
    assert "gateway/config/engines.py" in found  # the walk sees the registry's own module
