// pi-agent-ask web desk: Submit, Cancel and Later, with what they answered (the bar at the
// bottom of the screen, desk.css), above a phone's on-screen keyboard while the person types.
// Chrome and Firefox on Android make room for the keyboard themselves (the page's viewport
// asks them to: interactive-widget=resizes-content). Safari shrinks only the visual viewport
// and lays the page out as before, the keyboard over its bottom: this script measures the
// part of the page the keyboard covers and gives it to desk.css as --keyboard, which lifts
// the bar above it. Zoomed in (a pinch), the visual viewport is smaller for the zoom, not a
// keyboard: the bar stays where it is (following the zoomed view, it would move under the
// finger as the person pans).
//
// And the bar's height as it is now (--bar), for the room desk.css keeps below what the focus
// moves to: a sentence beside the buttons (what they answered, a note, a draft not kept)
// makes the bar taller than the buttons alone, and a fixed room left the box in focus under
// it. Measured again whenever its size changes, and when desk.js puts another form in the
// slot (a new bar).
"use strict";
(function () {
  const root = document.documentElement;
  const slot = document.getElementById("slot");
  if (!slot || !window.ResizeObserver) return;
  function bar() { return slot.querySelector("#ask-form .bar"); }
  function measure() {
    const now = bar();
    if (now) root.style.setProperty("--bar", now.offsetHeight + "px");
    else root.style.removeProperty("--bar");
  }
  const sized = new ResizeObserver(measure);
  function watch() {
    sized.disconnect();
    const now = bar();
    if (now) sized.observe(now);
    measure();
  }
  new MutationObserver(watch).observe(slot, { childList: true });
  watch();
})();
(function () {
  const view = window.visualViewport;
  if (!view) return;
  const root = document.documentElement;
  let lifted = 0; // the height the bar is lifted by (px)
  // ``resized``: the visual viewport changed size (the keyboard came, went or changed), not
  // only its place (the person scrolling it).
  function place(resized) {
    const zoomed = Math.abs(view.scale - 1) > 0.01;
    const covered = zoomed ? 0 : Math.floor(window.innerHeight - view.height - view.offsetTop);
    const now = Math.max(0, covered);
    root.style.setProperty("--keyboard", now + "px");
    // The keyboard came up: the box being typed in, which the browser brought into view
    // above the keyboard, may be under the bar lifted there now. It is brought above the bar
    // (desk.css: the scroll padding counts the keyboard). Only then: the person scrolling
    // with the keyboard up is not taken back to the box.
    const typing = document.activeElement;
    if (resized && now > lifted && typing && typing.matches("textarea, input")) {
      typing.scrollIntoView({ block: "nearest" });
    }
    lifted = now;
  }
  view.addEventListener("resize", function () { place(true); });
  view.addEventListener("scroll", function () { place(false); });
  place(false);
})();
