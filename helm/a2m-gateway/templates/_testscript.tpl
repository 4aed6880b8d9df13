{{/*
Python run by the `helm test` pod: memory/describe then memory/recall on every
store, over the Service, with the stdlib only. Exits non-zero on any HTTP
error, JSON-RPC error, or malformed result.
*/}}
{{- define "a2m-gateway.testScript" -}}
import json
import os
import sys
import urllib.error
import urllib.request

BASE = os.environ["A2M_BASE_URL"]
STORES = json.loads(os.environ["A2M_STORES"])
QUERY = os.environ["A2M_QUERY"]
EXPECT_RECORDS = os.environ["A2M_EXPECT_RECORDS"] == "true"
TIMEOUT = float(os.environ["A2M_TIMEOUT"])
API_KEY = os.environ.get("A2M_API_KEY", "")


def fail(message):
    print("FAIL " + message, flush=True)
    sys.exit(1)


def get(path):
    try:
        with urllib.request.urlopen(BASE + path, timeout=TIMEOUT) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def call(store, request_id, method, params):
    body = json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    ).encode()
    headers = {"Content-Type": "application/json", "A2M-Protocol-Version": "a2m/0.1"}
    if API_KEY:
        headers["Authorization"] = "Bearer " + API_KEY
    request = urllib.request.Request(
        BASE + "/a2m/" + store,
        data=body,
        method="POST",
        headers=headers,
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as resp:
            reply = json.load(resp)
    except urllib.error.HTTPError as exc:
        fail("%s %s: HTTP %d %s" % (store, method, exc.code, exc.read()[:500]))
    except (urllib.error.URLError, OSError, ValueError) as exc:
        fail("%s %s: %s" % (store, method, exc))
    if reply.get("id") != request_id:
        fail("%s %s: reply id %r, expected %r" % (store, method, reply.get("id"), request_id))
    if "error" in reply:
        fail("%s %s: JSON-RPC error %s" % (store, method, json.dumps(reply["error"])))
    return reply["result"]


status = get("/readyz")
if status != 200:
    fail("/readyz answered %d: an engine is unreachable" % status)
print("ok   /readyz 200", flush=True)

for store in STORES:
    described = call(store, 1, "memory/describe", {})
    capabilities = described.get("capabilities", [])
    methods = described.get("methods", [])
    if "core" not in capabilities or "memory/recall" not in methods:
        fail("%s describe: no core capability / memory/recall in %s" % (store, json.dumps(described)))
    print("ok   %s describe: protocol=%s capabilities=%s" % (store, described.get("protocol"), capabilities), flush=True)

    recalled = call(store, 2, "memory/recall", {"query": QUERY, "limit": 3})
    records = recalled.get("records")
    if not isinstance(records, list):
        fail("%s recall: result has no records list: %s" % (store, json.dumps(recalled)[:500]))
    scores = [r["score"] for r in records if isinstance(r.get("score"), (int, float))]
    if scores != sorted(scores, reverse=True):
        fail("%s recall: scores not descending: %s" % (store, scores))
    if EXPECT_RECORDS and not records:
        fail("%s recall: no record for query %r" % (store, QUERY))
    print("ok   %s recall: %d record(s) for %r" % (store, len(records), QUERY), flush=True)

print("PASS describe + recall on %d store(s)" % len(STORES), flush=True)
{{- end }}
