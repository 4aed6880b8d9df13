"""The front every source stands behind: the gate, limits, shaping and describe (front.py),
driven by one Profile value (profile.py), over the Source contract (source.py); the ledger
that charges the rate limit and writes the audit line (ledger.py); prompt rendering."""
