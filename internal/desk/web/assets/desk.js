// The desk's only script, loaded from this origin (the CSP allows no
// inline script). It keeps the pending list live over server-sent events
// and counts down expiries. Without it every page still works: the list
// is current when loaded and the expiry time is printed.
"use strict";

function countdowns() {
  const now = Date.now();
  for (const el of document.querySelectorAll("[data-countdown]")) {
    const at = Date.parse(el.getAttribute("data-countdown") || el.getAttribute("datetime"));
    if (Number.isNaN(at)) continue;
    let s = Math.max(0, Math.floor((at - now) / 1000));
    if (s === 0) { el.textContent = "expired"; continue; }
    const h = Math.floor(s / 3600); s -= h * 3600;
    const m = Math.floor(s / 60); s -= m * 60;
    el.textContent = "expires in " + (h ? h + "h " : "") + (h || m ? m + "m " : "") + s + "s";
  }
}

function live() {
  const body = document.getElementById("pending");
  const state = document.getElementById("live-state");
  if (!body || !window.EventSource) return;
  const source = new EventSource(body.getAttribute("data-live"));
  source.addEventListener("pending", (e) => {
    // The rows are rendered by the server's html/template, escaped there.
    body.innerHTML = e.data;
    countdowns();
    if (state) state.textContent = "Live: updated " + new Date().toLocaleTimeString();
  });
  source.addEventListener("error", () => {
    if (state) state.textContent = "Reconnecting…";
  });
}

document.addEventListener("DOMContentLoaded", () => {
  live();
  countdowns();
  setInterval(countdowns, 1000);
});
