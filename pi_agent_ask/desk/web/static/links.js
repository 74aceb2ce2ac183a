// pi-agent-ask web desk: the page's ways to the desk's other pages (the header's links, an
// agent's link, the history's search and its Markdown download) while the desk is out of
// reach. Followed by the browser itself, a link to a desk that is down (or a network that
// is) leaves this page for the browser's own error page, and what the person typed with it;
// a download fails in the browser's download bar, saying nothing on the page. So the page
// first asks the desk whether it answers (``/session``: any desk answers it at once, signed
// in or not) and follows the link only then. Out of reach, the page stays as it is and says
// so in the banner under the header (Sign out's, signout.js); it says so again once the desk
// answers, and the link then works.
"use strict";
(function () {
  const banner = document.getElementById("sign-out-status");
  if (!banner) return;
  // As Sign out's: an ask the network holds this long counts as not reaching the desk.
  const PATIENCE = 10000;
  // Between two asks while the desk is away, to say when it is back: doubled up to the last.
  const WAITS = [2000, 4000, 8000, 15000];
  // Said only when the desk is slow to answer (a link then seems to do nothing).
  const SLOW = 1000;
  let asking = false; // a link was followed and the desk has not answered yet
  let away = null; // what did not open while the desk was out of reach
  let said = ""; // the banner's last sentence from here (Sign out's own are left alone)
  let tries = 0;
  let timer = null;

  function tell(text) {
    said = text;
    banner.textContent = text;
    banner.hidden = text === "";
  }
  // Whether the desk answers: anything but a proxy's Bad Gateway or Service Unavailable (a
  // desk that is away behind TLS or a tunnel), in time.
  async function answers() {
    try {
      const response = await fetch("/session", {
        credentials: "same-origin",
        cache: "no-store",
        signal: AbortSignal.timeout(PATIENCE),
      });
      return [502, 503].indexOf(response.status) < 0;
    } catch (e) {
      return false;
    }
  }
  async function follow(url, what) {
    if (asking) return; // a second press waits for the first
    asking = true;
    clearTimeout(timer);
    const slow = setTimeout(function () { tell("Opening " + what + "…"); }, SLOW);
    const reached = await answers();
    clearTimeout(slow);
    asking = false;
    if (reached) {
      location.assign(url);
      return;
    }
    away = what;
    tell("The desk cannot be reached (the network or the desk is down), so " + what +
      " did not go through: this page stays as it is, with everything you typed. Press it " +
      "again once the desk is back; this line says when.");
    tries = 0;
    timer = setTimeout(watch, WAITS[0]);
  }
  // While a link did not open: ask again now and then, to say when the desk is back.
  async function watch() {
    timer = null;
    if (away === null || asking) return;
    if (await answers()) { back(); return; }
    tries += 1;
    timer = setTimeout(watch, WAITS[Math.min(tries, WAITS.length - 1)]);
  }
  function back() {
    if (away === null) return;
    const what = away;
    away = null;
    clearTimeout(timer);
    timer = null;
    // Only over this script's own sentence: Sign out may have said something since.
    if (banner.textContent === said) tell("The desk can be reached again: press " + what + " again.");
  }

  function named(element) { return "“" + element.textContent.trim() + "”"; }
  // A plain click (or Enter) on a link to another of the desk's pages, or to a download of the
  // desk's (followed, its answer is saved, and the page stays); a click that opens a new tab
  // or window, or a move within this page, is the browser's own.
  document.addEventListener("click", function (event) {
    if (event.defaultPrevented || event.button !== 0 ||
        event.ctrlKey || event.metaKey || event.shiftKey || event.altKey) return;
    const link = event.target.closest && event.target.closest("a[href]");
    if (!link || (link.target && link.target !== "_self")) return;
    const url = new URL(link.href, location.href);
    if (url.origin !== location.origin) return;
    if (url.hash && url.pathname === location.pathname && url.search === location.search) return;
    event.preventDefault();
    follow(url.href, named(link));
  });
  // A form that only reads (``method="get"``: the history's search) is a link too.
  document.addEventListener("submit", function (event) {
    const form = event.target;
    if (event.defaultPrevented || form.method !== "get") return;
    event.preventDefault();
    const url = new URL(form.action, location.href);
    url.search = new URLSearchParams(new FormData(form)).toString();
    follow(url.href, event.submitter ? named(event.submitter) : "the search");
  });
  // The desk answered something else (desk.js: its live stream is back).
  document.addEventListener("desk:reachable", back);
  window.addEventListener("online", function () { if (away !== null) watch(); });
})();
