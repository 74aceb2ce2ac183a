// pi-agent-ask web desk: the desk's latest notice above the form (say, an agent's journal
// could not be written: what is typed stays with the desk and is written once writes work
// again), with when it came, until the person hides it; a newer one shows again. It comes
// with each board event of the live stream (desk.js: "desk:board", the board's digest).
"use strict";
(function () {
  const box = document.getElementById("desk-notice");
  if (!box) return;
  // A notice hidden stays hidden in this tab across reloads (the tab's session storage keeps
  // which: its number and time, as a restarted desk numbers its notices again).
  const HIDDEN = "pi-agent-ask-hidden-notice";
  let seen = null;
  function show(notice) {
    const which = notice ? notice[0] + " " + notice[2] : null;
    if (!notice || which === seen) return;
    seen = which;
    if (sessionStorage.getItem(HIDDEN) === which) return;
    const at = new Date(notice[2]);
    // The time alone for today's; with the date for an older one (a desk runs for days).
    const when = at.toDateString() === new Date().toDateString()
      ? at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })
      : at.toLocaleString([], { dateStyle: "medium", timeStyle: "short" });
    document.getElementById("desk-notice-text").textContent =
      "Desk notice, " + when + ": " + notice[1];
    box.hidden = false;
  }
  document.addEventListener("desk:board", function (event) { show(event.detail.notice); });
  document.getElementById("desk-notice-hide").addEventListener("click", function () {
    // The focus, on the button going away, goes to the page's heading just below (else to
    // the page itself, and Tab starts again from the top).
    const hadFocus = box.contains(document.activeElement);
    box.hidden = true;
    if (seen !== null) sessionStorage.setItem(HIDDEN, seen);
    const heading = document.querySelector("#slot h1");
    if (hadFocus && heading) heading.focus();
  });
})();
