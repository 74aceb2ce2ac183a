// pi-agent-ask web desk: a sign-in link's page signs in at once, as if its button were
// pressed. The page itself only shows the button: a chat app's link preview, which reads the
// page without running it, never posts the form and so never uses the one-time link up.
"use strict";
(function () {
  const form = document.getElementById("sign-in");
  let sent = false;
  function send() {
    if (sent || document.visibilityState !== "visible") return;
    sent = true;
    form.submit(); // not requestSubmit: older Safari lacks it
  }
  document.addEventListener("visibilitychange", send);
  send();
})();
