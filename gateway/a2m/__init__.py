"""The A2M wire protocol: error codes, the JSON-RPC envelope, method table, params models,
record shape and the dispatcher."""
