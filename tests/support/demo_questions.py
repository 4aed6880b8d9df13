"""Questions a newcomer asks about A2M and this gateway, each with the demo chunk that answers it.

Shared by every relevance check of the embedded demo (``tests/gateway/test_demo_relevance.py``),
whatever its search mode. Each answer is a chunk's ``key`` (``demo/<file>/<section slug>``),
which stays put while the corpus's wording changes. Written as people phrase them, not with
the corpus's own words: British and American spellings, question words, synonyms.
"""

from __future__ import annotations

DEMO_QUESTIONS: list[tuple[str, str]] = [
    ("what happens when I call remember?", "demo/read-only/refusing-writes-consistently"),
    ("normalise", "demo/recall/scores"),
    ("how are recall scores normalized?", "demo/recall/scores"),
    ("how do I keep my API key out of the config file?", "demo/configuration/secrets"),
    ("which error code means the search engine is down?", "demo/errors/engine-errors"),
    (
        "how do I install the gateway on Kubernetes next to my cluster?",
        "demo/helm/install-beside-a-cluster",
    ),
    ("how does hybrid search combine lexical and dense results?", "demo/search-modes/hybrid"),
    ("how do I fetch one record by its key?", "demo/keys/memory-fetch"),
    (
        "is a read-only server still conformant?",
        "demo/read-only/why-a-read-only-server-is-conformant",
    ),
    ("should my client retry after a READ_ONLY error?", "demo/read-only/what-clients-should-do"),
    ("what if my index has no timestamp field?", "demo/timeline/stores-without-a-date-field"),
    ("in what order does timeline return records?", "demo/timeline/creation-order-oldest-first"),
    ("can a web page in my browser call the gateway?", "demo/security/loopback-and-origin"),
    ("does the gateway download the uri of a record?", "demo/security/uris-are-never-fetched"),
    ("how do I map my document fields to record fields?", "demo/configuration/field-mapping"),
    ("what is the maximum number of records one recall returns?", "demo/recall/limits"),
    ("what does recall return when the query is empty?", "demo/recall/recall-without-a-query"),
    ("which models can embed the query text?", "demo/search-modes/query-embedders"),
    ("how do I authenticate callers with a JWT?", "demo/security/authentication-and-scopes"),
    (
        "which capabilities does describe declare?",
        "demo/describe/capabilities-follow-the-mapping",
    ),
    ("are failed engine requests retried?", "demo/backends/retries-and-deadlines"),
    ("how do I select every record whose key starts with a prefix?", "demo/keys/key-prefix"),
    ("can agents talk to the gateway over stdio?", "demo/overview/transports"),
    ("what does a2m-gateway check do?", "demo/configuration/one-yaml-file"),
    ("how do I test a helm release?", "demo/helm/testing-a-release"),
]
