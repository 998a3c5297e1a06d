// The console's entry module: sign-in, then the three panels. Nothing here is secret or
// personal: the page and its scripts are the same for everyone; what the panels show comes
// from the API with the token the user gave, and the server decides what that token may see.

import { ApiError, clearToken, describe, getToken, onUnauthorized, setToken, whoami } from "./api.js";
import { $, setText } from "./dom.js";
import { startEvents } from "./events.js";
import { startHealth } from "./health.js";
import { startVitals } from "./vitals.js";

let stops = [];

function stopPanels() {
  for (const stop of stops) {
    stop();
  }
  stops = [];
}

function showSignIn(message = "") {
  stopPanels();
  $("console").hidden = true;
  $("signout").hidden = true;
  setText("whoami", "");
  $("signin").hidden = false;
  setText("signin-error", message);
  $("token").value = "";
  $("token").focus();
}

function showConsole(user) {
  $("signin").hidden = true;
  $("console").hidden = false;
  $("signout").hidden = false;
  const groups = (user.groups || []).join(", ");
  setText("whoami", user.username ? `Signed in as ${user.username}${groups ? ` (${groups})` : ""}` : "Signed in");
  stopPanels();
  stops = [startHealth(), startVitals(), startEvents()];
}

async function signIn() {
  let user = {};
  try {
    user = await whoami();
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      clearToken();
      showSignIn("Unauthorized (401): the server did not accept this token.");
      return;
    }
    if (!(error instanceof ApiError && error.status === 403)) {
      showSignIn(describe(error));
      return;
    }
    // 403: the token is valid but may not ask who it is; the panels say what it may see.
  }
  showConsole(user);
}

function tokenFromFragment() {
  // make run prints /ui/#token=...: the fragment never reaches the server; drop it at once.
  const match = /(?:^#|&)token=([^&]+)/.exec(window.location.hash);
  if (match) {
    setToken(decodeURIComponent(match[1]));
    history.replaceState(null, "", window.location.pathname + window.location.search);
  }
}

function main() {
  tokenFromFragment();
  onUnauthorized(() => {
    clearToken();
    showSignIn("Unauthorized (401): the server no longer accepts your token. Sign in again.");
  });
  $("signin-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const token = $("token").value.trim();
    if (!token) {
      return;
    }
    setToken(token);
    setText("signin-error", "Signing in…");
    signIn();
  });
  $("signout").addEventListener("click", () => {
    clearToken();
    showSignIn("Signed out.");
  });
  if (getToken()) {
    signIn();
  } else {
    showSignIn();
  }
}

main();
