// Vital signs from /metrics (Prometheus text format 0.0.4), every 5 s: requests per second
// by verb and code (from apiserver_request_total between two scrapes), open watches, store
// size and objects, and, when the server exposes them, audit events and priority-and-fairness
// queues. Metric names change between releases (kube renamed several), so each figure lists
// the names it accepts and a figure whose metrics are all absent is simply not shown.

import { apiFetch, describe } from "./api.js";
import { $, el, setText } from "./dom.js";

const PERIOD_MS = 5000;
const HISTORY = 60;
const SVG = "http://www.w3.org/2000/svg";

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

// name -> [{labels, value}]
export function parseMetrics(text) {
  const families = new Map();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) {
      continue;
    }
    const match = SAMPLE.exec(line);
    if (!match) {
      continue;
    }
    const labels = {};
    for (const pair of (match[2] || "").matchAll(LABEL)) {
      labels[pair[1]] = pair[2].replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
    }
    const value = Number(match[3]);
    if (!families.has(match[1])) {
      families.set(match[1], []);
    }
    families.get(match[1]).push({ labels, value });
  }
  return families;
}

// The sum of the first of `names` present, over samples `where` accepts; null when none is.
export function total(families, names, where = () => true) {
  for (const name of names) {
    const samples = families.get(name);
    if (samples) {
      return samples.filter((s) => where(s.labels)).reduce((sum, s) => sum + s.value, 0);
    }
  }
  return null;
}

function byVerbAndCode(families) {
  const counts = new Map();
  for (const sample of families.get("apiserver_request_total") || []) {
    const key = `${sample.labels.verb || "?"} ${sample.labels.code || "?"}`;
    counts.set(key, (counts.get(key) || 0) + sample.value);
  }
  return counts;
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(unit ? 1 : 0)} ${units[unit]}`;
}

function figure(label, value) {
  return [el("dt", {}, label), el("dd", {}, value)];
}

function chart(history) {
  const svg = $("vitals-chart");
  const max = Math.max(1, ...history);
  const step = 300 / Math.max(1, HISTORY - 1);
  const offset = (HISTORY - history.length) * step;
  const points = history.map((v, i) => `${(offset + i * step).toFixed(1)},${(78 - (v / max) * 70).toFixed(1)}`);
  const line = document.createElementNS(SVG, "polyline");
  line.setAttribute("points", points.join(" "));
  line.setAttribute("class", "line");
  const label = document.createElementNS(SVG, "text");
  label.setAttribute("x", "2");
  label.setAttribute("y", "10");
  label.setAttribute("class", "axis");
  label.textContent = `max ${max.toFixed(1)}/s`;
  const title = document.createElementNS(SVG, "title");
  const last = history.length ? history[history.length - 1] : 0;
  title.textContent = `Requests per second: now ${last.toFixed(1)}, peak ${max.toFixed(1)}`;
  svg.replaceChildren(title, line, label);
}

export function startVitals() {
  const controller = new AbortController();
  let timer = 0;
  let previous = null;
  const history = [];
  const tick = async () => {
    try {
      const response = await apiFetch("/metrics", { signal: controller.signal, headers: { Accept: "text/plain" } });
      const families = parseMetrics(await response.text());
      const now = performance.now();
      const counts = byVerbAndCode(families);
      const rates = [];
      if (previous) {
        const seconds = (now - previous.at) / 1000;
        let sum = 0;
        for (const [key, count] of counts) {
          const delta = count - (previous.counts.get(key) || 0);
          if (delta > 0 && seconds > 0) {
            rates.push([key, delta / seconds]);
            sum += delta / seconds;
          }
        }
        history.push(sum);
        if (history.length > HISTORY) {
          history.shift();
        }
      }
      previous = { at: now, counts };
      rates.sort((a, b) => b[1] - a[1]);
      $("vitals-rates").replaceChildren(
        ...rates.map(([key, rate]) => {
          const [verb, code] = key.split(" ");
          return el("tr", {}, el("td", {}, verb), el("td", {}, code), el("td", { className: "count" }, rate.toFixed(2)));
        }),
      );
      const items = [];
      const reqs = history.length ? history[history.length - 1] : null;
      items.push(...figure("Requests/s", reqs === null ? "measuring…" : reqs.toFixed(2)));
      const watches = total(families, ["apiserver_longrunning_requests"], (l) => l.verb === "WATCH");
      const registered = total(families, ["apiserver_registered_watchers"]);
      if (watches !== null || registered !== null) {
        items.push(...figure("Open watches", String(watches !== null ? watches : registered)));
      }
      const inflight = total(families, ["apiserver_current_inflight_requests"]);
      if (inflight !== null) {
        items.push(...figure("In flight", String(inflight)));
      }
      const size = total(families, ["apiserver_storage_size_bytes", "apiserver_storage_db_total_size_in_bytes", "etcd_db_total_size_in_bytes"]);
      if (size !== null) {
        items.push(...figure("Store size", bytes(size)));
      }
      const objects = total(families, ["apiserver_resource_objects", "apiserver_storage_objects", "etcd_object_counts"]);
      if (objects !== null) {
        items.push(...figure("Stored objects", String(objects)));
      }
      const audit = total(families, ["apiserver_audit_event_total"]);
      if (audit !== null) {
        items.push(...figure("Audit events", String(audit)));
      }
      const queued = total(families, ["apiserver_flowcontrol_current_inqueue_requests"]);
      if (queued !== null) {
        items.push(...figure("APF queued", String(queued)));
      }
      const executing = total(families, ["apiserver_flowcontrol_current_executing_requests"]);
      if (executing !== null) {
        items.push(...figure("APF executing", String(executing)));
      }
      $("vitals-figures").replaceChildren(...items);
      chart(history);
      setText("vitals-error", "");
    } catch (error) {
      if (controller.signal.aborted) {
        return;
      }
      setText("vitals-error", describe(error));
    }
    if (!controller.signal.aborted) {
      timer = setTimeout(tick, PERIOD_MS);
    }
  };
  tick();
  return () => {
    controller.abort();
    clearTimeout(timer);
  };
}
