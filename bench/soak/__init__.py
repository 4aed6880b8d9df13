"""A bounded soak with faults: a real gateway under fixed concurrency while a fault script
kills, slows, rate-limits (429/503) and resets each engine node in turn.

``harness`` wires it together, ``proxy`` is the fault-injecting relay in front of each node,
``faults`` the phase script, ``load`` the workers, ``outcome`` the verdict on each answer,
``report`` the figures and targets. Results and the command: docs/benchmarks.md.
"""
