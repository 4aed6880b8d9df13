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
    ("can an agent write to the store?", "demo/read-only/refusing-writes-consistently"),
    (
        "which tools does the gateway give to an MCP client?",
        "demo/overview/the-tools-an-mcp-client-gets",
    ),
    ("can I search several indexes at once?", "demo/backends/searching-several-stores-at-once"),
]


NEWCOMER_QUESTIONS: list[tuple[str, str]] = [
    (
        "I keep my vectors in a Qdrant collection: how does the gateway talk to it?",
        "demo/backends/qdrant",
    ),
    (
        "does sorting by date on a remote qdrant need a special index?",
        "demo/backends/qdrant-on-a-server",
    ),
    ("which python library is used to reach my elastic cluster?", "demo/backends/elasticsearch"),
    ("can I point it at Amazon's managed opensearch using IAM roles?", "demo/backends/opensearch"),
    (
        "what does the gateway do when the cluster answers 503 for a moment?",
        "demo/backends/retries-and-deadlines",
    ),
    (
        "what goes into the settings file, and how do I check it before starting?",
        "demo/configuration/one-yaml-file",
    ),
    ("where should the database password live if not in plain text?", "demo/configuration/secrets"),
    (
        "how do I tell it which property of my documents is the text to return?",
        "demo/configuration/field-mapping",
    ),
    (
        "how do I connect to a cluster on Elastic Cloud with a username and password?",
        "demo/configuration/connections",
    ),
    (
        "what message do I get when a store entry in my settings is wrong?",
        "demo/configuration/validation",
    ),
    ("what is the very first call a client has to make?", "demo/describe/discovery-first"),
    (
        "why does my store not advertise the keys feature?",
        "demo/describe/capabilities-follow-the-mapping",
    ),
    (
        "how can a client learn the biggest page size before asking for it?",
        "demo/describe/limits-and-read-only",
    ),
    ("how do I find out how many numbers my query vector must have?", "demo/describe/embeddings"),
    (
        "is there a URL that describes the server without speaking JSON-RPC?",
        "demo/describe/the-well-known-profile",
    ),
    ("what does -32700 mean?", "demo/errors/json-rpc-errors"),
    ("can I send several requests at once in one JSON array?", "demo/errors/json-rpc-errors"),
    ("what code comes back once I've used up my request quota?", "demo/errors/a2m-errors"),
    ("my elasticsearch node is offline: what will the agent see?", "demo/errors/engine-errors"),
    (
        "could an error message leak my cluster's hostname?",
        "demo/errors/what-an-error-never-carries",
    ),
    ("which kubernetes objects does the chart create?", "demo/helm/the-chart"),
    (
        "how do I hand my cluster credentials to the pods when deploying?",
        "demo/helm/install-beside-a-cluster",
    ),
    ("do the pods run as root?", "demo/helm/secure-defaults"),
    ("which endpoints do the liveness and readiness probes hit?", "demo/helm/secure-defaults"),
    (
        "what is served if I deploy the chart without setting up any store?",
        "demo/helm/the-demo-store-in-kubernetes",
    ),
    (
        "how can I verify a deployment really works after upgrading it?",
        "demo/helm/testing-a-release",
    ),
    ("what is the difference between a record's id and its key?", "demo/keys/addressing-a-fact"),
    ("what do I get back when I look up a key nobody has used?", "demo/keys/memory-fetch"),
    ("does demo/rec also match demo/reference?", "demo/keys/key-prefix"),
    ("how are the chunks of this demo named?", "demo/keys/keys-in-this-demo"),
    ("what problem does A2M solve for an agent?", "demo/overview/a-memory-an-agent-does-not-own"),
    ("which methods does the gateway actually serve?", "demo/overview/read-only-by-design"),
    ("can one gateway serve more than one index?", "demo/overview/backends"),
    ("can I call it from Python code without running a server?", "demo/overview/transports"),
    ("how does this demo find things without any model?", "demo/overview/this-demo"),
    (
        "what answer does forget get, and does it matter what I pass to it?",
        "demo/read-only/refusing-writes-consistently",
    ),
    (
        "does refusing every write break the protocol?",
        "demo/read-only/why-a-read-only-server-is-conformant",
    ),
    (
        "my client got READ_ONLY back: should it try again later?",
        "demo/read-only/what-clients-should-do",
    ),
    (
        "could the gateway ever change my production index?",
        "demo/read-only/where-the-data-comes-from",
    ),
    (
        "what is the main method an agent uses to get relevant memories?",
        "demo/recall/what-recall-does",
    ),
    ("how do I only get results whose metadata has a given value?", "demo/recall/parameters"),
    ("what happens if I ask for 500 results?", "demo/recall/limits"),
    ("what does limit 0 mean?", "demo/recall/limits"),
    (
        "can I use the score to decide if a result is good enough on another server?",
        "demo/recall/scores",
    ),
    (
        "what do I get when I call recall without any search text?",
        "demo/recall/recall-without-a-query",
    ),
    ("how does keyword matching work on qdrant?", "demo/search-modes/lexical"),
    ("can I send my own embedding instead of text?", "demo/search-modes/dense"),
    (
        "what if the corpus was embedded by a different model than my queries?",
        "demo/search-modes/dense",
    ),
    ("how are the keyword list and the vector list merged into one?", "demo/search-modes/hybrid"),
    (
        "can I use a local ollama server to embed the questions?",
        "demo/search-modes/query-embedders",
    ),
    ("why does a request from my web page get a 403?", "demo/security/loopback-and-origin"),
    ("will the server open a link it finds in a record?", "demo/security/uris-are-never-fetched"),
    ("are my credentials ever written to the logs?", "demo/security/secrets-and-logs"),
    ("where do log lines go when I use stdio?", "demo/security/secrets-and-logs"),
    (
        "how do I make sure each user only sees the documents they may read?",
        "demo/security/authentication-and-scopes",
    ),
    (
        "can I bind the server to 0.0.0.0 without any API key?",
        "demo/security/authentication-and-scopes",
    ),
    ("what happens if I send a huge request body?", "demo/security/bad-input"),
    (
        "how do I replay a conversation in the order it happened?",
        "demo/timeline/creation-order-oldest-first",
    ),
    (
        "when I ask the timeline for 5 records, which 5 do I get?",
        "demo/timeline/the-newest-records-still-ascending",
    ),
    (
        "my index has no timestamps: how are records ordered then?",
        "demo/timeline/stores-without-a-date-field",
    ),
    (
        "two records were saved in the same millisecond: which one comes first?",
        "demo/timeline/equal-timestamps",
    ),
    ("which versions of opensearch work with it?", "demo/backends/opensearch"),
    ("is a 429 from the engine tried again?", "demo/backends/retries-and-deadlines"),
    ("how do I read a value from a mounted file in my config?", "demo/configuration/secrets"),
    (
        "can the returned text join several fields of my document?",
        "demo/configuration/field-mapping",
    ),
    ("what characters may a store's name contain?", "demo/configuration/validation"),
    (
        "how long does the gateway wait for a slow engine before giving up?",
        "demo/errors/engine-errors",
    ),
    (
        "does the timeline take the same filters as search?",
        "demo/timeline/the-newest-records-still-ascending",
    ),
    ("how do I get each search hit's stored vector back?", "demo/recall/parameters"),
    ("is the audience of a JWT checked?", "demo/security/authentication-and-scopes"),
    ("does the server crash on control characters in the query?", "demo/security/bad-input"),
    ("how many kinds of search engine can sit behind it?", "demo/overview/backends"),
]
"""Questions in a newcomer's own words, none of them a heading, each with the section that
answers it, one or two per section of the corpus. Split by position: every third is in
:data:`NEWCOMER_DEV` (never tuned on), the rest in :data:`NEWCOMER_TRAIN`."""

NEWCOMER_TRAIN: list[tuple[str, str]] = [q for i, q in enumerate(NEWCOMER_QUESTIONS) if i % 3 != 2]
NEWCOMER_DEV: list[tuple[str, str]] = [q for i, q in enumerate(NEWCOMER_QUESTIONS) if i % 3 == 2]
