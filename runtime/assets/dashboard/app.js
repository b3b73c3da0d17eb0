// The dashboard's script (served by the gateway at /dashboard/app.js).
// Signed in, the session is an HttpOnly cookie this script cannot read
// (set by POST /dashboard/session with the refresh token, which is then
// forgotten); its calls carry the session's CSRF token, kept in this
// closure only. A reload asks GET /dashboard/session for it again.
// Money arrives as decimal strings and is shown as it came; numbers are
// parsed only to size the chart's bars.
"use strict";
(() => {
  const API = "/api/v1";
  let session = null; // { csrf }
  let config = { stripe: false, routes: [], choices: {} };

  const $ = (id) => document.getElementById(id);
  const has = (route) => config.routes.includes(route);
  // Whether a query parameter of a route takes `value` (any, when the
  // table does not fix its values).
  const takes = (route, param, value) => {
    const c = (config.choices || {})[`${route}?${param}`];
    return has(route) && (!c || c.includes(value));
  };

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v;
      else e.setAttribute(k, v);
    }
    for (const c of children) e.append(c instanceof Node ? c : String(c ?? ""));
    return e;
  }

  function body(section) {
    return $(section).querySelector(".body") || $(section).lastElementChild;
  }

  function unavailable(target, route) {
    target.replaceChildren(
      el("p", { class: "unavailable" }, `Not available: this gateway has no ${route}.`)
    );
  }

  function failed(target, what, err) {
    target.replaceChildren(el("p", { class: "error" }, `${what} failed: ${err.message}`));
  }

  // ---- HTTP ----

  async function send(method, path, data, headers0, base) {
    const headers = { Accept: "application/json", ...(headers0 || {}) };
    if (data !== undefined) headers["Content-Type"] = "application/json";
    const r = await fetch((base ?? API) + path, {
      method,
      headers,
      body: data === undefined ? undefined : JSON.stringify(data),
      cache: "no-store",
      credentials: "same-origin",
    });
    const text = await r.text();
    let json = null;
    try { json = text ? JSON.parse(text) : null; } catch (_) { json = null; }
    return { status: r.status, json };
  }

  function message(a) {
    const j = a.json || {};
    return (j.error && j.error.message) || j.message || j.detail || `HTTP ${a.status}`;
  }

  // A call signed in by the session cookie, with its CSRF token; 401:
  // the session ended (signed out elsewhere, or expired).
  async function api(method, path, data) {
    if (!session) throw new Error("signed out");
    const a = await send(method, path, data, { "X-CSRF-Token": session.csrf });
    if (a.status === 401) {
      signOut("Your session ended: sign in again.");
      throw new Error("signed out");
    }
    if (a.status >= 400) throw new Error(message(a));
    return a.json;
  }

  // ---- sign in / out ----

  async function signIn(ev) {
    ev.preventDefault();
    const out = $("signin-error");
    out.textContent = "";
    const ident = $("username").value.trim();
    const login = ident.includes("@") ? { email: ident } : { username: ident };
    login.password = $("password").value;
    const a = await send("POST", "/auth/login", login);
    $("password").value = "";
    if (a.status !== 200 || !a.json || !a.json.refresh_token) {
      out.textContent = a.status === 401 ? "Wrong username or password." : message(a);
      return;
    }
    // The refresh token goes into the session cookie and is forgotten here.
    const s = await send("POST", "/dashboard/session", undefined,
      { Authorization: `Bearer ${a.json.refresh_token}` }, "");
    if (s.status !== 200 || !s.json || !s.json.csrf_token) {
      out.textContent = message(s);
      return;
    }
    await signedIn(s.json.csrf_token);
  }

  async function signedIn(csrf) {
    session = { csrf };
    $("signin").hidden = true;
    $("app").hidden = false;
    $("sign-out").hidden = false;
    $("balance-title").focus();
    await loadAll();
  }

  function signOut(why) {
    const s = session;
    session = null;
    delete document.body.dataset.loaded;
    if (s) {
      send("DELETE", "/dashboard/session", undefined, { "X-CSRF-Token": s.csrf }, "").catch(() => {});
    }
    $("app").hidden = true;
    $("sign-out").hidden = true;
    $("who").textContent = "";
    $("new-key").hidden = true;
    $("new-key-value").textContent = "";
    $("signin").hidden = false;
    $("signin-error").textContent = typeof why === "string" ? why : "";
    $("username").focus();
  }

  // ---- sections ----

  async function loadAll() {
    await Promise.all([
      loadBalance(), loadDaily(), loadGroups("model"), loadGroups("key"), loadGroups("tool"),
      loadRequests(), loadBatches(), loadKeys(), loadAlerts(), loadOrgs(),
    ].map((p) => p.catch(() => {})));
    document.body.dataset.loaded = "1";
  }

  async function loadBalance() {
    const set = (b, h, v) => {
      $("balance-total").textContent = b ?? "—";
      $("balance-held").textContent = h ?? "—";
      $("balance-available").textContent = v ?? "—";
    };
    try {
      const me = await api("GET", "/auth/me");
      $("who").textContent = `Signed in as ${me.username || me.email || "you"}`;
      if (has("GET /api/v1/credits")) {
        const c = await api("GET", "/credits");
        set(c.balance, c.held, c.available);
        $("balance-note").textContent = "";
      } else {
        set(me.balance, null, null);
        $("balance-note").textContent =
          "Holds not available: this gateway has no GET /api/v1/credits.";
      }
    } catch (e) {
      $("balance-note").textContent = `Balance failed: ${e.message}`;
    }
    $("buy-form").hidden = !(config.stripe && has("POST /api/v1/stripe/checkout"));
  }

  function day(d) {
    return d.toISOString().slice(0, 10);
  }

  function lastDays(n) {
    const to = new Date();
    const from = new Date(to.getTime() - (n - 1) * 86400000);
    return { from: day(from), to: day(to) };
  }

  // The groups of a usage answer, however the list is named.
  function groups(u) {
    return (u && (u.data || u.groups || u.rows)) || [];
  }

  function label(g, by) {
    // By key: its name, else its prefix; `null`: access tokens and later charges.
    const v = by === "key"
      ? (g.key_name || g.key_prefix || g.key)
      : (g[by] ?? g.group ?? g.date ?? g.name);
    return v === null || v === undefined || v === "" ? "(none)" : String(v);
  }

  async function usage(by, range) {
    return groups(await api("GET", `/usage?from=${range.from}&to=${range.to}&group_by=${by}`));
  }

  async function loadDaily() {
    const target = $("chart");
    if (!has("GET /api/v1/usage")) return unavailable(target, "GET /api/v1/usage");
    const range = lastDays(30);
    try {
      const rows = await usage("day", range);
      target.replaceChildren(chart(rows, range));
    } catch (e) {
      failed(target, "Spend per day", e);
    }
  }

  // One bar per day that has usage, on a 30-day axis; heights relative to
  // the largest day.
  function chart(rows, range) {
    const NS = "http://www.w3.org/2000/svg";
    const svg = (tag, attrs) => {
      const e = document.createElementNS(NS, tag);
      for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
      return e;
    };
    const W = 900, H = 150, PAD = 18, slot = W / 30;
    const start = Date.parse(range.from + "T00:00:00Z");
    const days = rows.map((g) => ({ day: label(g, "day"), cost: String(g.cost ?? "0") }));
    const max = Math.max(0, ...days.map((d) => Number(d.cost) || 0));
    const s = svg("svg", {
      viewBox: `0 0 ${W} ${H + PAD}`, role: "img", class: "bars",
      "aria-label": `Spend per day from ${range.from} to ${range.to}: ${days.length} days with usage`,
    });
    s.append(svg("line", { x1: 0, y1: H, x2: W, y2: H, class: "axis" }));
    for (const d of days) {
      const i = Math.round((Date.parse(d.day.slice(0, 10) + "T00:00:00Z") - start) / 86400000);
      if (!(i >= 0 && i < 30)) continue;
      const h = max > 0 ? Math.max(2, ((Number(d.cost) || 0) / max) * (H - 10)) : 2;
      const r = svg("rect", {
        x: (i * slot + 2).toFixed(1), y: (H - h).toFixed(1), width: (slot - 4).toFixed(1),
        height: h.toFixed(1), class: "bar", "data-day": d.day.slice(0, 10), "data-cost": d.cost,
      });
      const t = svg("title", {});
      t.textContent = `${d.day.slice(0, 10)}: $${d.cost}`;
      r.append(t);
      s.append(r);
    }
    for (const [i, text] of [[0, range.from], [29, range.to]]) {
      const t = svg("text", { x: i === 0 ? 0 : W, y: H + PAD - 4, class: "tick",
        "text-anchor": i === 0 ? "start" : "end" });
      t.textContent = text;
      s.append(t);
    }
    const wrap = el("figure", {}, s);
    if (days.length === 0) wrap.append(el("figcaption", {}, "No spend in the last 30 days."));
    return wrap;
  }

  function table(headers, rows) {
    const t = el("table", {},
      el("thead", {}, el("tr", {}, ...headers.map((h) => el("th", { scope: "col" }, h)))));
    const tb = el("tbody");
    for (const r of rows) tb.append(el("tr", {}, ...r.map((c) => el("td", {}, c))));
    t.append(tb);
    return el("div", { class: "scroll" }, t);
  }

  async function loadGroups(by) {
    const target = body(`by-${by}`);
    if (!has("GET /api/v1/usage")) return unavailable(target, "GET /api/v1/usage");
    if (!takes("GET /api/v1/usage", "group_by", by)) {
      return unavailable(target, `GET /api/v1/usage?group_by=${by}`);
    }
    try {
      const rows = await usage(by, lastDays(30));
      if (rows.length === 0) return target.replaceChildren(el("p", {}, "No usage in the last 30 days."));
      const head = { key: "Key", tool: "Tool" }[by] || "Model";
      target.replaceChildren(table([head, by === "tool" ? "Calls" : "Requests", "Cost (USD)"],
        rows.map((g) => [label(g, by), String(g.requests ?? ""), String(g.cost ?? "")])));
    } catch (e) {
      failed(target, `Spend by ${by}`, e);
    }
  }

  // The latest charges of the ledger: each a request, with its details.
  async function loadRequests() {
    const target = body("requests");
    if (!has("GET /api/v1/credits/ledger")) return unavailable(target, "GET /api/v1/credits/ledger");
    try {
      const l = await api("GET", "/credits/ledger?limit=20");
      const rows = groups(l).filter((e) => e.request_id || e.kind === "charge");
      if (rows.length === 0) return target.replaceChildren(el("p", {}, "No requests yet."));
      const t = table(["When", "Request", "Cost (USD)"], rows.map((e) => {
        const cost = String(e.cost ?? e.amount ?? "").replace(/^-/, "");
        const id = e.request_id;
        const open = !id ? (e.note || `usage ${e.usage_id ?? "?"}`)
          : has("GET /api/v1/generations/{request_id}")
            ? el("button", { type: "button", class: "link", "data-request": id }, id)
            : id;
        return [String(e.created_at ?? ""), open, cost];
      }));
      target.replaceChildren(t);
    } catch (e) {
      failed(target, "Latest requests", e);
    }
  }

  // The latest batches: each with its status, its lines ended of all, and
  // what they cost so far.
  async function loadBatches() {
    const target = body("batches");
    if (!has("GET /api/v1/batches")) return unavailable(target, "GET /api/v1/batches");
    try {
      const rows = groups(await api("GET", "/batches?limit=20"));
      if (rows.length === 0) return target.replaceChildren(el("p", {}, "No batches yet."));
      target.replaceChildren(table(["Batch", "Status", "Progress", "Cost (USD)", "Created"], rows.map((b) => {
        const c = b.request_counts || {};
        const ended = (c.completed ?? 0) + (c.failed ?? 0);
        const progress = `${ended} / ${c.total ?? 0}` + (c.failed ? ` (${c.failed} failed)` : "");
        const created = b.created_at
          ? new Date(b.created_at * 1000).toISOString().slice(0, 16).replace("T", " ") : "";
        return [b.id, b.status, progress, String(b.cost ?? ""), created];
      })));
    } catch (e) {
      failed(target, "Batches", e);
    }
  }

  async function loadAlerts() {
    const target = body("alerts");
    if (!has("GET /api/v1/alerts/settings")) {
      $("alert-form").hidden = true;
      return unavailable(target, "GET /api/v1/alerts/settings");
    }
    try {
      const st = await api("GET", "/alerts/settings");
      $("alert-thresholds").value = (st.budget_thresholds || []).join(", ");
      $("alert-floor").value = st.balance_floor_usd ?? "";
      $("alert-webhook").value = st.webhook_url ?? "";
      $("alert-email").checked = !!st.email;
      const sent = groups(await api("GET", "/alerts"));
      if (sent.length === 0) return target.replaceChildren(el("p", {}, "No alerts sent yet."));
      target.replaceChildren(table(["Alert", "Threshold", "Sent", "E-mail", "Webhook"], sent.map((a) => [
        a.type === "balance.floor" ? `Balance ${a.balance_usd} USD` : `Key ${a.key_name || a.key_id}: ${a.spent_usd} of ${a.budget_usd} USD`,
        a.type === "balance.floor" ? `${a.threshold} USD` : `${a.threshold} %`,
        String(a.created_at || "").slice(0, 16).replace("T", " "),
        a.deliveries?.email ?? "", a.deliveries?.webhook ?? "",
      ])));
    } catch (e) {
      failed(target, "Alerts", e);
    }
  }

  async function saveAlerts(ev) {
    ev.preventDefault();
    $("alert-error").textContent = "";
    const thresholds = $("alert-thresholds").value.split(",").map((t) => t.trim()).filter((t) => t)
      .map(Number);
    const floor = $("alert-floor").value.trim();
    const hook = $("alert-webhook").value.trim();
    const data = {
      budget_thresholds: thresholds,
      balance_floor_usd: floor || null,
      webhook_url: hook || null,
      email: $("alert-email").checked,
    };
    try {
      const r = await api("PUT", "/alerts/settings", data);
      if (r.webhook_secret) {
        $("alert-secret-value").textContent = r.webhook_secret;
        $("alert-secret").hidden = false;
      }
    } catch (e) {
      $("alert-error").textContent = `Saving the alerts failed: ${e.message}`;
    }
    await loadAlerts();
  }

  async function loadOrgs() {
    const target = body("orgs");
    if (!has("GET /api/v1/organizations")) {
      $("org-form").hidden = true;
      return unavailable(target, "GET /api/v1/organizations");
    }
    try {
      const orgs = groups(await api("GET", "/organizations"));
      if (orgs.length === 0) return target.replaceChildren(el("p", {}, "No organizations yet."));
      target.replaceChildren(table(["Organization", "Id", "Your role"],
        orgs.map((o) => [o.name, String(o.id), o.role])));
    } catch (e) {
      failed(target, "Organizations", e);
    }
  }

  async function createOrg(ev) {
    ev.preventDefault();
    $("org-error").textContent = "";
    try {
      await api("POST", "/organizations", { name: $("org-name").value.trim() });
      $("org-name").value = "";
    } catch (e) {
      $("org-error").textContent = `Creating the organization failed: ${e.message}`;
    }
    await loadOrgs();
  }

  async function showGeneration(id) {
    const panel = $("generation");
    const dl = $("generation-fields");
    $("generation-title").textContent = `Request ${id}`;
    dl.replaceChildren();
    panel.hidden = false;
    try {
      const g = await api("GET", `/generations/${encodeURIComponent(id)}`);
      for (const [k, v] of Object.entries(g || {})) {
        const text = v !== null && typeof v === "object" ? JSON.stringify(v) : String(v ?? "—");
        dl.append(el("dt", {}, k), el("dd", { "data-field": k }, text));
      }
    } catch (e) {
      dl.append(el("dt", {}, "error"), el("dd", {}, e.message));
    }
    panel.focus();
  }

  async function loadKeys() {
    const target = body("keys");
    const budgets = $("key-form").querySelectorAll(".budget-field");
    try {
      const keys = groups(await api("GET", "/keys"));
      const withBudget = keys.some((k) => "budget_usd" in k);
      budgets.forEach((b) => { b.hidden = !withBudget && keys.length > 0; });
      const rows = keys.map((k) => {
        const budget = k.budget_usd == null ? "none"
          : `$${k.budget_usd} per ${k.budget_period ?? "?"}: spent $${k.spent_usd ?? "?"}` +
            (k.held_usd && Number(k.held_usd) > 0 ? `, held $${k.held_usd}` : "") +
            (k.period_end ? `, until ${k.period_end}` : "");
        const who = k.name || k.prefix;
        const action = k.active === false || k.revoked_at
          ? "revoked"
          : el("span", { class: "actions" },
            el("button", { type: "button", "data-revoke": String(k.id),
              "aria-label": `Revoke key ${who}` }, "Revoke"),
            has("PATCH /api/v1/keys/{key_id}")
              ? el("button", { type: "button", "data-budget": String(k.id),
                "aria-label": `Set key ${who}'s budget to the budget above (empty removes it)` },
              "Set budget")
              : "",
            has("PATCH /api/v1/keys/{key_id}")
              ? el("button", { type: "button", "data-limits": String(k.id),
                "aria-label": `Set key ${who}'s limits to the requests and tokens per minute above (empty removes them)` },
              "Set limits")
              : "");
        const tools = Array.isArray(k.mcp_tools) ? k.mcp_tools.join(", ") : "all";
        const limits = k.rpm == null && k.tpm == null ? "none"
          : [k.rpm != null ? `${k.rpm} requests` : "", k.tpm != null ? `${k.tpm} tokens` : ""]
            .filter((t) => t).join(", ") + " per minute";
        return [k.name || "(unnamed)", String(k.prefix ?? ""), budget, limits, tools, action];
      });
      if (rows.length === 0) return target.replaceChildren(el("p", {}, "No keys yet."));
      target.replaceChildren(table(["Name", "Prefix", "Budget", "Limits", "MCP tools", ""], rows));
    } catch (e) {
      failed(target, "Keys", e);
    }
  }

  async function createKey(ev) {
    ev.preventDefault();
    const out = $("key-error");
    out.textContent = "";
    const data = {};
    const name = $("key-name").value.trim();
    if (name) data.name = name;
    const budget = $("key-budget").value.trim();
    if (budget) {
      data.budget_usd = budget;
      data.budget_period = $("key-period").value;
    }
    const tools = $("key-mcp").value.split(",").map((t) => t.trim()).filter((t) => t);
    if (tools.length) data.mcp_tools = tools;
    for (const [field, v] of Object.entries(limitsAsked())) if (v != null) data[field] = v;
    try {
      const k = await api("POST", "/keys", data);
      $("new-key-value").textContent = k.key;
      $("new-key").hidden = false;
      $("key-name").value = "";
      $("key-budget").value = "";
      $("key-mcp").value = "";
      $("key-rpm").value = "";
      $("key-tpm").value = "";
      await loadKeys();
    } catch (e) {
      out.textContent = `Creating the key failed: ${e.message}`;
    }
  }

  async function setBudget(id) {
    const usd = $("key-budget").value.trim();
    const data = usd ? { budget_usd: usd, budget_period: $("key-period").value } : { budget_usd: null };
    $("key-error").textContent = "";
    try {
      await api("PATCH", `/keys/${encodeURIComponent(id)}`, data);
    } catch (e) {
      $("key-error").textContent = `Setting the budget failed: ${e.message}`;
    }
    await loadKeys();
    $("keys-title").focus();
  }

  /** The limits typed in the form: a number each, or null (none). */
  function limitsAsked() {
    const n = (id) => {
      const v = $(id).value.trim();
      return v === "" ? null : Number(v);
    };
    return { rpm: n("key-rpm"), tpm: n("key-tpm") };
  }

  async function setLimits(id) {
    $("key-error").textContent = "";
    try {
      await api("PATCH", `/keys/${encodeURIComponent(id)}`, limitsAsked());
    } catch (e) {
      $("key-error").textContent = `Setting the limits failed: ${e.message}`;
    }
    await loadKeys();
    $("keys-title").focus();
  }

  async function revokeKey(id) {
    try {
      await api("DELETE", `/keys/${encodeURIComponent(id)}`);
    } catch (e) {
      $("key-error").textContent = `Revoking the key failed: ${e.message}`;
    }
    await loadKeys();
    $("keys-title").focus();
  }

  async function buy(ev) {
    ev.preventDefault();
    $("buy-error").textContent = "";
    const back = location.origin + "/dashboard";
    try {
      const c = await api("POST", "/stripe/checkout", {
        amount_usd: $("buy-amount").value.trim(), success_url: back, cancel_url: back,
      });
      location.assign(c.checkout_url);
    } catch (e) {
      $("buy-error").textContent = `Checkout failed: ${e.message}`;
    }
  }

  async function start() {
    for (const h of document.querySelectorAll("h2")) h.setAttribute("tabindex", "-1");
    $("signin-form").addEventListener("submit", signIn);
    $("sign-out").addEventListener("click", () => signOut());
    $("key-form").addEventListener("submit", createKey);
    $("alert-form").addEventListener("submit", saveAlerts);
    $("org-form").addEventListener("submit", createOrg);
    $("buy-form").addEventListener("submit", buy);
    $("generation-close").addEventListener("click", () => { $("generation").hidden = true; });
    document.addEventListener("click", (ev) => {
      const t = ev.target.closest("button");
      if (!t) return;
      if (t.dataset.revoke) revokeKey(t.dataset.revoke);
      if (t.dataset.budget) setBudget(t.dataset.budget);
      if (t.dataset.limits) setLimits(t.dataset.limits);
      if (t.dataset.request) showGeneration(t.dataset.request);
    });
    try {
      const r = await fetch("/dashboard/config.json", { cache: "no-store" });
      if (r.ok) config = await r.json();
    } catch (_) { /* sections then say "not available" */ }
    // Signed in already (a reload): the session cookie answers.
    try {
      const s = await send("GET", "/dashboard/session", undefined, {}, "");
      if (s.status === 200 && s.json && s.json.signed_in) await signedIn(s.json.csrf_token);
    } catch (_) { /* the sign-in form stays */ }
    document.body.dataset.ready = "1";
  }

  start();
})();
