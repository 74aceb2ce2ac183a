// pi-agent-ask web desk: times in the person's own time zone. No dependencies.
// Each <time> carries its UTC instant in ``datetime``; the server writes it as UTC text
// (what a page without script shows), and this shows it in the browser's zone and language.
"use strict";
(function () {
  const local = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "short", day: "numeric",
    hour: "2-digit", minute: "2-digit", timeZoneName: "short",
  });
  document.querySelectorAll("time[datetime]").forEach(function (time) {
    const moment = new Date(time.getAttribute("datetime"));
    if (!isNaN(moment.getTime())) time.textContent = local.format(moment);
  });
})();
