// The API as the console's user: every request carries the user's bearer token, so the
// server's authentication and authorization decide what the console may show, exactly as
// for kubectl. The token lives in sessionStorage (this tab only) and is never put in a URL
// that leaves the browser.

const KEY = "apiserver-console-token";

export function getToken() {
  return sessionStorage.getItem(KEY) || "";
}

export function setToken(token) {
  sessionStorage.setItem(KEY, token);
}

export function clearToken() {
  sessionStorage.removeItem(KEY);
}

// An answer that is not 2xx, with the text to show for it.
export class ApiError extends Error {
  constructor(status, message, reason = "") {
    super(message);
    this.status = status;
    this.reason = reason;
  }
}

// Listeners told about a 401 (the token is no longer accepted: sign in again).
const unauthorized = new Set();
export function onUnauthorized(listener) {
  unauthorized.add(listener);
}

async function errorOf(response) {
  let text = "";
  try {
    text = await response.text();
  } catch (_) {
    text = "";
  }
  let message = text.trim();
  let reason = "";
  try {
    const status = JSON.parse(text);
    if (status && status.kind === "Status") {
      message = status.message || message;
      reason = status.reason || "";
    }
  } catch (_) {
    // Plain text (health checks, /metrics refusals): shown as it is.
  }
  return new ApiError(response.status, message, reason);
}

// The message a panel shows for an error: 401 and 403 say what they mean.
export function describe(error) {
  if (error instanceof ApiError) {
    if (error.status === 401) {
      return "Unauthorized (401): the server did not accept your token. Sign in again.";
    }
    if (error.status === 403) {
      return `Forbidden (403): your user may not read this. ${error.message}`;
    }
    return `Error ${error.status}: ${error.message || "no details"}`;
  }
  if (error && error.name === "AbortError") {
    return "";
  }
  return `The server could not be reached (${error && error.message ? error.message : error}).`;
}

// fetch() with the token. ``expectOk: false`` returns non-2xx answers instead of throwing
// (health endpoints answer 500 with the same verbose body).
export async function apiFetch(path, { method = "GET", body, headers = {}, signal, expectOk = true } = {}) {
  const token = getToken();
  const all = { Accept: "application/json", ...headers };
  if (token) {
    all.Authorization = `Bearer ${token}`;
  }
  const response = await fetch(path, {
    method,
    body,
    headers: all,
    signal,
    cache: "no-store",
    credentials: "omit",
  });
  if (response.status === 401) {
    const error = await errorOf(response);
    for (const listener of unauthorized) {
      listener(error);
    }
    throw error;
  }
  if (expectOk && !response.ok) {
    throw await errorOf(response);
  }
  return response;
}

export async function apiJSON(path, options = {}) {
  const response = await apiFetch(path, options);
  return response.json();
}

// Who the token says we are (authentication.k8s.io/v1 SelfSubjectReview, `kubectl auth whoami`).
export async function whoami() {
  const review = await apiJSON("/apis/authentication.k8s.io/v1/selfsubjectreviews", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" }),
  });
  return (review.status && review.status.userInfo) || {};
}
