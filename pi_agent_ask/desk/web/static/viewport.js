// pi-agent-ask web desk: Submit, Cancel and Later, with what they answered (the bar at the
// bottom of the screen, desk.css), above a phone's on-screen keyboard while the person types.
// Chrome and Firefox on Android make room for the keyboard themselves (the page's viewport
// asks them to: interactive-widget=resizes-content). Safari shrinks only the visual viewport
// and lays the page out as before, the keyboard over its bottom: this script measures the
// part of the page the keyboard covers and gives it to desk.css as --keyboard, which lifts
// the bar above it. Zoomed in (a pinch), the visual viewport is smaller for the zoom, not a
// keyboard: the bar stays where it is (following the zoomed view, it would move under the
// finger as the person pans).
"use strict";
(function () {
  const view = window.visualViewport;
  if (!view) return;
  const root = document.documentElement;
  function place() {
    const zoomed = Math.abs(view.scale - 1) > 0.01;
    const covered = zoomed ? 0 : Math.floor(window.innerHeight - view.height - view.offsetTop);
    root.style.setProperty("--keyboard", Math.max(0, covered) + "px");
  }
  view.addEventListener("resize", place);
  view.addEventListener("scroll", place);
  place();
})();
