"""Stages after retrieval: what a store does to the engine's ranked records before the front.

The read path after the engine is an ordered list of small stages, each declared in
the store's ``search`` config and named in describe (``search.stages``): fusion
(inside the connector, where the legs meet), the group cap (``search.per_group``,
gateway.stages.groups) and passage selection (``search.passages``,
gateway.stages.passages, its windows in gateway.stages.windows), put in order by
gateway.stages.pipeline. A stage that is off is not in the list and costs nothing. A
new stage (a reranker) is one module with an ``apply`` and one config key.
"""
