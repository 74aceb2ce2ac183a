// pi-agent-ask web desk: Sign out in every page's header. The form is posted by fetch, not
// by the browser's own navigation: with the desk down or out of reach, a navigation would
// leave this page for the browser's error page, and what the person typed with it. So the
// page stays, says so in words under the header, and signs out by itself once the desk
// answers again (or when Sign out is pressed again).
"use strict";
(function () {
  const form = document.getElementById("sign-out");
  const banner = document.getElementById("sign-out-status");
  if (!form || !banner) return;
  const UNREACHABLE = "The desk cannot be reached (the network or the desk is down), so this " +
    "browser is not signed out yet. Everything you typed stays on this page. It signs out " +
    "by itself as soon as the desk is back; press Sign out to try again now.";
  // Between two tries while the desk is away: doubled after each failed try, up to the last.
  const WAITS = [2000, 4000, 8000, 15000];
  // A try the network holds without an answer (a phone in a tunnel) counts as not reaching
  // the desk after this long, so the page says so and tries again, instead of nothing.
  const PATIENCE = 10000;
  let pending = false; // Sign out was pressed and has not reached the desk yet
  let trying = false; // a try is on its way
  let tries = 0;
  let timer = null;

  function tell(text) {
    banner.textContent = text;
    banner.hidden = text === "";
  }
  // Before the session ends: the page's own work that needs it (desk.js saves a draft still
  // due), each a promise in the event's ``waits``.
  async function before() {
    const event = new CustomEvent("desk:sign-out", { detail: { waits: [] } });
    document.dispatchEvent(event);
    let waited = null;
    const patience = new Promise(function (done) { waited = setTimeout(done, PATIENCE); });
    await Promise.race([Promise.all(event.detail.waits), patience]);
    clearTimeout(waited);
  }
  async function attempt() {
    if (trying) return;
    trying = true;
    clearTimeout(timer);
    timer = null;
    let response = null;
    try {
      await before();
      response = await fetch(form.action, {
        method: "POST",
        body: new URLSearchParams(new FormData(form)),
        credentials: "same-origin",
        signal: AbortSignal.timeout(PATIENCE),
      });
    } catch (e) {
      response = null; // never reached the desk
    } finally {
      trying = false;
    }
    // A proxy in front of the desk (TLS, a tunnel) answering for a desk that is away (or one
    // still starting) is no answer from the desk either.
    if (response === null || [502, 503].indexOf(response.status) >= 0) {
      tell(UNREACHABLE);
      timer = setTimeout(attempt, WAITS[Math.min(tries, WAITS.length - 1)]);
      tries += 1;
      return;
    }
    pending = false;
    tries = 0;
    if (response.redirected) {
      // The desk ended the session (or it had ended: a desk restart signs everyone out) and
      // sent the browser to its sign-in page, which says so.
      location.assign(response.url);
      return;
    }
    let said = "";
    try { said = (await response.json()).error || ""; } catch (e) { said = ""; }
    tell((said || "The desk did not sign this browser out.") + " Press Sign out to try again.");
  }
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    pending = true;
    if (!trying) tell("Signing out…");
    attempt();
  });
  // The desk answered something else (desk.js: its live stream is back): try at once.
  function again() { if (pending) attempt(); }
  document.addEventListener("desk:reachable", again);
  window.addEventListener("online", again);
})();
