"""Who the caller is and what it may see: credentials, JWKS, scopes and rate limits."""
