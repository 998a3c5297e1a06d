// Events: a live table fed by a list and a watch of events.k8s.io/v1, as client-go's
// reflector does (k8s.io/client-go/tools/cache/reflector.go): list, then watch from the
// list's resourceVersion; after a disconnect, watch again from the last resourceVersion seen
// (bookmarks included); on 410 Gone (that resourceVersion was compacted), list again.
// Filters become the list's and watch's fieldSelector and labelSelector, so the server does
// the filtering and authorization applies to exactly what is asked.
//
// The table shows the newest MAX_ROWS events (with a note saying how many match), and is
// redrawn at most every RENDER_MS however fast events arrive, so it stays responsive with
// tens of thousands of events in memory.

import { ApiError, apiFetch, apiJSON, describe } from "./api.js";
import { $, el, setText } from "./dom.js";
import { toYAML } from "./yaml.js";

const MAX_ROWS = 200;
const RENDER_MS = 100;
const PAGE = 500;
const BACKOFF_MIN_MS = 1000;
const BACKOFF_MAX_MS = 30000;
const FORBIDDEN_RETRY_MS = 30000;

// k8s.io/apimachinery/pkg/fields EscapeValue: \ , = are escaped in field selector values.
export function escapeField(value) {
  return value.replace(/\\/g, "\\\\").replace(/,/g, "\\,").replace(/=/g, "\\=");
}

// The API call for a set of filters: the collection path and its selectors.
export function queryFor(filters) {
  const ns = (filters.namespace || "").trim();
  const path = ns
    ? `/apis/events.k8s.io/v1/namespaces/${encodeURIComponent(ns)}/events`
    : "/apis/events.k8s.io/v1/events";
  const fields = [];
  if (filters.type) {
    fields.push(`type=${escapeField(filters.type)}`);
  }
  const reason = (filters.reason || "").trim();
  if (reason) {
    fields.push(`reason=${escapeField(reason)}`);
  }
  const object = (filters.object || "").trim();
  if (object) {
    const slash = object.indexOf("/");
    if (slash > 0) {
      fields.push(`regarding.kind=${escapeField(object.slice(0, slash))}`);
      fields.push(`regarding.name=${escapeField(object.slice(slash + 1))}`);
    } else {
      fields.push(`regarding.name=${escapeField(object)}`);
    }
  }
  const params = new URLSearchParams();
  if (fields.length) {
    params.set("fieldSelector", fields.join(","));
  }
  const labels = (filters.labels || "").trim();
  if (labels) {
    params.set("labelSelector", labels);
  }
  return { path, params };
}

function url(path, params, extra) {
  const all = new URLSearchParams(params);
  for (const [key, value] of Object.entries(extra)) {
    if (value !== undefined && value !== "") {
      all.set(key, value);
    }
  }
  const query = all.toString();
  return query ? `${path}?${query}` : path;
}

function keyOf(event) {
  return `${event.metadata.namespace || ""}/${event.metadata.name}`;
}

function timeOf(event) {
  return (
    (event.series && event.series.lastObservedTime) ||
    event.eventTime ||
    event.deprecatedLastTimestamp ||
    event.metadata.creationTimestamp ||
    ""
  );
}

// What the table sorts by, computed once per received object.
function entryOf(event) {
  return { event, time: timeOf(event), rv: Number(event.metadata.resourceVersion) || 0 };
}

// The object as kubectl shows it: list items carry no apiVersion and kind, watch objects do.
function whole(event) {
  return { apiVersion: "events.k8s.io/v1", kind: "Event", ...event };
}

function countOf(event) {
  return (event.series && event.series.count) || event.deprecatedCount || 1;
}

function objectOf(event) {
  const regarding = event.regarding || {};
  const name = regarding.name || "";
  return regarding.kind ? `${regarding.kind}/${name}` : name;
}

function shortTime(stamp) {
  if (!stamp) {
    return "";
  }
  const date = new Date(stamp);
  return Number.isNaN(date.getTime()) ? stamp : date.toLocaleString();
}

class Gone extends Error {}

// The reflector and the table of one filter set; `stop()` ends both. Exported for the
// browser tests, which drive it with a stand-in fetch.
export class EventStream {
  constructor(filters, onStatus) {
    this.query = queryFor(filters);
    this.items = new Map();
    this.resourceVersion = "";
    this.controller = new AbortController();
    this.onStatus = onStatus;
    this.dirty = false;
    this.timer = 0;
    this.selected = "";
    this.asked = 0;
  }

