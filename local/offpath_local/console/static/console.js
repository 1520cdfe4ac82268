// offpath console. No build step, no dependency: the browser's DOM, fetch and SVG.
//
// Rules this file keeps:
// - Everything a tenant wrote (payloads, results, errors, idempotency keys, type names) is put on the page
//   with textContent or as an attribute value, never parsed as HTML. There is no innerHTML here.
// - The bearer token comes from the URL's fragment (#token=...), is kept in sessionStorage and sent as
//   Authorization on every API call. No cookie: another site's page cannot act in the console's name.
// - The operations routes (POST /jobs/{id}/retry, GET /stats, GET /alarms) are looked up in the API's
//   /openapi.json: against an older deployed API that lacks one, its feature is not offered.
// - Statistics are asked at most once a minute: on AWS each GET /stats is a GetMetricData call, billed per
//   metric asked, and its data is per minute anyway.
(() => {
  "use strict";

  const ROOT = "/console";
  const API = (document.querySelector('meta[name="offpath-api"]') || {}).content || "";
  const REFRESH_MS = 2000;
  const STATS_REFRESH_MS = 60000;
  const ALARMS_REFRESH_MS = 10000;
  const DLQ_BANNER_MS = 5000;
  const FIRST_DEPTH_GAP_MS = 500;
  const SYSTEM_TENANT = "system";
  const STATES = ["QUEUED", "SCHEDULED", "RUNNING", "RETRYING", "SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED"];
  const FINAL = new Set(["SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED"]);
  // The names of a job's server-sent events (offpath.domain.events.EventType).
  const EVENT_TYPES = ["job.queued", "job.scheduled", "job.started", "job.retrying", "job.progress", "job.succeeded",
    "job.failed", "job.dead_lettered", "job.cancelled", "job.expired"];
  const CANCELLABLE = new Set(["QUEUED", "SCHEDULED", "RETRYING"]);
  const RETRYABLE = new Set(["FAILED", "CANCELLED", "EXPIRED"]);
  const ROLE_PROBE_QUEUE = "offpath-console-role-check";
  const TOKEN_KEY = "offpath.console.token";
  const ROLE_KEY = "offpath.console.role";
  const SVG_NS = "http://www.w3.org/2000/svg";
  const COLORS = ["#1f4e79", "#b42318", "#1a7f37", "#9a6700", "#6639ba", "#0b7285"];

  // -- DOM ------------------------------------------------------------------------------------

  function h(tag, props, ...children) {
    const el = document.createElement(tag);
    setProps(el, props);
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : String(child));
    }
    return el;
  }

  function svg(tag, props, ...children) {
    const el = document.createElementNS(SVG_NS, tag);
    setProps(el, props);
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : String(child));
    }
    return el;
  }

  function setProps(el, props) {
    for (const [key, value] of Object.entries(props || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "on") {
        for (const [event, handler] of Object.entries(value)) el.addEventListener(event, handler);
      } else if (/^on/i.test(key)) {
        throw new Error("event handlers are added with `on`, never as attributes");
      } else if (key === "class") {
        el.setAttribute("class", value);
      } else {
        el.setAttribute(key, value === true ? "" : String(value));
      }
    }
  }

  function link(path, ...children) {
    return h("a", { href: ROOT + path, "data-nav": true }, ...children);
  }

  function seg(value) {
    return encodeURIComponent(String(value));
  }

  function badge(state) {
    const known = /^[A-Z_]+$/.test(String(state)) ? String(state) : "";
    return h("span", { class: `badge ${known}` }, String(state));
  }

  function table(headers, rows, empty) {
    const head = h("tr", null, headers.map((c) => h("th", { class: c.cls || null, scope: "col" }, c.label)));
    const body = rows.length
      ? rows.map((cells) => h("tr", null, cells.map((cell, i) =>
        h("td", { class: headers[i].cls || null, "data-label": headers[i].label || null }, cell))))
      : [h("tr", null, h("td", { class: "empty", colspan: headers.length }, empty || "Nothing here."))];
    return h("div", { class: "table-wrap" }, h("table", null, h("thead", null, head), h("tbody", null, body)));
  }

  // A destructive action asks first, naming what will happen (and to how many jobs). The browser's own dialog:
  // modal, keyboard-reachable, and nothing runs until the person answers.
  function ask(text) {
    return window.confirm(text);
  }

  // Trouble first: alarms in ALARM, then those without data, then the rest; by name within each.
  const ALARM_ORDER = { ALARM: 0, INSUFFICIENT_DATA: 1 };
  function troubleFirst(alarms) {
    return [...alarms].sort((a, b) => ((ALARM_ORDER[a.state] ?? 2) - (ALARM_ORDER[b.state] ?? 2)) || String(a.name).localeCompare(String(b.name)));
  }

  function when(iso) {
    if (!iso) return "-";
    const date = new Date(iso);
    if (Number.isNaN(date.getTime())) return String(iso);
    const pad = (n) => String(n).padStart(2, "0");
    const text = `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ` +
      `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
    return h("time", { datetime: String(iso), title: String(iso) }, text);
  }

  function seconds(value) {
    if (value === null || value === undefined) return "-";
    const s = Number(value);
    if (s === 0) return "0 s";
    if (s < 1) return `${Math.round(s * 1000)} ms`;
    if (s < 120) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
    if (s < 7200) return `${Math.round(s / 60)} min`;
    return `${(s / 3600).toFixed(1)} h`;
  }

  function json(value) {
    return h("pre", { class: "data mono" }, JSON.stringify(value, null, 2));
  }

  function errorBox(answer) {
    return h("div", { class: "error", role: "alert" }, describe(answer));
  }

  function describe(answer) {
    if (!answer) return "no answer";
    const body = answer.body;
    if (body && typeof body === "object" && body.error && typeof body.error === "object") {
      return `${answer.status} ${body.error.code || "error"}: ${body.error.message || ""}`;
    }
    if (body && typeof body === "object" && body.message) return `${answer.status} ${body.message}`;
    if (answer.status === 0) return `cannot reach the API: ${body}`;
    return `${answer.status} ${typeof body === "string" ? body.slice(0, 300) : ""}`;
  }

  // -- the API ----------------------------------------------------------------------------------

  const session = {
    token: null,
    role: null, // "admin" or "tenant"
    features: { retry: false, stats: false, alarms: false, webhooks: false, discard: false, bulk: false },

    load() {
      const match = /(?:^#|&)token=([^&]*)/.exec(location.hash);
      if (match) {
        this.signIn(decodeURIComponent(match[1]));
        history.replaceState(history.state, "", location.pathname + location.search);
      }
      this.token = sessionStorage.getItem(TOKEN_KEY);
      this.role = sessionStorage.getItem(ROLE_KEY);
    },

    signIn(token) {
      sessionStorage.setItem(TOKEN_KEY, token.trim());
      sessionStorage.removeItem(ROLE_KEY);
      this.token = token.trim();
      this.role = null;
    },

    signOut() {
      sessionStorage.removeItem(TOKEN_KEY);
      sessionStorage.removeItem(ROLE_KEY);
      this.token = null;
      this.role = null;
    },

    get admin() {
      return this.role === "admin";
    },
  };

  async function api(method, path, { query, body } = {}) {
    let url = API + path;
    if (query) {
      const params = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) if (v !== null && v !== undefined && v !== "") params.set(k, v);
      const text = params.toString();
      if (text) url += "?" + text;
    }
    const headers = { Accept: "application/json" };
    if (session.token) headers.Authorization = `Bearer ${session.token}`;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let response;
    try {
      response = await fetch(url, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        credentials: "omit",
        cache: "no-store",
        redirect: "error",
      });
    } catch (error) {
      return { status: 0, ok: false, body: String(error && error.message ? error.message : error) };
    }
    const text = await response.text();
    let parsed = text;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch (_) {
      parsed = text;
    }
    if (response.status === 401 && session.token) {
      session.signOut();
      app.showSignIn("The token was not accepted (401). Sign in again.");
    }
    return { status: response.status, ok: response.ok, body: parsed };
  }

  async function discover() {
    const doc = await api("GET", "/openapi.json");
    const paths = doc.ok && doc.body && typeof doc.body.paths === "object" ? doc.body.paths : {};
    const has = (pattern, method) => Object.entries(paths).some(([p, ops]) => pattern.test(p) && ops && ops[method]);
    session.features = {
      retry: has(/^\/jobs\/\{[^}/]+\}\/retry$/, "post"),
      stats: has(/^\/stats$/, "get"),
      alarms: has(/^\/alarms$/, "get"),
      webhooks: has(/^\/webhooks$/, "get"),
      discard: has(/^\/queues\/\{[^}/]+\}\/dead-letters\/\{[^}/]+\}$/, "delete"),
      bulk: has(/^\/jobs\/bulk$/, "post"),
    };
    if (!session.role) {
      // Admin routes answer 403 to tenants before anything else: GET /stats?minutes=1 reads one minute.
      // (An API without it: a redrive of a queue that does not exist, a 404 with nothing done to an admin.)
      const probe = session.features.stats
        ? await api("GET", "/stats", { query: { minutes: "1" } })
        : await api("POST", `/queues/${seg(ROLE_PROBE_QUEUE)}/redrive`);
      if (probe.status === 401 || probe.status === 0) return probe;
      session.role = probe.status === 403 ? "tenant" : "admin";
      sessionStorage.setItem(ROLE_KEY, session.role);
    }
    return doc;
  }

  // -- charts (SVG) ----------------------------------------------------------------------------

  // series: [{name, points: [[x, y], ...]}]; x in epoch ms.
  function lineChart(series, { label, height = 200, bars = false, width = 720 } = {}) {
    const pad = { left: 44, right: 12, top: 10, bottom: 24 };
    const all = series.flatMap((s) => s.points);
    const xs = all.map((p) => p[0]);
    // Every chart counts (jobs, messages): a top rounded up to an even number keeps its three ticks whole.
    const ymax = Math.max(2, Math.ceil(Math.max(0, ...all.map((p) => p[1])) / 2) * 2);
    const x0 = xs.length ? Math.min(...xs) : Date.now() - 60000;
    const x1 = xs.length ? Math.max(...xs, x0 + 1000) : Date.now();
    const sx = (x) => pad.left + ((x - x0) / (x1 - x0 || 1)) * (width - pad.left - pad.right);
    const sy = (y) => height - pad.bottom - (y / ymax) * (height - pad.top - pad.bottom);
    const parts = [];
    for (const frac of [0, 0.5, 1]) {
      const y = sy(ymax * frac);
      parts.push(svg("line", { class: "grid", x1: pad.left, x2: width - pad.right, y1: y, y2: y }));
      parts.push(svg("text", { x: pad.left - 6, y: y + 4, "text-anchor": "end" }, formatCount(ymax * frac)));
    }
    parts.push(svg("line", { class: "axis", x1: pad.left, x2: width - pad.right, y1: sy(0), y2: sy(0) }));
    parts.push(svg("text", { x: pad.left, y: height - 6 }, clock(x0)));
    parts.push(svg("text", { x: width - pad.right, y: height - 6, "text-anchor": "end" }, clock(x1)));
    // Bars: one slot per time the series have a point, the bars of a time side by side inside its slot: every bar
    // stays within the plot, the first and the last too.
    const times = [...new Set(xs)].sort((a, b) => a - b);
    const slotOf = new Map(times.map((x, k) => [x, k]));
    const slot = (width - pad.left - pad.right) / Math.max(1, times.length);
    const w = Math.max(2, Math.min(40, (slot * 0.8) / series.length - 1));
    series.forEach((s, i) => {
      const color = COLORS[i % COLORS.length];
      if (bars) {
        for (const [x, y] of s.points) {
          const top = sy(y);
          const centre = pad.left + slot * (slotOf.get(x) + 0.5);
          parts.push(svg("rect", {
            x: centre - (series.length * (w + 1)) / 2 + i * (w + 1), y: top, width: w, height: sy(0) - top, fill: color,
          }, svg("title", null, `${s.name} ${clock(x)}: ${y}`)));
        }
      } else if (s.points.length > 1) {
        const d = s.points.map(([x, y], j) => `${j ? "L" : "M"}${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join(" ");
        parts.push(svg("path", { d, fill: "none", stroke: color, "stroke-width": 2 }));
      } else if (s.points.length === 1) {
        const [[x, y]] = s.points;
        parts.push(svg("circle", { cx: sx(x), cy: sy(y), r: 3, fill: color }));
      }
    });
    const chart = svg("svg", {
      class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": label || "chart",
    }, parts);
    const legend = h("div", { class: "legend" }, series.map((s, i) =>
      h("span", null, h("span", { class: "swatch", "data-color": i }), s.name)));
    // Colours of the swatches are set as properties, not from a style attribute (the CSP allows none).
    legend.querySelectorAll(".swatch").forEach((el) => { el.style.background = COLORS[Number(el.dataset.color) % COLORS.length]; });
    return h("figure", { class: "figure" }, chart, legend);
  }

  // Drawn at the width it is shown at, so its text keeps its size on a phone.
  function chartWidth(el) {
    return Math.max(300, Math.min(1200, (el && el.clientWidth) || (document.getElementById("main").clientWidth - 32) || 720));
  }

  function formatCount(value) {
    return String(Math.round(value));
  }

  function clock(ms) {
    const d = new Date(ms);
    return `${String(d.getHours()).padStart(2, "0")}:${String(d.getMinutes()).padStart(2, "0")}:${String(d.getSeconds()).padStart(2, "0")}`;
  }

  // Queue depths seen by this page while it is open (kept across page changes, up to 20 minutes).
  // The queues' depths measured by this tab, the last 20 minutes, kept in the tab (sessionStorage) so a reload
  // or a return to the overview draws them at once.
  const DEPTH_KEY = "offpath.console.depth";
  const depthHistory = { points: [], loaded: false, add(queues) {
    const now = Date.now();
    if (!this.loaded) {
      this.loaded = true;
      try {
        const kept = JSON.parse(sessionStorage.getItem(DEPTH_KEY) || "[]");
        if (Array.isArray(kept)) this.points = kept.filter((p) => p && typeof p.at === "number" && Array.isArray(p.queues));
      } catch (_) {
        this.points = [];
      }
    }
    this.points.push({ at: now, queues: queues.map((q) => ({ name: q.name, waiting: q.visible + q.delayed, in_flight: q.in_flight, dlq: q.dlq_depth })) });
    while (this.points.length && this.points[0].at < now - 20 * 60 * 1000) this.points.shift();
    try {
      sessionStorage.setItem(DEPTH_KEY, JSON.stringify(this.points));
    } catch (_) { /* storage full or refused: the history lives as long as the page */ }
  } };

  // -- pages -----------------------------------------------------------------------------------
  //
  // A page is a function (params, query) -> {title, admin?, node, refresh: async () => void}. `refresh`
  // fills the page's data regions; the app calls it at once and then every REFRESH_MS.

  function region() {
    const el = h("div", { class: "region" });
    let last = null;
    // Redraws only when what it shows changed, so focus and scroll stay put between refreshes.
    el.show = (key, build) => {
      const signature = JSON.stringify(key);
      if (signature === last) return;
      last = signature;
      el.replaceChildren(build());
    };
    return el;
  }

  // A paused queue class or job type: since when, and why (its jobs wait, unrun).
  function pausedCell(view) {
    if (!view.paused) return "-";
    return h("span", { class: "paused" }, `paused since ${when(view.paused_at)}${view.pause_reason ? ` (${view.pause_reason})` : ""}`);
  }

  // Pause or resume a queue class ("queue") or a job type ("job_type"), after a question naming what happens and
  // to how many jobs; `waiting`: the jobs that wait (a number), or a function that counts them when asked.
  function pauseButton(kind, name, paused, waiting, message, refresh) {
    const what = kind === "queue" ? `queue ${name}` : `job type ${name}`;
    const path = kind === "queue" ? `/queues/${seg(name)}` : `/job-types/${seg(name)}`;
    const button = h("button", { type: "button", class: paused ? "" : "danger", "aria-label": `${paused ? "Resume" : "Pause"} ${what}`, on: { click: async () => {
      const count = typeof waiting === "function" ? await waiting() : waiting;
      const jobs = `${count} waiting job${count === 1 ? "" : "s"}`;
      const text = paused
        ? `Resume ${what}? Its ${jobs} start running.`
        : `Pause ${what}? Its ${jobs} and every new one stay queued, unrun, until it is resumed; no attempt is spent `
          + "and schedules keep adding jobs.";
      if (!ask(text)) return;
      button.disabled = true;
      const answer = await api("POST", `${path}/${paused ? "resume" : "pause"}`);
      message.replaceChildren(answer.ok
        ? h("div", { class: "notice" }, `${paused ? "Resumed" : "Paused"} ${what}.`)
        : errorBox(answer));
      await refresh();
    } } }, paused ? "Resume" : "Pause");
    return button;
  }

  function queuesTable(queues, toggle) {
    return table(
      [
        { label: "Queue" },
        { label: "Visible", cls: "num" },
        { label: "In flight", cls: "num" },
        { label: "Delayed", cls: "num" },
        { label: "Oldest", cls: "num" },
        { label: "DLQ", cls: "num" },
        { label: "Last redrive" },
        { label: "Paused" },
        ...(toggle ? [{ label: "Pause" }] : []),
      ],
      queues.map((q) => [
        link(`/queues/${seg(q.name)}`, q.name),
        q.visible, q.in_flight, q.delayed, seconds(q.oldest_age_s),
        q.dlq_depth ? h("span", { class: "trouble" }, String(q.dlq_depth)) : q.dlq_depth,
        q.redrive ? `${q.redrive.status}${q.redrive.moved !== null && q.redrive.moved !== undefined ? `, ${q.redrive.moved} moved` : ""}` : "-",
        pausedCell(q),
        ...(toggle ? [toggle(q)] : []),
      ]),
      "No queues.",
    );
  }
  function overviewPage() {
    const queues = region();
    const depth = region();
    const stats = region();
    const alarms = region();
    const trouble = region();
    const node = h("section", null,
      h("h1", null, "Overview"),
      trouble,
      h("h2", null, "Queues"), queues,
      h("h2", null, "Messages waiting"), depth,
      h("h2", null, "Jobs per minute, last hour"), stats,
      h("h2", null, "Alarms"), alarms,
    );
    async function refresh() {
      let answer = await api("GET", "/queues");
      if (answer.ok && depthHistory.points.length === 0) {
        // A first look: measure twice, so the chart draws lines at once rather than a dot a series.
        depthHistory.add(answer.body.queues || []);
        await new Promise((resolve) => setTimeout(resolve, FIRST_DEPTH_GAP_MS));
        answer = await api("GET", "/queues");
      }
      if (!answer.ok) {
        queues.show(["error", answer.status], () => errorBox(answer));
      } else {
        const list = answer.body.queues || [];
        depthHistory.add(list);
        queues.show(list, () => queuesTable(list));
        const names = list.map((q) => q.name);
        const series = names.flatMap((name) => [
          { name: `${name} waiting`, points: depthHistory.points.map((p) => [p.at, (p.queues.find((q) => q.name === name) || {}).waiting || 0]) },
          { name: `${name} DLQ`, points: depthHistory.points.map((p) => [p.at, (p.queues.find((q) => q.name === name) || {}).dlq || 0]) },
        ]);
        depth.show([depthHistory.points.length, list, chartWidth(depth)], () => h("div", null,
          lineChart(series, { label: "messages waiting and in the DLQ per queue", width: chartWidth(depth) }),
          h("p", { class: "note" }, "Visible and delayed messages, and DLQ depth, measured while this page is open."),
        ));
      }
      if (session.features.stats) {
        const s = await latestStats();
        stats.show([s.ok ? s.body : ["error", s.status], chartWidth(stats)], () => (s.ok ? statsView(s.body) : errorBox(s)));
      } else {
        stats.show("absent", () => h("p", { class: "note" },
          "Per-minute throughput and percentiles come from the API's GET /stats, which this API does not serve yet."));
      }
      if (session.features.alarms) {
        const a = await latestAlarms();
        // The overview lists the alarms that are not OK; the Alarms page lists them all.
        const listed = a.ok ? (a.body.alarms || []) : [];
        const calm = listed.filter((x) => x.state === "OK").length;
        alarms.show(a.ok ? a.body : ["error", a.status], () => (a.ok ? h("div", null,
          listed.length > calm ? alarmsTable(listed.filter((x) => x.state !== "OK")) : null,
          h("p", { class: "note" }, `${calm} of ${listed.length} alarms OK. `, link("/alarms", "All alarms"))) : errorBox(a)));
        const firing = a.ok ? (a.body.alarms || []).filter((x) => x.state === "ALARM") : [];
        trouble.show(firing, () => (firing.length ? h("div", { class: "trouble-box", role: "alert" },
          h("h2", null, `${firing.length} alarm${firing.length === 1 ? "" : "s"} in ALARM`),
          h("ul", null, troubleFirst(firing).map((x) => h("li", null, badge(x.state), " ", h("strong", { class: "wrap" }, x.name),
            x.reason ? h("span", { class: "note wrap" }, ` ${x.reason}`) : null))),
          link("/alarms", "All alarms and their changes")) : h("div")));
      } else {
        alarms.show("absent", () => h("p", { class: "note" }, "Alarm states come from the API's GET /alarms, which this API does not serve yet."));
      }
    }
    return { title: "Overview", admin: true, node, refresh };
  }

  // Answers kept for a while: on AWS GET /stats is billed per metric asked and GET /alarms reads each
  // alarm's history; their data changes once a minute (statistics) or on an alarm's evaluation.
  const kept = new Map();
  async function keptAnswer(path, query, ms) {
    const key = path + JSON.stringify(query || {});
    const last = kept.get(key);
    if (last && Date.now() - last.at < ms) return last.answer;
    const answer = await api("GET", path, { query });
    kept.set(key, { at: Date.now(), answer });
    return answer;
  }

  function latestStats() {
    return keptAnswer("/stats", { minutes: "60" }, STATS_REFRESH_MS);
  }

  function latestAlarms() {
    return keptAnswer("/alarms", null, ALARMS_REFRESH_MS);
  }

  const COUNTS = ["submitted", "succeeded", "failed", "retried", "dead_lettered", "expired"];

  // GET /stats: {start, end, minutes: [{minute, queue, job_type, submitted, succeeded, failed, retried,
  // dead_lettered, expired, duration_p50_s, duration_p95_s, queue_wait_p50_s, queue_wait_p95_s}]}
  function statsView(body) {
    const rows = Array.isArray(body && body.minutes) ? body.minutes : [];
    const perMinute = new Map();
    const totals = new Map();
    for (const r of rows) {
      const at = typeof r.minute === "number" ? r.minute * 1000 : Date.parse(r.minute);
      const m = perMinute.get(at) || Object.fromEntries(COUNTS.map((c) => [c, 0]));
      const key = `${r.queue}\u0000${r.job_type}`;
      const t = totals.get(key) || { queue: r.queue, job_type: r.job_type, ...Object.fromEntries(COUNTS.map((c) => [c, 0])) };
      for (const c of COUNTS) {
        m[c] += Number(r[c] || 0);
        t[c] += Number(r[c] || 0);
      }
      perMinute.set(at, m);
      totals.set(key, t);
    }
    const minutes = [...perMinute.keys()].sort((a, b) => a - b);
    const chart = lineChart(["succeeded", "failed", "dead_lettered"].map((c) => (
      { name: c.replace("_", "-"), points: minutes.map((m) => [m, perMinute.get(m)[c]]) })),
    { label: "jobs succeeded, failed and dead-lettered per minute", bars: true, width: chartWidth(null) });
    const flow = lineChart(["submitted", "retried"].map((c) => (
      { name: c, points: minutes.map((m) => [m, perMinute.get(m)[c]]) })),
    { label: "jobs submitted and retried per minute", width: chartWidth(null) });
    const sums = table(
      [{ label: "Queue" }, { label: "Job type" }, ...COUNTS.map((c) => ({ label: c.replace("_", "-"), cls: "num" }))],
      [...totals.values()].filter((t) => COUNTS.some((c) => t[c])).map((t) => [t.queue, typeName(t.job_type), ...COUNTS.map((c) => t[c])]),
      "No jobs counted in the last hour.",
    );
    const latest = new Map();
    for (const r of rows) if (r.duration_p50_s !== null || r.queue_wait_p50_s !== null) latest.set(`${r.queue}\u0000${r.job_type}`, r);
    const pct = table(
      [{ label: "Queue" }, { label: "Job type" }, { label: "Run p50", cls: "num" }, { label: "Run p95", cls: "num" },
        { label: "Wait p50", cls: "num" }, { label: "Wait p95", cls: "num" }],
      [...latest.values()].map((r) => [r.queue, typeName(r.job_type), seconds(r.duration_p50_s), seconds(r.duration_p95_s),
        seconds(r.queue_wait_p50_s), seconds(r.queue_wait_p95_s)]),
      "No jobs ran in the last hour.",
    );
    return h("div", { class: "stats" }, chart, flow,
      h("h2", null, "Last hour per job type"), sums,
      h("h2", null, "Run time and queue wait (latest minute per job type)"), pct,
      h("p", { class: "note" }, "From GET /stats, asked once a minute."));
  }

  function alarmsTable(list) {
    const sorted = troubleFirst(list);
    const drawn = table(
      [{ label: "Alarm" }, { label: "State" }, { label: "Since" }, { label: "Reason" }],
      sorted.map((a) => [h("span", { class: "wrap" }, a.name), badge(a.state), when(a.updated_at || a.since), h("span", { class: "wrap" }, a.reason || "")]),
      "No alarms.",
    );
    drawn.querySelectorAll("tbody tr").forEach((tr, i) => {
      if (sorted[i] && sorted[i].state === "ALARM") tr.classList.add("firing");
    });
    return drawn;
  }

  function alarmsPage() {
    const body = region();
    const node = h("section", null, h("h1", null, "Alarms"), body);
    async function refresh() {
      if (!session.features.alarms) {
        body.show("absent", () => h("p", { class: "note" }, "Alarm states come from the API's GET /alarms, which this API does not serve yet."));
        return;
      }
      const a = await latestAlarms();
      body.show(a.ok ? a.body : ["error", a.status], () => (a.ok ? h("div", null,
        alarmsTable(a.body.alarms || []),
        h("h2", null, "Recent changes"),
        table([{ label: "When" }, { label: "Alarm" }, { label: "From" }, { label: "To" }, { label: "Reason" }],
          (a.body.changes || []).map((c) => [when(c.time), c.alarm, badge(c.old_state), badge(c.new_state), c.reason || ""]),
          "No changes yet."),
      ) : errorBox(a)));
    }
    return { title: "Alarms", admin: true, node, refresh };
  }

  // A job type's name (up to 63 characters, no spaces): wraps anywhere, its whole name as its title.
  function typeName(name) {
    return h("span", { class: "type-name", title: String(name) }, String(name));
  }

  function jobsTable(jobs) {
    return table(
      [{ label: "Job" }, { label: "Type" }, { label: "Status" }, { label: "Attempts", cls: "num" },
        { label: "Created" }, { label: "Finished", cls: "hide-narrow" }],
      jobs.map((j) => [
        link(`/jobs/${seg(j.job_id)}`, h("span", { class: "mono" }, j.job_id)),
        typeName(j.type), badge(j.status), `${j.attempts}/${j.max_attempts}`,
        when(j.created_at), h("span", { class: "hide-narrow" }, when(j.finished_at)),
      ]),
      "No jobs match.",
    );
  }

  function jobsPage(params, query) {
    const status = query.get("status") || "";
    const type = query.get("type") || "";
    const tag = (query.get("tag") || "").trim();
    const owner = session.admin && query.get("tenant") === SYSTEM_TENANT ? SYSTEM_TENANT : "";
    const q = (query.get("q") || "").trim();
    const list = region();
    const cursors = [null]; // the cursor of each page shown so far
    let page = 0;
    const statusSelect = h("select", { name: "status", id: "filter-status" },
      h("option", { value: "" }, "any"), STATES.map((s) => h("option", { value: s, selected: s === status }, s)));
    const typeInput = h("input", { name: "type", id: "filter-type", value: type, list: "job-types", autocomplete: "off", placeholder: "e.g. demo.echo" });
    const search = h("input", { name: "q", id: "filter-q", value: q, type: "search", placeholder: "job id or idempotency key", autocomplete: "off" });
    const tagInput = h("input", { name: "tag", id: "filter-tag", value: tag, autocomplete: "off", placeholder: "key:value" });
    const types = h("datalist", { id: "job-types" });
    const ownerSelect = session.admin ? h("select", { name: "tenant", id: "filter-tenant" },
      h("option", { value: "" }, "mine"),
      h("option", { value: SYSTEM_TENANT, selected: owner === SYSTEM_TENANT }, "schedules' (system)")) : null;
    const form = h("form", { class: "filters", role: "search", on: { submit: (event) => {
      event.preventDefault();
      const next = new URLSearchParams();
      if (ownerSelect && ownerSelect.value) next.set("tenant", ownerSelect.value);
      if (statusSelect.value) next.set("status", statusSelect.value);
      if (typeInput.value.trim()) next.set("type", typeInput.value.trim());
      if (tagInput.value.trim()) next.set("tag", tagInput.value.trim());
      if (search.value.trim()) next.set("q", search.value.trim());
      app.go(`/jobs${next.toString() ? "?" + next : ""}`);
    } } },
    h("label", { class: "grow" }, "Search", search),
    h("label", null, "State", statusSelect),
    h("label", null, "Type", typeInput),
    h("label", null, "Tag", tagInput),
    ownerSelect ? h("label", null, "Jobs", ownerSelect) : null,
    types,
    h("button", { type: "submit" }, "Apply"));
    const older = h("button", { type: "button", class: "secondary", disabled: true, on: { click: () => { page += 1; refresh(); } } }, "Older");
    const newer = h("button", { type: "button", class: "secondary", disabled: true, on: { click: () => { page = Math.max(0, page - 1); refresh(); } } }, "Newer");
    const where = h("span", { class: "note" });
    const bulk = session.features.bulk && !q ? bulkPanel({ status, type, tag, tenant: owner }) : null;
    const node = h("section", null, h("h1", null, owner ? "Jobs of schedules" : "Jobs"), form,
      bulk ? bulk.node : null, list, h("div", { class: "pager" }, newer, older, where));
    const seenTypes = new Set();

    async function refresh() {
      if (q) return refreshSearch();
      const answer = await api("GET", "/jobs", { query: { status, type, tag, tenant: owner, limit: "20", cursor: cursors[page] } });
      if (!answer.ok) {
        list.show(["error", answer.status], () => errorBox(answer));
        return;
      }
      const jobs = answer.body.jobs || [];
      cursors[page + 1] = answer.body.cursor || null;
      older.disabled = !answer.body.cursor;
      newer.disabled = page === 0;
      where.textContent = `page ${page + 1}`;
      for (const j of jobs) {
        if (!seenTypes.has(j.type)) {
          seenTypes.add(j.type);
          types.append(h("option", { value: j.type }));
        }
      }
      list.show([page, jobs], () => jobsTable(jobs));
    }

    // A job id is looked up; anything else is an idempotency key, looked for in the newest jobs.
    async function refreshSearch() {
      older.hidden = newer.hidden = true;
      if (/^[0-9a-f]{32}$/.test(q)) {
        const one = await api("GET", `/jobs/${seg(q)}`);
        if (one.ok) {
          list.show(["id", one.body], () => jobsTable([one.body]));
          return;
        }
      }
      const found = [];
      let cursor = null;
      let scanned = 0;
      for (let i = 0; i < 10; i += 1) {
        const answer = await api("GET", "/jobs", { query: { status, type, tenant: owner, limit: "100", cursor } });
        if (!answer.ok) {
          list.show(["error", answer.status], () => errorBox(answer));
          return;
        }
        const jobs = answer.body.jobs || [];
        scanned += jobs.length;
        found.push(...jobs.filter((j) => j.idempotency_key === q || j.job_id === q));
        cursor = answer.body.cursor;
        if (!cursor) break;
      }
      list.show(["key", found, scanned], () => h("div", null,
        h("p", { class: "note" }, `Jobs whose id or idempotency key is the search text, among the newest ${scanned}.`),
        jobsTable(found)));
    }
    return { title: owner ? "Jobs of schedules" : "Jobs", node, refresh };
  }

  // -- bulk actions ----------------------------------------------------------------------------
  //
  // "Bulk…" on the jobs list acts on every job the list's current filter matches: a preview first (POST
  // /jobs/bulk with dry_run: how many match, and the newest of them), then the question naming the action and
  // the count, then the operation's own page, which follows its progress.

  const BULK_ACTIONS = { retry: "Retry", cancel: "Cancel" };

  function filterText(filter) {
    const parts = [];
    if (filter.tenant) parts.push(`jobs of ${filter.tenant}`);
    if (filter.status) parts.push(`state ${filter.status}`);
    if (filter.type) parts.push(`type ${filter.type}`);
    if (filter.tag) parts.push(`tag ${filter.tag}`);
    return parts.length ? parts.join(", ") : "all your jobs";
  }

  function bulkPanel(listFilter) {
    const filter = {};
    for (const [k, v] of Object.entries(listFilter)) if (v) filter[k] = v;
    const panel = h("div", { class: "bulk-panel", id: "bulk-panel", hidden: true });
    const open = h("button", { type: "button", class: "secondary", id: "bulk-open", on: { click: () => {
      panel.hidden = !panel.hidden;
      if (!panel.hidden) actionSelect.focus();
    } } }, "Bulk\u2026");
    const actionSelect = h("select", { id: "bulk-action", name: "action" },
      Object.entries(BULK_ACTIONS).map(([value, label]) => h("option", { value }, label)));
    const preview = h("div", { id: "bulk-preview", role: "status", "aria-live": "polite" });
    const previewButton = h("button", { type: "button", id: "bulk-preview-button", on: { click: () => show() } }, "Preview");

    async function show() {
      const action = actionSelect.value;
      preview.replaceChildren(h("p", { class: "note" }, "Counting\u2026"));
      const answer = await api("POST", "/jobs/bulk", { body: { action, filter, dry_run: true } });
      if (!answer.ok) {
        preview.replaceChildren(errorBox(answer));
        return;
      }
      const found = answer.body;
      const count = found.exact ? `${found.count}` : `at least ${found.count}`;
      const label = BULK_ACTIONS[action];
      const run = h("button", { type: "button", id: "bulk-run", disabled: found.count === 0, on: { click: async () => {
        const more = found.exact ? "" : ` (one operation acts on at most ${found.limit})`;
        if (!ask(`${label} ${count} job${found.count === 1 ? "" : "s"} (${filterText(filter)})${more}? `
          + (action === "retry" ? "Each runs again with a fresh attempt budget; its dead letter leaves the DLQ."
            : "Those not started yet never run; the others are skipped."))) return;
        run.disabled = true;
        const started = await api("POST", "/jobs/bulk", { body: { action, filter } });
        if (!started.ok) {
          run.disabled = false;
          preview.append(errorBox(started));
          return;
        }
        app.go(`/bulk/${seg(started.body.operation_id)}`);
      } } }, `${label} ${count} job${found.count === 1 ? "" : "s"}`);
      preview.replaceChildren(
        h("p", { id: "bulk-count" }, `${count} job${found.count === 1 ? "" : "s"} match (${filterText(filter)}).`),
        found.sample.length ? table(
          [{ label: "Job" }, { label: "Type" }, { label: "Status" }, { label: "Created" }],
          found.sample.map((j) => [link(`/jobs/${seg(j.job_id)}`, h("span", { class: "mono" }, j.job_id)),
            h("span", { class: "wrap" }, j.type), badge(j.status), when(j.created_at)]),
        ) : null,
        found.count > found.sample.length ? h("p", { class: "note" }, `The newest ${found.sample.length} of them.`) : null,
        h("div", { class: "actions" }, run),
      );
    }

    panel.append(
      h("p", { class: "note" }, `Act on every job this list's filter matches: ${filterText(filter)}.`),
      h("div", { class: "filters" }, h("label", null, "Action", actionSelect), previewButton),
      preview,
    );
    return { node: h("div", { class: "bulk" }, open, panel) };
  }

  function bulkPage(params) {
    const id = params[0];
    const body = region();
    const node = h("section", null, h("h1", null, "Bulk operation ", h("span", { class: "mono" }, id)), body);
    let over = false;

    async function refresh() {
      if (over) return;
      const answer = await api("GET", `/jobs/bulk/${seg(id)}`);
      if (!answer.ok) {
        body.show(["error", answer.status], () => errorBox(answer));
        return;
      }
      const op = answer.body;
      over = op.status !== "running";
      body.show(op, () => bulkView(op));
    }
    return { title: `Bulk operation ${id}`, node, refresh };
  }

  function bulkView(op) {
    const handled = op.done + op.skipped + op.failed;
    const reasons = Object.entries(op.skipped_reasons || {});
    const back = new URLSearchParams();
    for (const key of ["status", "type", "tag"]) if (op.filter[key]) back.set(key, op.filter[key]);
    if (op.filter.tenant === SYSTEM_TENANT) back.set("tenant", SYSTEM_TENANT);
    return h("div", null,
      h("dl", { class: "fields" },
        h("dt", null, "Action"), h("dd", null, BULK_ACTIONS[op.action] || op.action),
        h("dt", null, "Filter"), h("dd", null, filterText(op.filter)),
        h("dt", null, "Status"), h("dd", { id: "bulk-status" }, badge(op.status.toUpperCase())),
        h("dt", null, "Matched"), h("dd", { id: "bulk-matched" }, String(op.matched)),
        h("dt", null, "Done"), h("dd", { id: "bulk-done" }, String(op.done)),
        h("dt", null, "Skipped"), h("dd", { id: "bulk-skipped" }, String(op.skipped),
          reasons.length ? h("ul", null, reasons.map(([reason, n]) => h("li", null, `${n}: ${reason}`))) : null),
        h("dt", null, "Failed"), h("dd", { id: "bulk-failed" }, String(op.failed),
          op.failures.length ? h("ul", null, op.failures.map((f) => h("li", null,
            link(`/jobs/${seg(f.job_id)}`, h("span", { class: "mono" }, f.job_id)), `: ${f.error}`))) : null),
        h("dt", null, "Started"), h("dd", null, when(op.created_at)),
        h("dt", null, "Finished"), h("dd", null, when(op.finished_at)),
        op.stop_reason ? [h("dt", null, "Stopped"), h("dd", { class: "disabled-reason" }, op.stop_reason)] : null,
        op.limit_reached ? [h("dt", null, "Limit"), h("dd", null, `stopped at ${op.limit} jobs; run it again for the rest`)] : null,
      ),
      op.status === "running"
        ? h("progress", { max: Math.max(op.matched, 1), value: handled, "aria-label": "jobs handled" })
        : null,
      h("p", { class: "note" }, op.status === "running"
        ? "Counts grow a page of jobs at a time; this page follows them."
        : `${handled} of ${op.matched} matched jobs handled.`),
      h("p", null, link(`/jobs${back.toString() ? "?" + back : ""}`, "The jobs of this filter")),
    );
  }

  // A job's page reads the job once, then follows it with server-sent events (GET /jobs/{id}/events, the
  // embedded runtime's realtime feed) instead of asking again every REFRESH_MS; where the API has no such
  // feed (a deployed API behind `offpath console`), it asks again as before.
  function jobPage(params) {
    const id = params[0];
    const body = region();
    const message = h("div", { role: "status", "aria-live": "polite" });
    const live = h("p", { class: "note", id: "live" });
    const node = h("section", null, h("h1", null, "Job ", h("span", { class: "mono" }, id)), live, message, body);
    let final = false;
    let busy = false;
    let job = null;
    let source = null;
    let polling = false;

    function show(next) {
      job = next;
      final = FINAL.has(job.status) && !session.features.retry;
      body.show([job, session.features], () => jobView(job, act));
    }

    function close() {
      if (source) source.close();
      source = null;
      live.textContent = "";
    }

    function follow() {
      if (source || polling || typeof EventSource === "undefined") return;
      const url = `${API}/jobs/${seg(id)}/events?access_token=${encodeURIComponent(session.token)}`;
      const opened = new EventSource(url);
      source = opened;
      live.textContent = "Live: following the job's events.";
      const received = (event) => {
        const data = JSON.parse(event.data);
        if (job && data.job.updated_at < job.updated_at) return; // older than what the page shows
        // An event carries the job without its payload, nor why it waits (worked out when the job is read): the
        // page keeps what it read while the job is unchanged, and reads it again when the job changed to a state
        // that may wait.
        const same = job && data.job.updated_at === job.updated_at;
        show({ ...data.job, payload: job ? job.payload : data.job.payload, waiting_on: same ? job.waiting_on : null });
        if (!same && WAITS.has(data.job.status)) whyWaiting();
        if (FINAL.has(data.job.status) && event.type !== "job.failed") close();
      };
      for (const type of EVENT_TYPES) opened.addEventListener(type, received);
      opened.addEventListener("error", () => {
        if (opened.readyState !== EventSource.CLOSED || source !== opened) return;
        // Refused (404, or no such feed here): follow the job by asking, as before.
        close();
        if (!job || !FINAL.has(job.status)) polling = true;
      });
    }

    async function whyWaiting() {
      const answer = await api("GET", `/jobs/${seg(id)}`);
      if (answer.ok && job && answer.body.updated_at === job.updated_at) show({ ...job, waiting_on: answer.body.waiting_on });
    }

    async function act(label, method, path, question) {
      actionStarts(message);
      if (question && !ask(question)) return;
      busy = true;
      const answer = await api(method, path);
      actionDone();
      busy = false;
      message.replaceChildren(answer.ok ? h("div", { class: "notice" }, `${label}: ${answer.body.status || "done"}`) : errorBox(answer));
      final = false;
      close();
      job = null;
      await refresh();
    }

    async function refresh() {
      if (final || busy || source) return;
      if (job && !polling) return;
      const answer = await api("GET", `/jobs/${seg(id)}`);
      if (!answer.ok) {
        body.show(["error", answer.status], () => errorBox(answer));
        return;
      }
      show(answer.body);
      if (!FINAL.has(job.status)) follow();
    }
    return { title: `Job ${id}`, node, refresh, close };
  }

  const WAITS = new Set(["QUEUED", "RETRYING"]); // the states in which a due job may be held (waiting_on)
  const CHAIN_TEXT = { pending: "goes on when this job succeeds", continued: "went on to the next job", stopped: "stopped here (this job did not succeed)" };
  function jobView(job, act) {
    const id = seg(job.job_id);
    const actions = h("div", { class: "actions" });
    if (CANCELLABLE.has(job.status)) {
      actions.append(h("button", { type: "button", class: "danger", on: { click: () => act("Cancel", "POST", `/jobs/${id}/cancel`,
        `Cancel job ${job.job_id} (${job.type})? It will not run.`) } }, "Cancel"));
    }
    if (session.features.retry && RETRYABLE.has(job.status)) {
      const later = job.status === "CANCELLED" && job.run_at && new Date(job.run_at) > new Date();
      actions.append(h("button", { type: "button", on: { click: () => act("Retry", "POST", `/jobs/${id}/retry`,
        `Run job ${job.job_id} (${job.type}) again, with a fresh budget of ${job.max_attempts} attempts?` +
        (later ? ` It keeps its run_at (${job.run_at}).` : "")) } }, "Retry"));
    }
    const progress = job.progress
      ? h("div", { class: "progress" },
        h("progress", { max: "1", value: String(job.status === "SUCCEEDED" ? 1 : job.progress.fraction) }),
        `${Math.round((job.status === "SUCCEEDED" ? 1 : job.progress.fraction) * 100)}%`,
        job.progress.message ? ` ${job.progress.message}` : "")
      : null;
    const fields = [
      ["Status", badge(job.status)],
      ["Type", typeName(job.type)],
      ["Queue", session.admin ? link(`/queues/${seg(job.queue)}`, job.queue) : job.queue],
      ["Attempts", `${job.attempts} of ${job.max_attempts}`],
      ["Progress", progress],
      ["Idempotency key", job.idempotency_key ? h("span", { class: "mono" }, job.idempotency_key) : null],
      ["Run at", job.run_at ? when(job.run_at) : null],
      ["Expires at", job.expires_at ? when(job.expires_at) : null],
      ["Superseded by", job.superseded_by ? link(`/jobs/${seg(job.superseded_by)}`, h("span", { class: "mono" }, job.superseded_by)) : null],
      ["Created", when(job.created_at)],
      ["Started", job.started_at ? when(job.started_at) : null],
      ["Finished", job.finished_at ? when(job.finished_at) : null],
      ["Next attempt", job.next_attempt_at ? when(job.next_attempt_at) : null],
      ["Lease until", job.lease_until ? when(job.lease_until) : null],
      ["Redrives", job.redrives ? String(job.redrives) : null],
      ["Retried by hand", job.retries ? String(job.retries) : null],
      ["Tags", job.tags && Object.keys(job.tags).length ? h("span", { class: "tags" },
        Object.entries(job.tags).map(([k, v]) => link(`/jobs?tag=${encodeURIComponent(`${k}:${v}`)}`, h("span", { class: "tag mono" }, `${k}: ${v}`)))) : null],
      ["Trace", job.trace_id ? h("span", { class: "mono" }, job.trace_id) : null],
      ["Batch", job.batch_id ? link(`/batches/${seg(job.batch_id)}`, h("span", { class: "mono", id: "job-batch" }, job.batch_id)) : null],
      ["Callback of batch", job.callback_of ? link(`/batches/${seg(job.callback_of)}`, h("span", { class: "mono" }, job.callback_of)) : null],
      // Chains and jobs that submit jobs: the job that made this one, and the chain's next job.
      ["Parent job", job.parent_job_id ? link(`/jobs/${seg(job.parent_job_id)}`, h("span", { class: "mono", "data-link": "parent" }, job.parent_job_id)) : null],
      ["Next job", job.next_job_id ? link(`/jobs/${seg(job.next_job_id)}`, h("span", { class: "mono", "data-link": "next" }, job.next_job_id)) : null],
      ["Chain", job.chain ? h("span", { class: `chain chain-${job.chain}` }, CHAIN_TEXT[job.chain] || job.chain) : null],
    ].filter(([, v]) => v !== null && v !== undefined && v !== "");
    // Why a due job does not start: a pause, its type's rate limit, or its concurrency limit with the jobs holding
    // its key's slots.
    const holdup = job.waiting_on
      ? h("div", { class: "notice waiting", id: "job-waiting" }, `Waiting: ${job.waiting_on.message}`,
        (job.waiting_on.holders || []).length
          ? [" (running: ", job.waiting_on.holders.map((held, i) => [i ? ", " : "",
            link(`/jobs/${seg(held)}`, h("span", { class: "mono", "data-link": "holder" }, held))]), ")"]
          : null)
      : null;
    return h("div", null,
      actions,
      holdup,
      h("dl", { class: "fields" }, fields.map(([k, v]) => [h("dt", null, k), h("dd", null, v)])),
      h("h2", null, "Timeline"), timeline(job),
      job.error ? [h("h2", null, "Error"), h("pre", { class: "data mono error-text" }, job.error)] : null,
      job.result !== null && job.result !== undefined ? [h("h2", null, "Result"), json(job.result)] : null,
      job.payload !== undefined && job.payload !== null ? [h("h2", null, "Payload"), json(job.payload)] : null,
    );
  }

  // Submission, each attempt the job keeps (job.attempt_history: the last 10, across redrives and retries
  // by hand), then where it is now.
  const OUTCOME_TEXT = { SUCCEEDED: "succeeded", RETRYING: "failed, to be retried", FAILED: "failed", LEASE_EXPIRED: "lost its worker (lease expired)" };
  function timeline(job) {
    const items = [["Submitted", job.created_at, ""]];
    if (job.run_at) items.push([`Due (run_at)`, job.run_at, ""]);
    const history = Array.isArray(job.attempt_history) ? job.attempt_history : [];
    for (const a of history) {
      if (a.started_at) items.push([`Attempt ${a.attempt} started`, a.started_at, ""]);
      const text = OUTCOME_TEXT[a.outcome] || String(a.outcome || "ended");
      items.push([`Attempt ${a.attempt} ${text}${a.error ? ": " + attemptError(a.error) : ""}`, a.finished_at,
        a.outcome === "SUCCEEDED" ? "good" : "bad", a.error && a.error.traceback ? traceback(a.error.traceback) : null]);
    }
    if (job.status === "RUNNING") {
      items.push([`Attempt ${job.attempts} of ${job.max_attempts} running`, history.length ? null : job.started_at, ""]);
    } else if (!history.length && job.started_at) {
      items.push([`Attempt ${job.attempts} of ${job.max_attempts} started`, job.started_at, ""]);
    }
    if (job.status === "RETRYING" && job.next_attempt_at) {
      items.push([`Next attempt`, job.next_attempt_at, ""]);
    }
    if (job.redrives) items.push([`Redriven from the DLQ (${job.redrives}×)`, null, ""]);
    if (job.retries) {
      items.push([job.retries > 1 ? `Retried by hand (${job.retries}×, the last here)` : "Retried by hand", job.retried_at || null, ""]);
    }
    if (FINAL.has(job.status)) {
      const ended = job.status === "FAILED" && job.error ? `FAILED: ${job.error}`
        : job.status === "EXPIRED" ? "EXPIRED: not started by its expires_at; never ran"
          : job.cancel_reason === "superseded" ? "CANCELLED: superseded by a later submit under its debounce key"
            : job.status;
      items.push([ended, job.finished_at || job.updated_at,
        job.status === "SUCCEEDED" ? "good" : job.status === "FAILED" ? "bad" : ""]);
    } else {
      items.push([`Now ${job.status}`, job.updated_at, ""]);
    }
    return h("ol", { class: "timeline" }, inTimeOrder(items).map(([text, at, cls, more]) =>
      h("li", { class: cls || null }, h("div", null, text), at ? h("div", { class: "when" }, when(at)) : null, more || null)));
  }

  // Timed entries in time order (a stable sort: equal times keep their order); an untimed one stays after the
  // entry it followed. The final state stays last.
  function inTimeOrder(items) {
    let previous = -Infinity;
    const keyed = items.map((item, i) => {
      const t = item[1] ? Date.parse(item[1]) : NaN;
      const key = Number.isNaN(t) ? previous : t;
      previous = key;
      return { item, key, i, last: i === items.length - 1 };
    });
    keyed.sort((a, b) => (a.last - b.last) || (a.key - b.key) || (a.i - b.i));
    return keyed.map((k) => k.item);
  }

  // An attempt's error: {type, message, traceback} (a plain string from an older api).
  function attemptError(error) {
    if (typeof error !== "object") return String(error);
    return error.type ? `${error.type}: ${error.message}` : String(error.message);
  }

  // The job code's frames (innermost last), folded; shown as text, never as HTML.
  function traceback(text) {
    return h("details", { class: "traceback" }, h("summary", null, "Traceback"), h("pre", { class: "data mono" }, String(text)));
  }

  function queuesPage() {
    const body = region();
    const message = h("div", { role: "status", "aria-live": "polite" });
    const node = h("section", null, h("h1", null, "Queues"), message, body,
      h("p", { class: "note" }, "Paused queues come first: their jobs wait, unpolled. Open a queue for its dead letters and to redrive them."));
    async function refresh() {
      const answer = await api("GET", "/queues");
      const toggle = (q) => pauseButton("queue", q.name, q.paused, q.visible + q.delayed, message, refresh);
      body.show(answer.ok ? answer.body : ["error", answer.status], () => (answer.ok ? queuesTable(answer.body.queues || [], toggle) : errorBox(answer)));
    }
    return { title: "Queues", admin: true, node, refresh };
  }

  // The job types: queue, limits, who may submit them, and whether they are paused (paused ones first).
  function jobTypesPage() {
    const body = region();
    const message = h("div", { role: "status", "aria-live": "polite" });
    const node = h("section", null, h("h1", null, "Job types"), message, body,
      h("p", { class: "note" }, "A paused job type's jobs stay queued, unrun, until it is resumed; no attempt is spent."));
    // How many of the caller's jobs of the type wait (its queued jobs this caller can list; at most 100 counted).
    const queued = (name) => async () => {
      const page = await api("GET", "/jobs", { query: { status: "QUEUED", type: name, limit: "100" } });
      return page.ok ? (page.body.jobs || []).length : 0;
    };
    async function refresh() {
      const answer = await api("GET", "/job-types");
      if (!answer.ok) {
        body.show(["error", answer.status], () => errorBox(answer));
        return;
      }
      const types = answer.body.job_types || [];
      body.show([types, session.admin], () => table(
        [
          { label: "Job type" }, { label: "Queue" }, { label: "Attempts", cls: "num" }, { label: "Timeout", cls: "num" },
          { label: "Submitted by" }, { label: "Paused" }, ...(session.admin ? [{ label: "Pause" }] : []),
        ],
        types.map((t) => [
          t.name, t.queue, t.max_attempts, `${t.timeout_s}s`, t.submitted_by, pausedCell(t),
          ...(session.admin ? [pauseButton("job_type", t.name, t.paused, queued(t.name), message, refresh)] : []),
        ]),
        "No job types.",
      ));
    }
    return { title: "Job types", admin: false, node, refresh };
  }

  function queuePage(params) {
    const name = params[0];
    const stats = region();
    const dead = region();
    const message = h("div", { role: "status", "aria-live": "polite" });
    let deadLetters = 0;
    // The dead letters ticked for "Retry selected" / "Discard selected" (job ids), kept across refreshes.
    const selected = new Set();
    const redrive = h("button", { type: "button", class: "danger", on: { click: async () => {
      actionStarts(message);
      if (!ask(`Move all ${deadLetters} message${deadLetters === 1 ? "" : "s"} in the ${name} DLQ back to the queue? `
        + "Each of those jobs runs again, the ones that failed for good too.")) return;
      redrive.disabled = true;
      const answer = await api("POST", `/queues/${seg(name)}/redrive`);
      actionDone();
      message.replaceChildren(answer.ok
        ? h("div", { class: "notice" }, `Redrive of ${name}: ${answer.body.redrive.status}`)
        : errorBox(answer));
      await refresh();
    } } }, "Redrive all");
    const node = h("section", null,
      h("h1", null, "Queue ", name),
      stats,
      h("div", { class: "actions" }, redrive, h("span", { class: "note" }, "Moves every DLQ message back to the queue (admin).")),
      message,
      h("h2", null, "Dead letters"), dead);

    async function refresh() {
      const answer = await api("GET", "/queues");
      if (!answer.ok) {
        stats.show(["error", answer.status], () => errorBox(answer));
        return;
      }
      const queue = (answer.body.queues || []).find((q) => q.name === name);
      if (!queue) {
        stats.show("missing", () => h("div", { class: "error" }, `No queue named ${name}.`));
        redrive.hidden = true;
        return;
      }
      const running = queue.redrive && queue.redrive.status === "RUNNING";
      deadLetters = queue.dlq_depth;
      redrive.disabled = running || queue.dlq_depth === 0;
      stats.show(queue, () => h("div", { class: "cards" },
        card("In the DLQ", queue.dlq_depth),
        card("Visible", queue.visible),
        card("In flight", queue.in_flight),
        card("Delayed", queue.delayed),
        card("Oldest message", seconds(queue.oldest_age_s)),
        card("Last redrive", queue.redrive
          ? `${queue.redrive.status}${queue.redrive.moved !== null && queue.redrive.moved !== undefined ? ` (${queue.redrive.moved}/${queue.redrive.to_move ?? "?"})` : ""}`
          : "none"),
      ));
      // The failed jobs of this queue that this caller can list (an admin: also the schedules'), with their reasons.
      const failed = [];
      for (const owner of session.admin ? ["", SYSTEM_TENANT] : [""]) {
        let cursor = null;
        for (let i = 0; i < 5; i += 1) {
          const page = await api("GET", "/jobs", { query: { status: "FAILED", tenant: owner, limit: "100", cursor } });
          if (!page.ok) {
            dead.show(["error", page.status], () => errorBox(page));
            return;
          }
          failed.push(...(page.body.jobs || []).filter((j) => j.queue === name));
          cursor = page.body.cursor;
          if (!cursor) break;
        }
      }
      // Discarded jobs have no dead letter any more: they stay on the job listing, not here.
      const shown = failed.filter((j) => !j.discarded_at);
      const ids = new Set(shown.map((j) => j.job_id));
      for (const id of [...selected]) if (!ids.has(id)) selected.delete(id);
      const canRetry = session.features.retry;
      const canDiscard = session.features.discard;
      dead.show([shown, canRetry, canDiscard], () => {
        const count = h("span", { class: "note", "aria-live": "polite" });
        const retrySelected = h("button", { type: "button", class: "secondary", on: { click: () => many("retry") } }, "Retry selected");
        const discardSelected = h("button", { type: "button", class: "danger", on: { click: () => many("discard") } }, "Discard selected");
        const boxes = [];
        const sync = () => {
          count.textContent = `${selected.size} selected`;
          retrySelected.disabled = selected.size === 0;
          discardSelected.disabled = selected.size === 0;
        };
        const all = h("input", { type: "checkbox", id: "select-all-dead", on: { change: () => {
          for (const box of boxes) {
            box.checked = all.checked;
            if (all.checked) selected.add(box.value); else selected.delete(box.value);
          }
          sync();
        } } });
        const rows = shown.map((j) => {
          const box = h("input", { type: "checkbox", value: j.job_id, "aria-label": `Select job ${j.job_id}`, on: { change: () => {
            if (box.checked) selected.add(j.job_id); else selected.delete(j.job_id);
            sync();
          } } });
          box.checked = selected.has(j.job_id);
          boxes.push(box);
          return [
            canRetry || canDiscard ? box : "",
            link(`/jobs/${seg(j.job_id)}`, h("span", { class: "mono" }, j.job_id)),
            typeName(j.type),
            h("span", { class: "wrap" }, j.error || ""),
            when(j.finished_at),
            h("span", { class: "row-actions" },
              canRetry
                ? h("button", { type: "button", class: "secondary", on: { click: async (event) => {
                  actionStarts(message);
                  if (!ask(`Run job ${j.job_id} (${j.type}) again, with a fresh attempt budget? Its dead letter leaves the ${name} DLQ.`)) return;
                  event.target.disabled = true;
                  const r = await api("POST", `/jobs/${seg(j.job_id)}/retry`);
                  actionDone();
                  message.replaceChildren(r.ok ? h("div", { class: "notice" }, `Retried ${j.job_id}: ${r.body.status}`) : errorBox(r));
                  await refresh();
                } } }, "Retry")
                : "",
              canDiscard
                ? h("button", { type: "button", class: "danger", on: { click: async (event) => {
                  actionStarts(message);
                  if (!ask(`Discard the dead letter of job ${j.job_id} (${j.type})? It leaves the ${name} DLQ for good; `
                    + "the job stays FAILED and a redrive will not run it.")) return;
                  event.target.disabled = true;
                  const r = await api("DELETE", `/queues/${seg(name)}/dead-letters/${seg(j.job_id)}`);
                  actionDone();
                  message.replaceChildren(r.ok ? h("div", { class: "notice" }, `Discarded the dead letter of ${j.job_id}`) : errorBox(r));
                  await refresh();
                } } }, "Discard")
                : ""),
          ];
        });
        sync();
        all.checked = shown.length > 0 && shown.every((j) => selected.has(j.job_id));
        const bulk = canRetry || canDiscard
          ? h("div", { class: "actions" },
            h("label", { for: "select-all-dead", class: "select-all" }, all, "Select all"),
            canRetry ? retrySelected : "", canDiscard ? discardSelected : "", count)
          : "";
        return h("div", null,
          bulk,
          table(
            [{ label: "" }, { label: "Job" }, { label: "Type" }, { label: "Reason" }, { label: "Failed" }, { label: "" }],
            rows,
            "No failed jobs in this queue.",
          ),
          h("p", { class: "note" }, "Failed jobs of the signed-in tenant and of the schedules in this queue; the DLQ count above is the queue's."),
        );
      });
    }

    // Retry or discard every selected job, one request each, after one question that says how many.
    async function many(action) {
      const jobs = [...selected];
      const n = jobs.length;
      if (n === 0) return;
      actionStarts(message);
      const plural = n === 1 ? "job" : "jobs";
      const question = action === "retry"
        ? `Run ${n} selected ${plural} again, each with a fresh attempt budget? Their dead letters leave the ${name} DLQ.`
        : `Discard the dead letters of ${n} selected ${plural}? They leave the ${name} DLQ for good; `
          + `the ${plural} stay FAILED and a redrive will not run them.`;
      if (!ask(question)) return;
      let done = 0;
      const refused = [];
      for (const id of jobs) {
        const r = action === "retry"
          ? await api("POST", `/jobs/${seg(id)}/retry`)
          : await api("DELETE", `/queues/${seg(name)}/dead-letters/${seg(id)}`);
        if (r.ok) {
          done += 1;
          selected.delete(id);
        } else {
          refused.push(`${id}: ${r.status}`);
        }
      }
      actionDone();
      const verb = action === "retry" ? "Retried" : "Discarded the dead letters of";
      message.replaceChildren(h("div", { class: refused.length ? "error" : "notice" },
        `${verb} ${done} of ${n} ${plural}`, refused.length ? ` (refused: ${refused.join(", ")})` : ""));
      await refresh();
    }
    return { title: `Queue ${name}`, admin: true, node, refresh };
  }

  // A page's confirmation (or refusal) says what its last action did: the next action takes it away as it starts
  // (before its question), and a navigation builds the page anew without it.
  function actionStarts(message) {
    message.replaceChildren();
  }

  // An action changes what the kept answers say (the queues' DLQ depths of the dead-letters banner, the alarms):
  // they are asked again at the next refresh, not shown stale for their keeping time.
  function actionDone() {
    kept.clear();
  }

  function card(label, value) {
    return h("div", { class: "card" }, h("div", { class: "label" }, label), h("div", { class: "value" }, String(value)));
  }

  function schedulesPage() {
    const body = region();
    const message = h("div", { role: "status", "aria-live": "polite" });
    const node = h("section", null, h("h1", null, "Schedules"), message,
      h("p", null, link(`/jobs?tenant=${SYSTEM_TENANT}`, "The jobs the schedules made")), body);

    async function trigger(schedule, button) {
      const name = schedule.name;
      actionStarts(message);
      if (!ask(`Fire schedule ${name} now? It submits one ${schedule.job} job, as its next firing would.`)) return;
      button.disabled = true;
      const answer = await api("POST", `/schedules/${seg(name)}/trigger`);
      actionDone();
      button.disabled = false;
      if (!answer.ok) {
        message.replaceChildren(errorBox(answer));
      } else if (answer.body.job_id && !answer.body.skipped_reason) {
        message.replaceChildren(h("div", { class: "notice" }, `${name} fired: job `,
          link(`/jobs/${seg(answer.body.job_id)}`, h("span", { class: "mono" }, answer.body.job_id))));
      } else {
        message.replaceChildren(h("div", { class: "notice" }, `${name} skipped: ${answer.body.skipped_reason}`));
      }
      await refresh();
    }

    async function refresh() {
      const answer = await api("GET", "/schedules");
      if (!answer.ok) {
        body.show(["error", answer.status], () => errorBox(answer));
        return;
      }
      const schedules = answer.body.schedules || [];
      body.show(schedules, () => (schedules.length ? h("div", null, schedules.map((s) => {
        const next = Array.isArray(s.next_firings) ? s.next_firings.slice(0, 5) : (s.next_firing ? [s.next_firing] : []);
        const button = h("button", { type: "button", class: "secondary" }, "Trigger now");
        button.addEventListener("click", () => trigger(s, button));
        return h("article", { class: "schedule" },
          h("h2", null, s.name),
          h("dl", { class: "fields" },
            h("dt", null, "Expression"), h("dd", { class: "mono" }, s.expression),
            h("dt", null, "Time zone"), h("dd", null, s.timezone),
            h("dt", null, "Job"), h("dd", null, s.job),
            h("dt", null, "Overlap"), h("dd", null, s.overlap),
            h("dt", null, "Enabled"), h("dd", null, s.enabled ? "yes" : "no"),
            h("dt", null, next.length > 1 ? "Next firings" : "Next firing"),
            h("dd", null, next.length ? h("ul", null, next.map((t) => h("li", { class: "mono" }, t))) : "-"),
          ),
          h("div", { class: "actions" }, button),
          h("h3", null, "Last firings"),
          table(
            [{ label: "Slot" }, { label: "Fired" }, { label: "Job or skip" }],
            (s.last_firings || []).map((f) => [
              h("span", { class: "mono" }, f.slot), when(f.fired_at),
              f.job_id && !f.skipped_reason ? link(`/jobs/${seg(f.job_id)}`, h("span", { class: "mono" }, f.job_id)) : `skipped: ${f.skipped_reason || ""}`,
            ]),
            "Not fired yet.",
          ));
      })) : h("p", { class: "note" }, "No schedules are declared.")));
    }
    return { title: "Schedules", admin: true, node, refresh };
  }

  function notFoundPage() {
    return { title: "Not found", node: h("section", null, h("h1", null, "No such page"), h("p", null, link("", "Back to the console"))), refresh: async () => {} };
  }

  function adminOnlyPage(title) {
    return { title, node: h("section", null, h("h1", null, title), h("div", { class: "error", role: "alert" },
      "This page is for admins. Your token is a tenant's: you can see your own jobs."), h("p", null, link("/jobs", "Your jobs"))), refresh: async () => {} };
  }

  // -- webhooks (a tenant's endpoints and their deliveries) ------------------------------------
  //
  // The signed-in tenant's own endpoints (GET /webhooks answers the caller's only) and, per endpoint, its
  // latest delivery attempts. An endpoint's secret is never shown here: the API shows it at creation only.

  function webhookState(endpoint) {
    // In a span: on a narrow screen a table cell's child fills its width, and a badge keeps to its text.
    return h("span", null, endpoint.enabled ? badge("ENABLED") : badge("DISABLED"));
  }

  function webhookEvents(endpoint) {
    const events = (endpoint.events || []).join(", ");
    const types = endpoint.job_types && endpoint.job_types.length ? ` (job types: ${endpoint.job_types.join(", ")})` : "";
    return h("span", { class: "wrap" }, events + types);
  }

  function webhooksTable(list) {
    return table(
      [{ label: "Endpoint" }, { label: "URL" }, { label: "Events" }, { label: "State" }, { label: "Why disabled" }],
      list.map((w) => [
        link(`/webhooks/${seg(w.name)}`, w.name),
        h("span", { class: "mono wrap" }, w.url),
        webhookEvents(w),
        webhookState(w),
        w.enabled ? "" : h("span", { class: "wrap disabled-reason" }, w.disabled_reason || "disabled"),
      ]),
      "No endpoints. Register one with PUT /webhooks/{name}.",
    );
  }

  function webhooksAbsent() {
    return h("p", { class: "note" }, "Webhooks come from the API's GET /webhooks, which this API does not serve yet.");
  }

  function webhooksPage() {
    const body = region();
    const node = h("section", null, h("h1", null, "Webhooks"), body,
      h("p", { class: "note" }, "Your endpoints. Open one for its latest deliveries and to send it a test event."));
    async function refresh() {
      if (!session.features.webhooks) {
        body.show("absent", webhooksAbsent);
        return;
      }
      const answer = await api("GET", "/webhooks");
      body.show(answer.ok ? answer.body : ["error", answer.status],
        () => (answer.ok ? webhooksTable(answer.body.webhooks || []) : errorBox(answer)));
    }
    return { title: "Webhooks", node, refresh };
  }

  function deliveryStatus(attempt) {
    if (attempt.status_code === null || attempt.status_code === undefined) {
      return h("span", null, h("span", { class: "badge FAILED status-code" }, "no answer"));
    }
    const ok = attempt.status_code >= 200 && attempt.status_code < 300;
    return h("span", null, h("span", { class: `badge ${ok ? "SUCCEEDED" : "FAILED"} status-code` }, String(attempt.status_code)));
  }

  function deliveriesTable(list) {
    return table(
      [{ label: "Event" }, { label: "Type" }, { label: "Job" }, { label: "Attempt", cls: "num" }, { label: "At" },
        { label: "Status" }, { label: "Latency", cls: "num" }, { label: "Error" }, { label: "Next retry" }],
      list.map((a) => [
        h("span", { class: "mono wrap" }, a.event_id),
        a.type,
        a.job_id ? link(`/jobs/${seg(a.job_id)}`, h("span", { class: "mono wrap" }, a.job_id)) : "-",
        a.attempt,
        when(a.at),
        deliveryStatus(a),
        `${a.latency_ms} ms`,
        h("span", { class: "wrap" }, a.error || ""),
        a.next_retry_at ? when(a.next_retry_at) : "-",
      ]),
      "No deliveries yet.",
    );
  }

  function webhookPage(params) {
    const name = params[0];
    const fields = region();
    const deliveries = region();
    const message = h("div", { role: "status", "aria-live": "polite" });
    const test = h("button", { type: "button", class: "secondary", on: { click: async () => {
      actionStarts(message);
      test.disabled = true;
      const answer = await api("POST", `/webhooks/${seg(name)}/test`);
      actionDone();
      message.replaceChildren(answer.ok
        ? h("div", { class: "notice" }, `Sent ${answer.body.type} ${answer.body.event_id}: its attempt shows below.`)
        : errorBox(answer));
      test.disabled = false;
      await refresh();
    } } }, "Send test");
    const node = h("section", null,
      h("h1", null, "Webhook ", name),
      fields,
      h("div", { class: "actions" }, test, h("span", { class: "note" }, "Sends a webhook.test event, signed as every delivery.")),
      message,
      h("h2", null, "Latest deliveries"), deliveries);

    async function refresh() {
      if (!session.features.webhooks) {
        fields.show("absent", webhooksAbsent);
        test.hidden = true;
        return;
      }
      const answer = await api("GET", `/webhooks/${seg(name)}`);
      if (!answer.ok) {
        fields.show(["error", answer.status], () => errorBox(answer));
        test.hidden = true;
        deliveries.show("none", () => h("div"));
        return;
      }
      const w = answer.body;
      test.hidden = false;
      // A disabled endpoint's deliveries, a test's too, go to the delivery DLQ unsent: a PUT enables it again.
      test.disabled = !w.enabled;
      fields.show(w, () => h("dl", { class: "fields" },
        h("dt", null, "URL"), h("dd", { class: "mono" }, w.url),
        h("dt", null, "Events"), h("dd", null, webhookEvents(w)),
        h("dt", null, "Payload"), h("dd", null, w.include_payload ? "included" : "not included"),
        h("dt", null, "State"), h("dd", null, webhookState(w)),
        w.enabled ? null : [
          h("dt", null, "Why disabled"), h("dd", { class: "disabled-reason" }, w.disabled_reason || "disabled"),
          h("dt", null, "Disabled at"), h("dd", null, when(w.disabled_at)),
          h("dt", null, "To enable"), h("dd", null, `Register it again (PUT /webhooks/${name}); its secret is kept.`),
        ],
        h("dt", null, "Created"), h("dd", null, when(w.created_at)),
        h("dt", null, "Updated"), h("dd", null, when(w.updated_at)),
        w.previous_secret_expires_at
          ? [h("dt", null, "Previous secret"), h("dd", null, "valid until ", when(w.previous_secret_expires_at))]
          : null,
      ));
      const log = await api("GET", `/webhooks/${seg(name)}/deliveries`);
      deliveries.show(log.ok ? [log.body, w.enabled] : ["error", log.status], () => (log.ok ? h("div", null,
        log.body.failing_since
          ? h("div", { class: "error failing" }, "Failing since ", when(log.body.failing_since),
            w.enabled ? ": failing for 5 days in a row disables the endpoint." : ".")
          : null,
        deliveriesTable(log.body.deliveries || []),
        h("p", { class: "note" }, "The latest attempts, newest first. A retried event keeps its id."),
      ) : errorBox(log)));
    }
    return { title: `Webhook ${name}`, node, refresh };
  }

  // -- batches: the caller's batches, and one batch with its progress, counts, callbacks and jobs ------------

  function batchesTable(batches) {
    return table(
      [{ label: "Batch" }, { label: "Status" }, { label: "Done", cls: "num" }, { label: "Succeeded", cls: "num" },
        { label: "Failed", cls: "num" }, { label: "Cancelled", cls: "num" }, { label: "Created" }],
      batches.map((b) => [
        link(`/batches/${seg(b.batch_id)}`, h("span", { class: "mono" }, b.batch_id)),
        badge(b.status), `${b.total - b.pending}/${b.total}`, String(b.succeeded), String(b.failed),
        String(b.cancelled), when(b.created_at),
      ]),
      "No batches yet.",
    );
  }

  function batchesPage() {
    const list = region();
    const cursors = [null];
    let page = 0;
    const older = h("button", { type: "button", class: "secondary", disabled: true, on: { click: () => { page += 1; refresh(); } } }, "Older");
    const newer = h("button", { type: "button", class: "secondary", disabled: true, on: { click: () => { page = Math.max(0, page - 1); refresh(); } } }, "Newer");
    const node = h("section", null, h("h1", null, "Batches"), list, h("div", { class: "pager" }, newer, older));

    async function refresh() {
      const answer = await api("GET", "/batches", { query: { limit: "20", cursor: cursors[page] } });
      if (!answer.ok) {
        list.show(["error", answer.status], () => errorBox(answer));
        return;
      }
      const batches = answer.body.batches || [];
      cursors[page + 1] = answer.body.cursor || null;
      older.disabled = !answer.body.cursor;
      newer.disabled = page === 0;
      list.show([page, batches], () => batchesTable(batches));
    }
    return { title: "Batches", node, refresh };
  }

  function batchPage(params) {
    const id = params[0];
    const body = region();
    const jobs = region();
    const message = h("div", { role: "status", "aria-live": "polite" });
    const cursors = [null];
    let page = 0;
    const older = h("button", { type: "button", class: "secondary", disabled: true, on: { click: () => { page += 1; refresh(); } } }, "Older");
    const newer = h("button", { type: "button", class: "secondary", disabled: true, on: { click: () => { page = Math.max(0, page - 1); refresh(); } } }, "Newer");
    const node = h("section", null, h("h1", null, "Batch ", h("span", { class: "mono" }, id)), message, body,
      h("h2", null, "Jobs"), jobs, h("div", { class: "pager" }, newer, older));

    async function cancel(batch) {
      if (!ask(`Cancel batch ${batch.batch_id}? Its ${batch.pending} jobs not finished will not start; running ones finish.`)) return;
      const answer = await api("POST", `/batches/${seg(id)}/cancel`);
      message.replaceChildren(answer.ok ? h("div", { class: "notice" }, `Cancel: ${answer.body.status}`) : errorBox(answer));
      await refresh();
    }

    function view(batch) {
      const done = batch.total - batch.pending;
      const callback = (name) => {
        if (!batch[name]) return null;
        const jobId = batch[`${name}_job_id`];
        return h("span", null, h("span", { class: "mono" }, batch[name].type), ": ",
          jobId ? link(`/jobs/${seg(jobId)}`, h("span", { class: "mono", id: `batch-${name}` }, jobId)) : "not yet submitted");
      };
      const counts = Object.entries(batch.counts || {}).map(([k, v]) => `${k.toLowerCase()} ${v}`).join(", ");
      const fields = [
        ["Status", badge(batch.status)],
        ["Progress", h("div", { class: "progress" },
          h("progress", { id: "batch-progress", max: String(batch.total || 1), value: String(done) }), ` ${done} of ${batch.total}`)],
        ["Counts", h("span", { id: "batch-counts" }, `pending ${batch.pending}${counts ? ", " + counts : ""}`)],
        ["On complete", callback("on_complete")],
        ["On success", callback("on_success")],
        ["Created", when(batch.created_at)],
        ["Sealed", batch.sealed_at ? when(batch.sealed_at) : "open: jobs may still be added"],
        ["Cancelled", batch.cancelled_at ? when(batch.cancelled_at) : null],
        ["Submitted by job", batch.parent_job_id ? link(`/jobs/${seg(batch.parent_job_id)}`, h("span", { class: "mono" }, batch.parent_job_id)) : null],
      ].filter(([, v]) => v !== null && v !== undefined && v !== "");
      const actions = h("div", { class: "actions" });
      if (!batch.cancelled_at && batch.pending > 0) {
        actions.append(h("button", { type: "button", class: "danger", on: { click: () => cancel(batch) } }, "Cancel batch"));
      }
      return h("div", null, actions, h("dl", { class: "fields" }, fields.map(([k, v]) => [h("dt", null, k), h("dd", null, v)])));
    }

    async function refresh() {
      const answer = await api("GET", `/batches/${seg(id)}`);
      if (!answer.ok) {
        body.show(["error", answer.status], () => errorBox(answer));
        return;
      }
      body.show([answer.body], () => view(answer.body));
      const listed = await api("GET", `/batches/${seg(id)}/jobs`, { query: { limit: "20", cursor: cursors[page] } });
      if (!listed.ok) {
        jobs.show(["error", listed.status], () => errorBox(listed));
        return;
      }
      cursors[page + 1] = listed.body.cursor || null;
      older.disabled = !listed.body.cursor;
      newer.disabled = page === 0;
      jobs.show([page, listed.body.jobs], () => jobsTable(listed.body.jobs || []));
    }
    return { title: `Batch ${id}`, node, refresh };
  }

  const ROUTES = [
    [/^\/?$/, overviewPage],
    [/^\/jobs\/?$/, jobsPage],
    [/^\/jobs\/([^/]+)$/, jobPage],
    [/^\/batches\/?$/, batchesPage],
    [/^\/batches\/([^/]+)$/, batchPage],
    [/^\/bulk\/([^/]+)$/, bulkPage],
    [/^\/queues\/?$/, queuesPage],
    [/^\/queues\/([^/]+)$/, queuePage],
    [/^\/job-types\/?$/, jobTypesPage],
    [/^\/schedules\/?$/, schedulesPage],
    [/^\/alarms\/?$/, alarmsPage],
    [/^\/webhooks\/?$/, webhooksPage],
    [/^\/webhooks\/([^/]+)$/, webhookPage],
  ];

  const NAV = [
    ["", "Overview", true],
    ["/jobs", "Jobs", false],
    ["/batches", "Batches", false],
    ["/queues", "Queues", true],
    ["/job-types", "Job types", false],
    ["/schedules", "Schedules", true],
    ["/alarms", "Alarms", true],
    ["/webhooks", "Webhooks", false],
  ];

  // -- the app ---------------------------------------------------------------------------------

  const app = {
    current: null,
    timer: null,
    refreshing: false,

    async start() {
      session.load();
      document.addEventListener("click", (event) => {
        const a = event.target.closest && event.target.closest("a[data-nav], a.brand");
        if (!a || event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey) return;
        const url = new URL(a.href, location.href);
        if (url.origin !== location.origin || !url.pathname.startsWith(ROOT)) return;
        event.preventDefault();
        this.go(url.pathname.slice(ROOT.length) + url.search);
      });
      window.addEventListener("popstate", () => this.route());
      document.addEventListener("visibilitychange", () => { if (!document.hidden) this.tick(); });
      if (!session.token) {
        this.showSignIn();
        return;
      }
      await this.begin();
    },

    async begin() {
      const found = await discover();
      if (!session.token) return; // a 401 showed the sign-in form
      if (found.status === 0) {
        document.getElementById("main").replaceChildren(errorBox(found));
        return;
      }
      this.drawHeader();
      this.route();
      clearInterval(this.timer);
      this.timer = setInterval(() => this.tick(), REFRESH_MS);
    },

    drawHeader() {
      const nav = document.getElementById("nav");
      nav.replaceChildren(...NAV.filter(([path, , admin]) => (!admin || session.admin) && (path !== "/alarms" || session.features.alarms)
        && (path !== "/webhooks" || session.features.webhooks))
        .map(([path, label]) => link(path, label)));
      const who = document.getElementById("who");
      who.replaceChildren(
        h("span", null, session.admin ? "admin" : "tenant"),
        h("button", { type: "button", class: "secondary", on: { click: () => { session.signOut(); this.showSignIn("Signed out."); } } }, "Sign out"),
      );
    },

    showSignIn(note) {
      clearInterval(this.timer);
      if (this.current && this.current.close) this.current.close();
      this.current = null;
      document.getElementById("nav").replaceChildren();
      document.getElementById("who").replaceChildren();
      const banner = document.getElementById("dlq-banner");
      if (banner) banner.hidden = true;
      const input = h("input", { type: "password", id: "token", name: "token", autocomplete: "off", required: true });
      const form = h("form", { class: "signin", on: { submit: (event) => {
        event.preventDefault();
        if (!input.value.trim()) return;
        session.signIn(input.value);
        this.begin();
      } } },
      h("label", { for: "token" }, "Bearer token", input),
      h("div", null, h("button", { type: "submit" }, "Sign in")));
      document.title = "Sign in - offpath console";
      document.getElementById("main").replaceChildren(h("section", null,
        h("h1", null, "Sign in"),
        note ? h("div", { class: "notice", role: "status" }, note) : null,
        h("p", { class: "note" }, "Open the console from the link `offpath local` or `offpath console` prints, or paste a token. It is kept in this tab only."),
        form));
      input.focus();
    },

    go(path) {
      history.pushState(null, "", ROOT + path);
      this.route();
      document.getElementById("main").focus({ preventScroll: true });
    },

    route() {
      if (!session.token) return this.showSignIn();
      const path = location.pathname.startsWith(ROOT) ? location.pathname.slice(ROOT.length) : "/";
      const query = new URLSearchParams(location.search);
      if (!session.admin && /^\/?$/.test(path)) {
        history.replaceState(null, "", ROOT + "/jobs");
        return this.route();
      }
      let page = null;
      for (const [pattern, make] of ROUTES) {
        const match = pattern.exec(path);
        if (match) {
          let params;
          try {
            params = match.slice(1).map((p) => decodeURIComponent(p));
          } catch (_) {
            break;
          }
          page = make(params, query);
          break;
        }
      }
      page = page || notFoundPage();
      if (page.admin && !session.admin) page = adminOnlyPage(page.title);
      if (this.current && this.current.close) this.current.close();
      this.current = page;
      document.title = `${page.title} - offpath console`;
      document.getElementById("main").replaceChildren(page.node);
      const nav = document.getElementById("nav");
      for (const a of nav.querySelectorAll("a")) {
        const target = new URL(a.href).pathname.slice(ROOT.length) || "/";
        const here = target === "/" ? path === "/" || path === "" : path === target || path.startsWith(target + "/");
        if (here) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
      }
      this.tick(true);
    },

    // Dead letters are trouble on every page: an admin sees a banner naming each queue whose DLQ is not empty.
    async deadLetterBanner() {
      const banner = document.getElementById("dlq-banner");
      if (!banner || !session.admin) return;
      const answer = await keptAnswer("/queues", null, DLQ_BANNER_MS);
      const full = answer.ok ? (answer.body.queues || []).filter((q) => q.dlq_depth > 0) : [];
      banner.hidden = !full.length;
      banner.replaceChildren(...(full.length ? [h("strong", null, "Dead letters: "),
        ...full.flatMap((q, i) => [i ? ", " : "", link(`/queues/${seg(q.name)}`, `${q.name} ${q.dlq_depth}`)])] : []));
    },

    async tick(force) {
      const page = this.current;
      if (!page || (!force && (this.refreshing || document.hidden))) return;
      this.refreshing = true;
      try {
        await Promise.all([page.refresh(), this.deadLetterBanner()]);
        if (page === this.current) document.getElementById("updated").textContent = `Updated ${clock(Date.now())}`;
      } finally {
        this.refreshing = false;
      }
    },
  };

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", () => app.start());
  else app.start();
})();
