// Health: /livez and /readyz with their verbose lines, refreshed every 2 s. A failing check
// is highlighted with its reason, read from its own path (/readyz/<name> answers
// "internal server error: <reason>"; the verbose list withholds reasons, as kube-apiserver
// does). A failing `shutdown` check on readyz means a graceful stop is under way.

import { apiFetch, describe } from "./api.js";
import { $, el, setText } from "./dom.js";

const PERIOD_MS = 2000;
const LINE = /^\[([+-])\]([^ ]+) (ok|excluded: .*|failed: .*)$/;

export function parseVerbose(text) {
  const checks = [];
  for (const line of text.split("\n")) {
    const match = LINE.exec(line.trim());
    if (match) {
      checks.push({ name: match[2], ok: match[1] === "+", text: match[3] });
    }
  }
  return checks;
}

async function reasonOf(endpoint, name, signal) {
  try {
    const response = await apiFetch(`/${endpoint}/${encodeURIComponent(name)}`, {
      signal,
      expectOk: false,
      headers: { Accept: "text/plain" },
    });
    const text = (await response.text()).trim();
    return text.replace(/^internal server error: /, "") || "failed";
  } catch (error) {
    return describe(error) || "failed";
  }
}

async function probe(endpoint, signal) {
  const response = await apiFetch(`/${endpoint}?verbose`, {
    signal,
    expectOk: false,
    headers: { Accept: "text/plain" },
  });
  const text = await response.text();
  if (response.status === 403) {
    const error = new Error(text);
    error.status = 403;
    throw error;
  }
  const checks = parseVerbose(text);
  await Promise.all(
    checks
      .filter((check) => !check.ok)
      .map(async (check) => {
        check.reason = await reasonOf(endpoint, check.name, signal);
      }),
  );
  return { ok: response.status === 200, checks };
}

// The last list drawn per endpoint: an unchanged list is not redrawn (nor re-announced).
const drawn = {};

function render(endpoint, result) {
  const list = $(endpoint);
  const state = $(`${endpoint}-state`);
  setText(`${endpoint}-state`, result.ok ? "passing" : "failing");
  state.className = `state ${result.ok ? "good" : "bad"}`;
  const signature = JSON.stringify(result.checks);
  if (drawn[endpoint] === signature) {
    return;
  }
  drawn[endpoint] = signature;
  const items = result.checks.map((check) =>
    el(
      "li",
      { className: check.ok ? "ok" : "failed", dataset: { check: check.name } },
      el("span", { className: "mark", "aria-hidden": "true" }, check.ok ? "✓" : "✗"),
      el("span", { className: "name" }, check.name),
      el("span", { className: "verdict" }, check.ok ? check.text : `failed: ${check.reason || "failed"}`),
    ),
  );
  list.replaceChildren(...items);
}

export function startHealth() {
  const controller = new AbortController();
  let timer = 0;
  const tick = async () => {
    try {
      const [livez, readyz] = await Promise.all([
        probe("livez", controller.signal),
        probe("readyz", controller.signal),
      ]);
      render("livez", livez);
      render("readyz", readyz);
      const stopping = readyz.checks.some((check) => check.name === "shutdown" && !check.ok);
      $("shutdown").hidden = !stopping;
      setText("health-error", "");
      setText("health-updated", `Last update ${new Date().toLocaleTimeString()}.`);
    } catch (error) {
      if (controller.signal.aborted) {
        return;
      }
      const text =
        error.status === 403 ? `Forbidden (403): your user may not read the health checks. ${error.message}` : describe(error);
      setText("health-error", text);
      for (const endpoint of ["livez", "readyz"]) {
        setText(`${endpoint}-state`, "unknown");
        $(`${endpoint}-state`).className = "state bad";
      }
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