  stop() {
    this.controller.abort();
    clearTimeout(this.timer);
  }

  get signal() {
    return this.controller.signal;
  }

  changed() {
    if (!this.dirty) {
      this.dirty = true;
      this.timer = setTimeout(() => this.render(), RENDER_MS);
    }
  }

  async list() {
    this.onStatus("listing", "listing…");
    const items = new Map();
    let next = "";
    let resourceVersion = "";
    do {
      const list = await apiJSON(url(this.query.path, this.query.params, { limit: PAGE, continue: next }), {
        signal: this.signal,
      });
      for (const event of list.items || []) {
        items.set(keyOf(event), entryOf(event));
      }
      next = (list.metadata && list.metadata.continue) || "";
      resourceVersion = (list.metadata && list.metadata.resourceVersion) || resourceVersion;
    } while (next && !this.signal.aborted);
    this.items = items;
    this.resourceVersion = resourceVersion;
    this.changed();
  }

  apply(watchEvent) {
    const object = watchEvent.object || {};
    if (watchEvent.type === "ERROR") {
      if (object.code === 410) {
        throw new Gone(object.message || "resourceVersion too old");
      }
      throw new ApiError(object.code || 500, object.message || "watch error", object.reason || "");
    }
    const resourceVersion = object.metadata && object.metadata.resourceVersion;
    if (resourceVersion) {
      this.resourceVersion = resourceVersion;
    }
    if (watchEvent.type === "ADDED" || watchEvent.type === "MODIFIED") {
      this.items.set(keyOf(object), entryOf(object));
      this.changed();
    } else if (watchEvent.type === "DELETED") {
      this.items.delete(keyOf(object));
      this.changed();
    }
  }

