// The try page (gateway/transports/try_page.py): plain DOM, same-origin fetches only.
// The credential lives in `state` alone: never in storage, a cookie or the URL.
// Every value from the server is written with textContent, never as markup.
"use strict";

(function () {
  // Where the gateway is mounted ("" at the root; "/memory" under a parent app's mount):
  // this script is served at BASE + "/try/try.js", and every endpoint is under BASE.
  const BASE = new URL(document.currentScript.src).pathname.replace(/\/try\/try\.js$/, "");
  const state = { credential: "", stores: {}, federations: {}, describe: null, seq: 0 };
  const $ = (id) => document.getElementById(id);

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function pretty(value) {
    return JSON.stringify(value, null, 2);
  }

  // JSON for a person: a string's line breaks shown as breaks, not as \n escapes.
  function readable(value) {
    return pretty(value).replace(/(?<!\\)\\n/g, "\n");
  }

  // Record content as prose: blank lines part paragraphs; the source's hard line breaks
  // within a paragraph are its wrapping, not the text's.
  function prose(text) {
    const box = el("div", "content");
    for (const para of (text || "").split(/\n\s*\n/)) {
      if (para.trim()) box.append(el("p", null, para.replace(/\s*\n\s*/g, " ").trim()));
    }
    return box;
  }


  function showError(message) {
    const box = $("error");
    box.textContent = message;
    box.hidden = !message;
  }

  function setStatus(message) {
    $("status").textContent = message;
  }

  function headers(json) {
    const h = { Accept: "application/json" };
    if (json) h["Content-Type"] = "application/json";
    if (state.credential) h.Authorization = "Bearer " + state.credential;
    return h;
  }

  // Requests in flight, on <body data-pending>: "0" once the page has settled (tests wait on it).
  let pending = 0;
  function track(delta) {
    pending += delta;
    document.body.dataset.pending = String(pending);
  }

  // One request: {ok, status, body} where body is the parsed JSON (or null).
  async function request(method, path, payload, extraHeaders) {
    track(1);
    try {
      return await send(method, path, payload, extraHeaders);
    } finally {
      track(-1);
    }
  }

  async function send(method, path, payload, extraHeaders) {
    const init = {
      method: method,
      headers: Object.assign(headers(payload !== undefined), extraHeaders || {}),
      credentials: "omit",
      cache: "no-store",
      redirect: "error",
      referrerPolicy: "no-referrer",
    };
    if (payload !== undefined) init.body = JSON.stringify(payload);
    let response;
    try {
      response = await fetch(BASE + path, init);
    } catch (err) {
      return { ok: false, status: 0, body: null };
    }
    let body = null;
    try {
      body = await response.json();
    } catch (err) {
      body = null;
    }
    return { ok: response.ok, status: response.status, body: body };
  }

  function httpProblem(reply) {
    if (reply.status === 0) return "the server could not be reached";
    const said = reply.body && typeof reply.body.error === "string" ? ": " + reply.body.error : "";
    return "HTTP " + reply.status + said;
  }

  function rpcProblem(error) {
    return "A2M error " + error.code + ": " + error.message;
  }

  let rpcId = 0;
  async function rpc(store, method, params) {
    rpcId += 1;
    const body = { jsonrpc: "2.0", id: rpcId, method: method, params: params };
    const reply = await request("POST", "/a2m/" + encodeURIComponent(store), body);
    if (!reply.ok || !reply.body) return { error: httpProblem(reply) };
    if (reply.body.error) return { error: rpcProblem(reply.body.error) };
    return { result: reply.body.result };
  }

  // -- stores ------------------------------------------------------------------------------------

  function clearStores() {
    state.stores = {};
    state.federations = {};
    state.describe = null;
    const select = $("store");
    select.replaceChildren();
    select.disabled = true;
    $("mode").replaceChildren();
    $("mode").disabled = true;
    $("run").disabled = true;
    $("store-info").replaceChildren();
    $("results").hidden = true;
    $("preview").hidden = true;
  }

  async function loadStores() {
    clearStores();
    const reply = await request("GET", "/.well-known/a2m-server.json");
    if (reply.status === 401) {
      setStatus(
        state.credential
          ? "The server refused this credential."
          : "This server needs a credential: enter an API key or a bearer token.",
      );
      if (state.credential) showError("The credential was refused (" + httpProblem(reply) + ").");
      return;
    }
    if (!reply.ok || !reply.body) {
      setStatus("No stores.");
      showError("Discovery failed (" + httpProblem(reply) + ").");
      return;
    }
    showError("");
    state.stores = reply.body.stores || {};
    state.federations = reply.body.federations || {};
    const select = $("store");
    for (const [group, names] of [
      ["stores", Object.keys(state.stores)],
      ["federations", Object.keys(state.federations)],
    ]) {
      if (!names.length) continue;
      const optgroup = el("optgroup");
      optgroup.label = group;
      for (const name of names) {
        const option = el("option", null, name);
        option.value = name;
        optgroup.append(option);
      }
      select.append(optgroup);
    }
    const nStores = Object.keys(state.stores).length;
    const nFederations = Object.keys(state.federations).length;
    const count = nStores + nFederations;
    const plural = (n, one, many) => n + " " + (n === 1 ? one : many);
    setStatus(
      plural(nStores, "store", "stores") +
        (nFederations ? " and " + plural(nFederations, "federation", "federations") : "") +
        " on this server.",
    );
    select.disabled = count === 0;
    if (count) await selectStore();
  }

  function info(term, value) {
    const list = $("store-info");
    list.append(el("dt", null, term), el("dd", null, value));
  }

  async function selectStore() {
    const name = $("store").value;
    const seq = ++state.seq;
    state.describe = null;
    $("run").disabled = true;
    $("store-info").replaceChildren();
    $("results").hidden = true;
    $("preview").hidden = true;
    const reply = await request(
      "GET",
      "/a2m/" + encodeURIComponent(name) + "/.well-known/a2m-server.json",
    );
    if (seq !== state.seq) return;
    if (!reply.ok || !reply.body) {
      showError("describe of " + name + " failed (" + httpProblem(reply) + ").");
      return;
    }
    showError("");
    const d = reply.body;
    state.describe = d;
    if (d.description) info("description", d.description);
    if (d.search) info("search", d.search.mode);
    info("capabilities", (d.capabilities || []).join(", "));
    if ((d.capabilities || []).includes("scopes")) {
      info("scoped", "results are limited to what this credential may see");
    }
    setModes(d);
    $("run").disabled = false;
    if (name in state.stores) await loadPreview(name, seq);
  }

  function setModes(d) {
    const methods = d.methods || [];
    const caps = d.capabilities || [];
    const mode = $("mode");
    const previous = mode.value;
    mode.replaceChildren();
    const add = (value, label) => {
      const option = el("option", null, label);
      option.value = value;
      mode.append(option);
    };
    if (methods.includes("memory/recall")) {
      add("recall", "recall: ranked (" + ((d.search && d.search.mode) || "search") + ")");
    }
    if (methods.includes("memory/timeline")) add("timeline", "timeline: newest records");
    if (methods.includes("memory/fetch") && caps.includes("keys")) add("fetch", "fetch: by key");
    if ([...mode.options].some((o) => o.value === previous)) mode.value = previous;
    mode.disabled = mode.options.length === 0;
    modeChanged();
  }

  function modeChanged() {
    const mode = $("mode").value;
    $("query-label").textContent = mode === "fetch" ? "Key" : "Query";
    $("query").disabled = mode === "timeline";
    for (const id of ["where", "key-prefix", "limit"]) $(id).disabled = mode === "fetch";
  }

  // -- a query -----------------------------------------------------------------------------------

  function readForm() {
    const mode = $("mode").value;
    const text = $("query").value.trim();
    const params = {};
    if (mode === "fetch") {
      if (!text) throw new Error("fetch needs a key.");
      params.key = text;
      return { mode: mode, params: params };
    }
    if (mode === "recall" && text) params.query = text;
    const where = $("where").value.trim();
    if (where) {
      let parsed;
      try {
        parsed = JSON.parse(where);
      } catch (err) {
        throw new Error("where is not valid JSON.");
      }
      if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
        throw new Error("where must be a JSON object, such as {\"group\": \"recall\"}.");
      }
      params.where = parsed;
    }
    const prefix = $("key-prefix").value;
    if (prefix) params.key_prefix = prefix;
    const limit = $("limit").value.trim();
    if (limit) {
      const n = Number(limit);
      if (!Number.isInteger(n)) throw new Error("limit must be a whole number.");
      params.limit = n;
    }
    return { mode: mode, params: params };
  }

  function mcpCall(mode, params) {
    if (mode === "fetch") return { name: "fetch", arguments: { id: params.key } };
    const args = {};
    for (const k of ["query", "where", "key_prefix", "limit"]) if (k in params) args[k] = params[k];
    if (mode === "recall" && "query" in args) return { name: "search", arguments: args };
    delete args.query;
    return { name: "timeline", arguments: args };
  }

  async function run(event) {
    event.preventDefault();
    const store = $("store").value;
    if (!store || !state.describe) return;
    let form;
    try {
      form = readForm();
    } catch (err) {
      showError(err.message);
      return;
    }
    showError("");
    const caps = state.describe.capabilities || [];
    const params = Object.assign({}, form.params);
    if (form.mode !== "fetch" && caps.includes("prompt")) params.prompt = { cite: true };
    $("run").disabled = true;
    $("results").hidden = true;
    try {
      const call = mcpCall(form.mode, form.params);
      const [a2m, mcp, note] = await Promise.all([
        rpc(store, "memory/" + form.mode, params),
        mcpTool(store, call),
        whereNote(store, form.params.where),
      ]);
      if (a2m.error) {
        showError(a2m.error);
        $("results").hidden = true;
        return;
      }
      $("where-note").textContent = note;
      $("where-note").hidden = !note;
      showRecords(a2m.result);
      showMcp(call.name, mcp);
      $("results").hidden = false;
    } finally {
      $("run").disabled = false;
    }
  }

  async function mcpTool(store, call) {
    const body = { jsonrpc: "2.0", id: 1, method: "tools/call", params: call };
    const reply = await request("POST", "/mcp/" + encodeURIComponent(store), body, {
      Accept: "application/json, text/event-stream",
    });
    if (!reply.ok || !reply.body) return { error: httpProblem(reply) };
    if (reply.body.error) return { error: "MCP error " + reply.body.error.code + ": " + reply.body.error.message };
    return { result: reply.body.result };
  }

  // A where key the store cannot test matches nothing (A2M); say so, with the keys it can
  // test, read from the MCP search tool's input schema (the same list an agent sees).
  async function whereNote(store, where) {
    const keys = Object.keys(where || {});
    if (!keys.length) return "";
    const body = { jsonrpc: "2.0", id: 2, method: "tools/list", params: {} };
    const reply = await request("POST", "/mcp/" + encodeURIComponent(store), body, {
      Accept: "application/json, text/event-stream",
    });
    const tools = (reply.ok && reply.body && reply.body.result && reply.body.result.tools) || [];
    const search = tools.find((t) => t.name === "search" || t.name === "timeline");
    const schema = search && search.inputSchema && search.inputSchema.properties;
    if (!schema || !schema.where || !schema.where.properties) return "";
    const testable = Object.keys(schema.where.properties);
    return keys
      .filter((k) => !testable.includes(k))
      .map((k) => "where." + k + " matched nothing: store " + store + " cannot test it (keys it can test: " +
        (testable.join(", ") || "none") + ")")
      .join("\n");
  }

  // Where a record's passages sit in its whole content (search.passages): character
  // ranges, and a link opening the document at the first passage where the record has one.
  function passageField(card, where) {
    if (!Array.isArray(where.offsets)) return;
    const ranges = where.offsets.map((o) => o[0] + "\u2013" + o[1]).join(", ");
    const row = el("div", "field passage");
    row.append(el("span", "name", "passage"), el("span", "value", "characters " + ranges + " of " + where.length));
    if (typeof where.uri === "string" && /^https?:\/\//i.test(where.uri)) {
      const link = el("a", "passage-link", "open at the passage");
      link.href = where.uri;
      link.target = "_blank";
      link.rel = "noopener noreferrer";
      row.append(" ", link);
    }
    card.append(row);
  }

  function field(card, name, value) {
    if (value === undefined || value === null || value === "") return;
    const row = el("div", "field " + name.replace(/_/g, "-"));
    row.append(el("span", "name", name), el("span", "value", value));
    card.append(row);
  }

  function showRecords(result) {
    const list = $("records");
    list.replaceChildren();
    const records = result.record !== undefined ? (result.record ? [result.record] : []) : result.records || [];
    $("record-count").textContent = "(" + records.length + ")";
    if (!records.length) {
      list.append(el("li", "empty", "No records: nothing matches, or nothing here is visible to this credential."));
    }
    for (const r of records) {
      const card = el("li", "record");
      const head = el("div", "head");
      if (typeof r.score === "number") head.append(el("span", "score", r.score.toFixed(3)));
      const title = (r.metadata && r.metadata.title) || r.key || r.id;
      head.append(el("span", "title", title));
      card.append(head);
      field(card, "uri", r.uri);
      field(card, "key", r.key);
      field(card, "id", r.id);
      field(card, "media_type", r.media_type);
      field(card, "created_at", r.created_at);
      field(card, "group", r.group);
      if (r.metadata && Object.keys(r.metadata).length) field(card, "metadata", JSON.stringify(r.metadata));
      if (r.metadata && r.metadata.passage) passageField(card, r.metadata.passage);
      card.append(prose(r.content));
      list.append(card);
    }
    const prompt = $("prompt");
    if (result.prompt === undefined || result.prompt === null) {
      prompt.textContent = "(no prompt block: the store does not declare the prompt capability, or this mode has none)";
    } else {
      prompt.textContent = result.prompt || "(empty: no record to cite)";
    }
  }

  function showMcp(name, mcp) {
    $("mcp-tool").textContent = name;
    if (mcp.error) {
      $("mcp-text").textContent = "(" + mcp.error + ")";
      $("mcp-json").textContent = "";
      return;
    }
    const result = mcp.result || {};
    const text = (result.content || []).map((c) => c.text || "").join("\n");
    $("mcp-text").textContent = (result.isError ? "isError: " : "") + text;
    $("mcp-json").textContent = result.structuredContent ? pretty(result.structuredContent) : "";
  }

  // -- mapping preview ---------------------------------------------------------------------------

  async function loadPreview(store, seq) {
    const reply = await request("POST", "/try/preview/" + encodeURIComponent(store), { limit: 3 });
    if (seq !== state.seq) return;
    const tbody = $("preview-table").tBodies[0];
    tbody.replaceChildren();
    if (!reply.ok || !reply.body || reply.body.error) {
      const problem = reply.body && reply.body.error && reply.body.error.code !== undefined
        ? rpcProblem(reply.body.error)
        : httpProblem(reply);
      const row = el("tr");
      const cell = el("td", "empty", "No preview (" + problem + ").");
      cell.colSpan = 2;
      row.append(cell);
      tbody.append(row);
      $("mapping").textContent = "";
      $("preview").hidden = false;
      return;
    }
    const docs = reply.body.documents || [];
    if (!docs.length) {
      const row = el("tr");
      const cell = el("td", "empty", "No documents visible to this credential.");
      cell.colSpan = 2;
      row.append(cell);
      tbody.append(row);
    }
    for (const pair of docs) {
      const row = el("tr");
      const doc = el("td", "document");
      doc.append(el("pre", null, readable(pair.document)));
      const rec = el("td", "record");
      rec.append(el("pre", null, readable(pair.record)));
      row.append(doc, rec);
      tbody.append(row);
    }
    $("mapping").textContent = pretty(reply.body.mapping || {});
    $("preview").hidden = false;
  }

  // -- wiring ------------------------------------------------------------------------------------

  async function serverDocs() {
    const reply = await request("GET", "/");
    if (!reply.ok || !reply.body || !reply.body.docs) return;
    const links = reply.body.doc_links || {};
    const footer = $("server-docs");
    footer.replaceChildren("Docs: ");
    Object.entries(reply.body.docs).forEach(([name, where], i) => {
      if (i) footer.append(" · ");
      const href = links[name];
      if (!href) {
        footer.append(name + ": " + where);
        return;
      }
      // A doc this server serves is under BASE; the draft is an address of its own.
      const a = el("a", null, name);
      a.href = href.startsWith("/") ? BASE + href : href;
      a.rel = "noopener noreferrer";
      a.title = where;
      footer.append(a);
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("auth-form").addEventListener("submit", (event) => {
      event.preventDefault();
      state.credential = $("cred").value.trim();
      showError("");
      loadStores();
    });
    $("forget").addEventListener("click", () => {
      state.credential = "";
      $("cred").value = "";
      showError("");
      loadStores();
    });
    $("store").addEventListener("change", () => selectStore());
    $("mode").addEventListener("change", modeChanged);
    $("query-form").addEventListener("submit", run);
    serverDocs();
    loadStores();
  });
})();