  async watch() {
    const answer = apiFetch(
      url(this.query.path, this.query.params, {
        watch: "1",
        resourceVersion: this.resourceVersion,
        allowWatchBookmarks: "true",
      }),
      { signal: this.signal },
    );
    // Live from the moment the watch is asked for, not when its answer arrives: Firefox
    // resolves fetch() only with the first bytes of the body, and a watch sends none until
    // an event happens. Nothing is missed meanwhile (the watch starts at the resourceVersion
    // already shown), and a refusal or an unreachable server ends this state at once.
    this.onStatus("live", "live");
    this.asked = Date.now();
    const response = await answer.catch((error) => {
      if (error instanceof ApiError && error.status === 410) {
        throw new Gone(error.message);
      }
      throw error;
    });
    this.backoff = BACKOFF_MIN_MS;
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) {
        return;
      }
      buffer += decoder.decode(value, { stream: true });
      let newline = buffer.indexOf("\n");
      while (newline >= 0) {
        const line = buffer.slice(0, newline).trim();
        buffer = buffer.slice(newline + 1);
        if (line) {
          this.apply(JSON.parse(line));
        }
        newline = buffer.indexOf("\n");
      }
    }
  }

  async run() {
    this.backoff = BACKOFF_MIN_MS;
    while (!this.signal.aborted) {
      try {
        if (!this.resourceVersion) {
          await this.list();
        }
        setText("events-error", "");
        await this.watch();
        // The server ended the watch (its timeout): resume from the last resourceVersion.
        continue;
      } catch (error) {
        if (this.signal.aborted) {
          return;
        }
        if (error instanceof Gone) {
          this.resourceVersion = "";
          continue;
        }
        // A watch that stayed open a while was connected even if no answer came (Firefox):
        // start the backoff again from its minimum, as an answered one already did.
        if (this.asked && Date.now() - this.asked >= BACKOFF_MIN_MS) {
          this.backoff = BACKOFF_MIN_MS;
        }
        this.asked = 0;
        let wait = this.backoff;
        if (error instanceof ApiError && (error.status === 401 || error.status === 403)) {
          wait = FORBIDDEN_RETRY_MS;
          this.onStatus("forbidden", error.status === 403 ? "forbidden" : "unauthorized");
        } else {
          this.backoff = Math.min(this.backoff * 2, BACKOFF_MAX_MS);
          this.onStatus("retrying", `reconnecting in ${Math.round(wait / 1000)} s`);
        }
        setText("events-error", describe(error));
        await new Promise((resolve) => {
          const timer = setTimeout(resolve, wait);
          this.signal.addEventListener("abort", () => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
    }
  }

  newest() {
    const all = Array.from(this.items.values());
    all.sort((a, b) => (a.time !== b.time ? (a.time < b.time ? 1 : -1) : b.rv - a.rv));
    return all;
  }

  render() {
    this.dirty = false;
    if (this.signal.aborted) {
      return;
    }
    const all = this.newest();
    const shown = all.slice(0, MAX_ROWS);
    const rows = shown.map(({ event, time: stamp }) => {
      const key = keyOf(event);
      const type = event.type || "";
      const regarding = event.regarding || {};
      return el(
        "tr",
        {
          tabindex: "0",
          className: `${type === "Warning" ? "warning" : ""}${key === this.selected ? " selected" : ""}`,
          dataset: { key },
          "aria-label": `${type} ${event.reason || ""} ${objectOf(event)}: open details`,
        },
        el("td", { className: "time" }, el("time", { datetime: stamp, title: stamp }, shortTime(stamp))),
        el("td", { className: "type" }, type),
        el("td", {}, event.reason || ""),
        el("td", { title: regarding.namespace ? `namespace ${regarding.namespace}` : undefined }, objectOf(event)),
        el("td", { className: "note-cell" }, event.note || ""),
        el("td", {}, event.reportingController || ""),
        el("td", { className: "count" }, countOf(event)),
      );
    });
    $("events-rows").replaceChildren(...rows);
    const total = all.length;
    setText(
      "events-note",
      total > MAX_ROWS
        ? `Showing the newest ${MAX_ROWS} of ${total} events; narrow the filters to see the others.`
        : `${total} event${total === 1 ? "" : "s"}.`,
    );
    if (this.selected && !$("detail").hidden) {
      const entry = this.items.get(this.selected);
      if (entry) {
        setText("detail-yaml", toYAML(whole(entry.event)));
      }
    }
  }

  open(key) {
    const entry = this.items.get(key);
    if (!entry) {
      return;
    }
    const event = entry.event;
    this.selected = key;
    setText("detail-title", `Event ${key}`);
    setText("detail-yaml", toYAML(whole(event)));
    $("detail").hidden = false;
    $("detail-yaml").focus();
    this.changed();
  }
}

function readFilters() {
  return {
    namespace: $("f-namespace").value,
    type: $("f-type").value,
    reason: $("f-reason").value,
    object: $("f-object").value,
    labels: $("f-labels").value,
  };
}

export function startEvents() {
  let stream = null;
  const status = (state, text) => {
    const node = $("events-stream");
    setText("events-stream", text);
    node.className = `state ${state === "live" ? "good" : state === "listing" ? "" : "bad"}`;
  };
  const begin = () => {
    if (stream) {
      stream.stop();
    }
    stream = new EventStream(readFilters(), status);
    const { path, params } = stream.query;
    setText("events-query", `GET ${url(path, params, {})} (then watch)`);
    $("events-rows").replaceChildren();
    setText("events-note", "");
    stream.run();
  };
  const onSubmit = (event) => {
    event.preventDefault();
    begin();
  };
  const onType = () => begin();
  const rowOf = (target) => target.closest && target.closest("tr[data-key]");
  const onClick = (event) => {
    const row = rowOf(event.target);
    if (row && stream) {
      stream.open(row.dataset.key);
    }
  };
  const onKey = (event) => {
    const row = rowOf(event.target);
    if (row && stream && (event.key === "Enter" || event.key === " ")) {
      event.preventDefault();
      stream.open(row.dataset.key);
    }
  };
  const onClose = () => {
    $("detail").hidden = true;
    if (stream) {
      stream.selected = "";
      stream.changed();
    }
  };
  $("filters").addEventListener("submit", onSubmit);
  $("f-type").addEventListener("change", onType);
  $("events-rows").addEventListener("click", onClick);
  $("events-rows").addEventListener("keydown", onKey);
  $("detail-close").addEventListener("click", onClose);
  begin();
  return () => {
    if (stream) {
      stream.stop();
    }
    $("filters").removeEventListener("submit", onSubmit);
    $("f-type").removeEventListener("change", onType);
    $("events-rows").removeEventListener("click", onClick);
    $("events-rows").removeEventListener("keydown", onKey);
    $("detail-close").removeEventListener("click", onClose);
    $("detail").hidden = true;
  };
}
