// pi-agent-ask web desk: live updates, drafts, review and submit. No dependencies. The server
// renders every piece of the page; this script only moves values and text (textContent, never
// markup built from agent text) and swaps server-rendered fragments.
"use strict";
(function () {
  // The session's token; replaced when the browser signs in again (``renew``).
  let csrf = document.querySelector('meta[name="csrf-token"]').content;
  const slot = document.getElementById("slot");
  const statusBox = document.getElementById("status");
  const queueBox = document.getElementById("queue");
  const SAVE_DELAY = 300;
  const UNREACHABLE = "The desk could not be reached (the network or the desk is down): " +
    "nothing was sent. What you entered is still here; try again.";
  // A proxy's Bad Gateway and Service Unavailable (not its Gateway Timeout: the request may
  // have reached the desk).
  const AWAY = [502, 503];
  let saveTimer = null;
  // The id of a form this page itself just sent away, until the page shows what follows.
  let leaving = null;
  // A Submit, Cancel or Later is on its way: a second click (of any of them) waits for the first
  // (a second Cancel on a slow link reached the desk after it, and read "cancelled elsewhere").
  let sending = false;
  // What the page says beside the buttons while a Submit or Cancel is on its way (said again
  // should the form be reloaded meanwhile), ``null`` once it is answered.
  let sendingSaid = null;
  // A press while another is on its way does nothing more, and says so where it was pressed
  // (a stopped desk can hold the first for long).
  function stillSending() {
    answerButton("The desk has not answered your last press yet: this page waits for its " +
      "answer and says what it is. Everything you entered stays here.");
  }
  // The form this page's answer or cancellation went to, and which showing of it (the live
  // stream's ``shown``): listed again under another showing, it was not recorded (writing the
  // agent's journal failed) and the form is back. { id, shown, text }: ``text`` says so.
  let sent = null;
  let lastDigest = null;
  const SIGNED_OUT = " Open the new link in another tab, then come back here: this page " +
    "keeps what you typed and saves it then.";
  const NOT_RECORDED = "The answer you sent was not recorded (the desk could not write it to " +
    "the agent's journal): the form is back with your answers; send it again.";
  const DRAFT_UNREACHABLE = "The desk cannot be reached (the network or the desk is down): " +
    "what you type is not saved yet. It stays on this page and is saved once the desk answers.";
  const SLOW = 5000;
  const NOT_YET = " the desk has not answered yet (the network is slow or holds the request). " +
    "This page waits for its answer and says what it is; everything you entered stays here.";
  const SENDING = "Sending…";
  const CANCELLING = "Cancelling…";
  const PUTTING_BACK = "Saving for later…";
  const CANCEL_NOT_RECORDED = "Your Cancel was not recorded (the desk could not write it to " +
    "the agent's journal), so the question is not cancelled: the form is back with your " +
    "answers; cancel it again, or answer it.";
  let cancelArmed = false;
  let saving = 0; // drafts sent and not yet answered
  let staleRev = null; // drafts changed elsewhere while the person was typing here
  // The id of a form whose draft the desk did not keep: a team desk refused it (another desk or
  // surface holds the form), or it never reached the desk (the network, an ended session). Its
  // text stays in the page, unsaved: nothing from the stream replaces it, leaving the page asks
  // first, and it is saved again as soon as the form is free (the live stream says so).
  let unsaved = null;
  // Why ``unsaved``: "held" (another desk holds the form: saved again once it is free),
  // "refused" (the desk cannot keep this text: saved again once the person changes it),
  // "unwritten" (the desk has it and could not write it yet: saved again with the next
  // change) or "lost" (never reached the desk: saved again once the live stream is back).
  let unsavedWhy = null;
  let refusedSaid = ""; // what the page said of the text the desk refused ("refused")
  let unwrittenWait = 1000; // ms until a draft the desk could not write yet is sent again
  let loads = 0; // form loads asked for (``loadMain``)
  let boards = 0; // board events received (``boardEvent``)
  // The drafts of the form on the page as the desk has them (loaded, or saved from here):
  // a field the person has not changed since is one the page may take from elsewhere.
  let base = null; // { id, drafts }
  // Revisions of drafts this page sent: the live stream may report an older one of them
  // after a newer save was answered; only a revision this page never made is news.
  const ownRevs = [];

  function form() { return document.getElementById("ask-form"); }
  function formId() { const f = form(); return f ? f.dataset.formId : null; }
  // ``urgent``: the page is cut off from the desk (out of reach, signed out), so what is typed
  // now is not saved: the line stays in view at the top while the person scrolls (on a phone
  // they type far below it, and read nothing of it otherwise). Anything said next ends it.
  // Its text may scroll inside it (desk.css gives it a third of the screen at most), so Tab
  // reaches it while it is kept in view: the keyboard scrolls it too.
  function say(text, urgent) {
    statusBox.textContent = text;
    const kept = urgent === true && text !== "";
    statusBox.classList.toggle("urgent", kept);
    if (kept) statusBox.tabIndex = 0; else statusBox.removeAttribute("tabindex");
  }
  // ``kept``: what the desk answered a draft (it did not keep it, or another desk is on the
  // form): said where the person types, however far above the buttons (desk.css keeps the line
  // at the bottom of the screen); Tab reaches it, as its text may scroll inside it.
  function showError(text, kept) {
    const box = document.getElementById("form-errors");
    if (!box) { say(text); return; }
    box.textContent = text;
    const shown = kept === true && text !== "";
    box.classList.toggle("kept", shown);
    if (shown) box.tabIndex = 0; else box.removeAttribute("tabindex");
  }
  function note(text) { const box = document.getElementById("form-note"); if (box) box.textContent = text; }
  // What a button answers: the sentence (just above the buttons) and the buttons in view, so
  // the person reads it and can press again where they pressed.
  function answerButton(text) {
    showError(text);
    const actions = form() && form().querySelector(".actions");
    if (actions) actions.scrollIntoView({ block: "nearest" });
  }
  // A text box runs in the direction of its text's first strong letter (HTML's dir=auto rule,
  // letters standing for strong characters). Set here, not with dir=auto on the box: Chromium
  // works that out again across the whole text at every change (a long paste froze the page).
  const RTL = new RegExp("[" + ["Hebrew", "Arabic", "Syriac", "Thaana", "Nko", "Samaritan",
    "Mandaic", "Adlam", "Hanifi_Rohingya", "Yezidi"].map(function (script) {
    return "\\p{Script=" + script + "}";
  }).join("") + "]", "u");
  function setDirection(box) {
    const first = /\p{L}/u.exec(box.value);
    box.dir = first && RTL.test(first[0]) ? "rtl" : "ltr";
  }
  function setDirections() {
    if (form()) form().querySelectorAll("textarea").forEach(setDirection);
  }

  function questionDraft(fs) {
    const custom = fs.querySelector("textarea.custom");
    const optionNotes = {};
    fs.querySelectorAll("textarea.option-note-text").forEach(function (t) {
      if (t.value.trim()) optionNotes[t.dataset.value] = t.value;
    });
    return {
      selected: Array.from(fs.querySelectorAll("input.choice"))
        .filter(function (i) { return i.checked; })
        .map(function (i) { return Number(i.value); }),
      custom: custom.value,
      customSelected: custom.dataset.selected === "true" && custom.value.trim() !== "",
      note: fs.querySelector("textarea.note").value,
      optionNotes: optionNotes,
      skipped: fs.querySelector("button.skip").getAttribute("aria-pressed") === "true",
    };
  }
  function drafts() {
    return Array.from(form().querySelectorAll("fieldset.question")).map(questionDraft);
  }
  function agreed() {
    setDirections();
    base = form() ? { id: formId(), drafts: drafts() } : null;
  }
  function dirty() {
    return drafts().some(function (d) {
      return d.skipped || d.selected.length || d.custom.trim() || d.note.trim() ||
        Object.keys(d.optionNotes).length;
    });
  }

  // ``keepalive`` (the last draft as the page goes away) lets the request outlive the page;
  // browsers take only small bodies that way, so it is not the default. A request that never
  // reached the desk (the network dropped, the desk is down) answers with status 0 and a
  // sentence, as the desk's refusals do, so every caller says so and lets the person try
  // again. A request refused for its session (401, or 403: the token of a session the browser
  // signed out of) is sent again once with the browser's session now, if it has a new one.
  async function post(path, body, keepalive) {
    const result = await send(path, body, keepalive);
    if ((result.status === 401 || result.status === 403) && await renew()) {
      return send(path, body, keepalive);
    }
    return result;
  }
  async function send(path, body, keepalive) {
    let response;
    try {
      response = await fetch(path, {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
        body: JSON.stringify(body),
        credentials: "same-origin",
        keepalive: keepalive === true,
      });
    } catch (e) {
      return { status: 0, data: { error: UNREACHABLE } };
    }
    // A proxy in front of the desk (TLS, a tunnel) answering for a desk that is away (or one
    // still starting): not reached either.
    if (AWAY.indexOf(response.status) >= 0) return { status: 0, data: { error: UNREACHABLE } };
    let data = {};
    try { data = await response.json(); } catch (e) { data = {}; }
    return { status: response.status, data: data };
  }

  // The browser's session now: a desk restart signs everyone out, and the person signs in
  // again with a new link, in another tab. Then this page takes the new session up (its
  // token, its live stream) and goes on, keeping what was typed here meanwhile: the stream's
  // first event saves it. True when there was something to take up.
  async function renew() {
    let response;
    try {
      response = await fetch("/session", { credentials: "same-origin" });
    } catch (e) {
      return false;
    }
    if (response.status !== 200) return false;
    let data = {};
    try { data = await response.json(); } catch (e) { return false; }
    const fresh = data.csrf !== csrf;
    csrf = data.csrf;
    document.querySelector('#sign-out input[name="csrf"]').value = csrf; // Sign out's too
    const closed = stream.readyState === EventSource.CLOSED;
    if (closed) connect();
    if (closed || fresh) say("");
    return fresh;
  }
  // Coming back to the page (after signing in in another tab) takes up a new session.
  function backToPage() {
    if (document.visibilityState === "visible" && stream.readyState === EventSource.CLOSED) renew();
  }
  window.addEventListener("focus", backToPage);
  document.addEventListener("visibilitychange", backToPage);

  // What the person typed and the desk never kept (refused, lost, or still on its way or due
  // when the form left), one line a question. Only what this page's person typed or chose:
  // what the page took from elsewhere (another person's choice, the terminal's note, merged
  // into the fields not changed here) is what the desk had, and was theirs to send.
  function notSent() {
    if (!form() || (unsaved !== formId() && !unsavedHere())) return "";
    unsaved = null;
    const had = base && base.id === formId() ? base.drafts : null;
    const lines = Array.from(form().querySelectorAll("fieldset.question")).map(function (fs, q) {
      return ownText(fs, questionDraft(fs), had ? had[q] : null);
    }).filter(function (line) { return line !== ""; });
    return lines.length ? " What you typed here was not sent: " + lines.join("; ") : "";
  }
  // Question ``fs``'s draft ``mine`` where it differs from ``had``, the draft the desk had
  // (``null``: none), in words: "Label: choices, “text”, note “text”"; "" when nothing differs
  // but what was cleared (a cleared box loses nothing).
  function ownText(fs, mine, had) {
    const same = function (a, b) { return JSON.stringify(a) === JSON.stringify(b); };
    const was = had || { selected: [], custom: "", customSelected: false, note: "",
      optionNotes: {}, skipped: false };
    const parts = [];
    if (mine.skipped && !was.skipped) parts.push("skipped");
    if (!same([mine.selected, mine.customSelected], [was.selected, was.customSelected])) {
      mine.selected.forEach(function (i) { parts.push(choiceLabel(fs, i)); });
    }
    if ((mine.custom.trim() && mine.custom !== was.custom) ||
        (mine.customSelected && !was.customSelected)) {
      parts.push("“" + mine.custom.trim() + "”");
    }
    if (mine.note.trim() && mine.note !== was.note) parts.push("note “" + mine.note.trim() + "”");
    Object.keys(mine.optionNotes).forEach(function (value) {
      if (mine.optionNotes[value] === was.optionNotes[value]) return;
      const box = fs.querySelector('input.choice[data-value="' + CSS.escape(value) + '"]');
      parts.push("note on " + choiceLabel(fs, Number(box.value)) + " “" +
        mine.optionNotes[value].trim() + "”");
    });
    if (!parts.length) return "";
    return questionLabel(fs) + ": " + parts.join(", ");
  }
  // What the page says of the form on it once it left: ``text``, the desk's sentence (each
  // names the form: the page says it above the next one), else the form's own "answered
  // elsewhere" (its ``data-gone``) when the desk does not know what became of it.
  function leftSaying(text) {
    return (text || (form() ? form().dataset.gone : "")) + notSent();
  }
  function gone(data) {
    say(leftSaying(data.code === "gone" ? "" : data.error));
    loadMain(null);
  }
  function heldElsewhere(data) {
    // This desk's terminal holds it: its person's answer from here goes through, so a note.
    if (data.code === "here") { showError(""); note(data.error); return; }
    showError((data.error || "Another desk is answering this form.") +
      " What you typed stays on this page and is saved as soon as the form is free.", true);
  }

  async function saveNow(leavingPage) {
    clearTimeout(saveTimer);
    saveTimer = null;
    const id = formId();
    if (!id) return;
    saving += 1;
    let result;
    const sent = drafts(), seen = boards;
    try {
      result = await post("/api/draft", { form: id, drafts: sent }, leavingPage === true);
    } finally {
      saving -= 1;
    }
    if (result.status !== 0 && statusBox.textContent === DRAFT_UNREACHABLE) say(""); // reached
    if (result.status === 200) {
      ownRevs.push(result.data.rev);
      if (ownRevs.length > 64) ownRevs.shift();
      if (formId() === id) { form().dataset.rev = result.data.rev; base = { id: id, drafts: sent }; }
      if (unsaved === id) {
        unsaved = null; unwrittenWait = 1000;
        showError(""); note("");
        say(unsavedWhy === "held" ? "Your draft is saved: you are on this form now." : "Your draft is saved.");
      }
    }
    // Not kept, and the text is nowhere else: the network lost it, or the session ended (a
    // desk restart signs everyone out; leaving to sign in again asks first).
    if ((result.status === 0 || result.status === 401) && formId() === id) { unsaved = id; unsavedWhy = "lost"; }
    // Said where the person types, however far down (the live stream may not have noticed:
    // a network that drops can leave it open and silent for long).
    if (result.status === 0 && formId() === id) say(DRAFT_UNREACHABLE, true);
    if (result.status === 423 && formId() === id) { unsaved = id; unsavedWhy = "held"; heldElsewhere(result.data); }
    else if (result.status === 422 && result.data.code === "unwritten" && formId() === id) {
      // The desk took the draft but could not write it to the agent's journal yet (a full
      // disk): it keeps it and writes it by itself; nothing in the text is to change, and
      // Later may still put the form back. Sent again now and then (longer waits each time,
      // while the form is on the page), the answer that it is written ends the sentence.
      unsaved = id;
      unsavedWhy = "unwritten";
      showError(result.data.error + " What you typed stays on this page too.", true);
      const wait = unwrittenWait; clearTimeout(saveTimer); unwrittenWait = Math.min(wait * 2, 8000);
      saveTimer = setTimeout(function () { saveTimer = null; if (formId() === id) saveNow(); }, wait);
    }
    else if ((result.status === 400 || result.status === 413 ||
              (result.status === 422 && result.data.code === "refused")) && formId() === id) {
      // The desk cannot keep this text (over its limit for a box or for a whole request; a
      // team desk's store refusing it): nothing from the stream replaces it, leaving the
      // page asks first, and the next change saves it again.
      unsaved = id;
      unsavedWhy = "refused";
      refusedSaid = refusal(result, "The desk could not keep this draft.") +
        " What you typed stays on this page; it is saved once you change it.";
      showError(refusedSaid, true);
    }
    else if (result.status === 409 && formId() === id) gone(result.data);
    else if (result.status === 401) showError((result.data.error || "Not signed in.") + SIGNED_OUT, true);
    else if (result.status !== 200 && result.status !== 409 && result.status !== 423) showError(result.data.error || "The draft was not saved.", true);
    // Board events while it was on its way were read with a save in flight, which held back a
    // save of text not kept (the form freed meanwhile): followed again now (else never sent).
    if (boards !== seen && unsaved === id && formId() === id && !saving) follow(lastDigest);
  }
  // What a refused request says: the desk's sentence; for a request over the desk's size
  // limit (413, refused unread, so the desk cannot say which box), the page names the box
  // with the longest text and its length, as the desk does for one box over its limit.
  function refusal(result, otherwise) {
    const said = result.data.error || otherwise;
    if (result.status !== 413 || !form()) return said;
    let longest = null;
    form().querySelectorAll("fieldset.question").forEach(function (fs, q) {
      fs.querySelectorAll("textarea").forEach(function (box) {
        // Characters, as the desk counts them (a pair of UTF-16 surrogates is one).
        const pairs = box.value.match(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g);
        const length = box.value.length - (pairs ? pairs.length : 0);
        if (!longest || length > longest.length) longest = { box: box, q: q, length: length };
      });
    });
    if (!longest || !longest.length) return said;
    const label = document.querySelector('label[for="' + longest.box.id + '"]').textContent.trim();
    return "The text in question " + (longest.q + 1) + "'s “" + label + "” box is " +
      longest.length.toLocaleString("en-US") + " characters long. " + said + " Shorten it.";
  }
  function changed(fs) {
    cancelArmed = false;
    const review = document.getElementById("review");
    if (review) review.hidden = true;
    if (fs) {
      const skip = fs.querySelector("button.skip");
      const d = questionDraft(fs);
      if (skip.getAttribute("aria-pressed") === "true" &&
          (d.selected.length || d.customSelected || d.note.trim() || Object.keys(d.optionNotes).length)) {
        skip.setAttribute("aria-pressed", "false");
        fs.classList.remove("skipped");
      }
    }
    clearTimeout(saveTimer);
    saveTimer = setTimeout(saveNow, SAVE_DELAY);
  }

  function questionLabel(fs) {
    return fs.querySelector("legend").textContent.replace(/^\s*\d+\.\s*/, "").trim();
  }
  // Option ``index`` of question ``fs``, as its row names it.
  function choiceLabel(fs, index) {
    const input = fs.querySelectorAll("input.choice")[index];
    return document.querySelector('label[for="' + input.id + '"] .olabel').textContent;
  }
  function reviewText(fs, d) {
    const label = questionLabel(fs);
    if (d.skipped) return label + ": skipped";
    const parts = d.selected.map(function (i) { return choiceLabel(fs, i); });
    if (d.customSelected) parts.push("“" + d.custom.trim() + "”");
    let text = label + ": " + (parts.length ? parts.join(", ") : "not answered");
    if (d.note.trim()) text += " (note: " + d.note.trim() + ")";
    const optionNotes = Object.keys(d.optionNotes).length;
    if (optionNotes) text += " (" + optionNotes + " option note" + (optionNotes > 1 ? "s" : "") + ")";
    return text;
  }
  // Where the focus was when the review was shown: Escape on the review goes back there.
  let beforeReview = null;
  function showReview() {
    beforeReview = document.activeElement;
    const list = document.getElementById("review-list");
    list.replaceChildren();
    form().querySelectorAll("fieldset.question").forEach(function (fs) {
      const item = document.createElement("li");
      item.dir = "auto"; // a line in a question's own direction, as the question itself
      item.textContent = reviewText(fs, questionDraft(fs));
      list.appendChild(item);
    });
    const review = document.getElementById("review");
    review.hidden = false;
    // The review from its heading down to the buttons in view, the least scroll that does
    // it (on a phone, focusing the heading alone left the answers and Submit below the
    // fold); a review taller than the screen starts at its heading. The buttons stay at the
    // bottom of the screen (desk.css), so the review itself is brought above them: above
    // the bar as it is now (desk.css keeps room for its height, a sentence in it counted).
    const heading = document.getElementById("review-heading");
    heading.focus({ preventScroll: true });
    review.scrollIntoView({ block: "nearest" });
    if (heading.getBoundingClientRect().top < 0) heading.scrollIntoView({ block: "start" });
  }

  async function submit() {
    const review = document.getElementById("review");
    if (review.hidden) { showReview(); return; }
    const id = formId();
    if (sending) { stillSending(); return; } // a second click waits for the first
    // The answer carries the drafts; a draft save still due is made only if it is refused.
    const due = saveTimer !== null;
    clearTimeout(saveTimer);
    saveTimer = null;
    leaving = id;
    const done = onItsWay(id, SENDING);
    const result = await post("/api/submit", { form: id, drafts: drafts() });
    done();
    if (result.status === 200) {
      unsaved = null;
      say("Sent to the agent.");
      sent = { id: id, shown: result.data.shown, text: NOT_RECORDED };
      if (!cameBack(lastDigest) && formId() === id) loadMain(null, id);
      return;
    }
    leaving = null;
    if (due && formId() === id) saveNow();
    if (result.status === 409) gone(result.data);
    else if (result.status === 401) answerButton((result.data.error || "Not signed in.") + SIGNED_OUT);
    else answerButton(refusal(result, "The answer was not accepted."));
  }
  // Submit, Cancel or Later on its way: said at once beside the buttons, and in more words once
  // the desk has not answered for a while (a link that holds the request, a phone in a tunnel,
  // a team desk waiting for its store), where the page otherwise showed nothing and took no
  // second click. The returned function ends it, clearing the words if no answer replaced them.
  function onItsWay(id, now) {
    sending = true;
    sendingSaid = now;
    answerButton(now);
    const slow = setTimeout(function () {
      if (sending && formId() === id) { sendingSaid = now + NOT_YET; answerButton(sendingSaid); }
    }, SLOW);
    return function () {
      clearTimeout(slow);
      const box = document.getElementById("form-errors");
      if (box && box.textContent === sendingSaid) box.textContent = "";
      sending = false;
      sendingSaid = null;
    };
  }
  async function cancelForm() {
    if (sending) { stillSending(); return; }
    if (dirty() && !cancelArmed) {
      cancelArmed = true;
      answerButton("Press Cancel again to discard these answers and cancel the question.");
      return;
    }
    const id = formId();
    leaving = id;
    const done = onItsWay(id, CANCELLING);
    const result = await post("/api/cancel", { form: id });
    done();
    if (result.status === 200) {
      say("Cancelled.");
      sent = { id: id, shown: result.data.shown, text: CANCEL_NOT_RECORDED };
      if (!cameBack(lastDigest) && formId() === id) loadMain(null, id);
      return;
    }
    leaving = null;
    if (result.status === 409) gone(result.data);
    else answerButton(result.data.error || "Not cancelled.");
  }
  // The page holds text the desk has not kept: a save is due, or the drafts differ from the
  // last ones the desk and the page agreed on (a save refused while another desk holds the
  // form, or lost).
  function unsavedHere() {
    return saveTimer !== null || !base || base.id !== formId() ||
      JSON.stringify(drafts()) !== JSON.stringify(base.drafts);
  }
  async function later() {
    if (sending) { stillSending(); return; }
    // From the draft saved first on: said at once, and a second press waits for this one.
    const done = onItsWay(formId(), PUTTING_BACK);
    try { await putBack(); } finally { done(); }
  }
  async function putBack() {
    const id = formId();
    // Only text the desk does not have yet: on a team desk a save claims the form, and on a
    // form someone else holds a refused save would claim it for this page once they let it
    // go, although nothing was typed here.
    if (unsavedHere()) await saveNow();
    // Text the desk refused to keep would leave the page with the form, the desk never having
    // had it: the form stays until the text is one the desk keeps.
    if (unsaved === id && unsavedWhy === "refused" && formId() === id) {
      answerButton(refusedSaid + " Not put back for later: what you typed here would be lost " +
        "with it. Change it so the desk keeps it, then press Later again.");
      return;
    }
    leaving = id;
    const result = await post("/api/later", { form: id });
    if (result.status === 200) { say("Saved for later: this agent's questions wait their turn."); return; }
    leaving = null;
    if (result.status === 409) gone(result.data);
    else answerButton(result.data.error || "Not deferred.");
  }

  // ``skip``: a form this page just answered, which the board may still show for a moment.
  // Loads may overlap (live updates come quickly): only the last one asked for is shown, so
  // an older answer arriving late never replaces a newer one.
  async function loadMain(id, skip) {
    const mine = ++loads;
    const seen = boards;
    const params = new URLSearchParams();
    if (id) params.set("form", id);
    if (skip) params.set("skip", skip);
    const url = "/fragment/form?" + params.toString();
    const response = await fetch(url, { credentials: "same-origin" });
    if (response.status !== 200) return;
    const html = await response.text();
    if (mine !== loads) return;
    const hadFocus = slot.contains(document.activeElement);
    const before = formId();
    slot.innerHTML = html; // server-rendered, autoescaped
    cancelArmed = false;
    agreed();
    if (sendingSaid !== null && formId() === leaving) showError(sendingSaid); // still on its way
    // Another form in the place of the one shown: what the status line says of it (answered
    // elsewhere, sent) is brought on screen, where a person scrolled down a long form on a
    // phone would otherwise read another form with no word.
    const told = formId() !== before && statusBox.textContent !== "";
    if (told) statusBox.scrollIntoView({ block: "nearest" });
    // The form this page sent is gone from the page, or back in it after all (put back with
    // Later, shown again): from now on its leaving is news. Only while its Submit is on its
    // way is a reload of it (drafts changed elsewhere) still the form being sent.
    if (!sending || formId() !== leaving) leaving = null;
    // The focus was on what was just replaced: it goes to the new heading (just under the
    // status), also when another load follows this one at once (below), which finds it there
    // and does the same; else it fell to the page itself, and Tab started again at the top.
    const heading = slot.querySelector("h1");
    if (heading && hadFocus) heading.focus({ preventScroll: told });
    // The board changed while this load was on its way (it drops a form for a moment before
    // showing it again), and its events were read against the page as it was: the last one
    // is followed again against the page as it is now.
    if (boards !== seen) { follow(lastDigest, skip); return; }
    refreshQueue();
  }
  async function refreshQueue() {
    const id = formId();
    const response = await fetch("/fragment/queue" + (id ? "?form=" + encodeURIComponent(id) : ""),
      { credentials: "same-origin" });
    if (response.status === 200) queueBox.innerHTML = await response.text();
  }

  // -- events ---------------------------------------------------------------------------
  slot.addEventListener("input", function (event) {
    const target = event.target;
    const fs = target.closest("fieldset.question");
    if (!fs) return;
    if (target.tagName === "TEXTAREA") setDirection(target);
    if (target.classList.contains("custom")) {
      const has = target.value.trim() !== "";
      target.dataset.selected = has ? "true" : "false";
      if (has && fs.dataset.multi !== "true") {
        fs.querySelectorAll("input.choice").forEach(function (i) { i.checked = false; });
      }
    }
    changed(fs);
  });
  slot.addEventListener("change", function (event) {
    const target = event.target;
    const fs = target.closest("fieldset.question");
    if (!fs || !target.classList.contains("choice")) return;
    if (fs.dataset.multi !== "true" && target.checked) {
      fs.querySelector("textarea.custom").dataset.selected = "false";
    }
    changed(fs);
  });
  slot.addEventListener("click", function (event) {
    const button = event.target.closest("button");
    if (!button) return;
    if (button.classList.contains("skip")) {
      const fs = button.closest("fieldset.question");
      const on = button.getAttribute("aria-pressed") !== "true";
      button.setAttribute("aria-pressed", on ? "true" : "false");
      fs.classList.toggle("skipped", on);
      if (on) {
        fs.querySelectorAll("input.choice").forEach(function (i) { i.checked = false; });
        fs.querySelector("textarea.custom").dataset.selected = "false";
      }
      changed(null);
    } else if (button.classList.contains("option-note-toggle")) {
      const open = button.getAttribute("aria-expanded") !== "true";
      button.setAttribute("aria-expanded", open ? "true" : "false");
      const box = document.getElementById(button.getAttribute("aria-controls"));
      box.hidden = !open;
      if (open) box.querySelector("textarea").focus();
    } else if (button.id === "cancel") {
      cancelForm();
    } else if (button.id === "later") {
      later();
    }
  });
  slot.addEventListener("submit", function (event) {
    event.preventDefault();
    submit();
  });
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const target = event.target;
    // Enter on an option shows the review and moves the focus to it; Enter there sends it,
    // as Enter twice does on the terminal.
    if (event.key === "Enter" && target.id === "review-heading") {
      event.preventDefault();
      submit();
      return;
    }
    // Escape on the review goes back to the answers, changing none of them (the way back
    // was otherwise Shift+Tab through the form); the focus returns where it was.
    const review = document.getElementById("review");
    if (event.key === "Escape" && review && !review.hidden && review.contains(target)) {
      event.preventDefault();
      review.hidden = true;
      const back = beforeReview && beforeReview.isConnected && form() && form().contains(beforeReview)
        ? beforeReview : form().querySelector("fieldset.question input, fieldset.question textarea");
      if (back) back.focus();
      return;
    }
  });
  // Sign out (the header's form, signout.js): a draft still due, or one that never reached
  // the desk, is saved first, with its session (after the sign-out there is none).
  document.addEventListener("desk:sign-out", function (event) {
    if (saveTimer !== null || lostHere()) event.detail.waits.push(saveNow());
  });
  function lostHere() { return unsaved !== null && unsaved === formId() && unsavedWhy === "lost"; }
  window.addEventListener("pagehide", function () { if (saveTimer) saveNow(true); });
  // Online again: a save the network lost is made (a blip the stream outlived brings no board event).
  window.addEventListener("online", function () { if (lostHere() && !saving) saveNow(); });
  window.addEventListener("beforeunload", function (event) {
    if (unsaved && unsaved === formId()) { event.preventDefault(); event.returnValue = ""; }
  });
  // Drafts edited in another view (the terminal, another page) are shown here once the
  // person is not in the middle of typing on this one.
  function typingHere() {
    return saveTimer !== null || saving > 0 || unsaved !== null ||
      (form() && form().contains(document.activeElement) &&
       document.activeElement.tagName === "TEXTAREA");
  }
  function syncDrafts(rev) {
    const f = form();
    if (!f || f.dataset.rev === rev || ownRevs.indexOf(rev) >= 0) { staleRev = null; return; }
    if (typingHere()) { staleRev = rev; mergeDrafts(f.dataset.formId); return; }
    staleRev = null;
    const focused = document.activeElement && document.activeElement.id;
    loadMain(f.dataset.formId).then(function () {
      const again = focused && document.getElementById(focused);
      if (again) again.focus();
    });
  }
  // While the person types here, drafts changed elsewhere (another device) are taken into the
  // fields the person has not changed since the page last agreed with the desk; the others keep
  // what was typed here. So the draft this page saves next carries both, and never sends back,
  // as its own, what another device has replaced.
  async function mergeDrafts(id) {
    const response = await fetch("/fragment/form?form=" + encodeURIComponent(id),
      { credentials: "same-origin" });
    if (response.status !== 200) return;
    const there = new DOMParser().parseFromString(await response.text(), "text/html")
      .getElementById("ask-form"); // inert: nothing in it runs
    const f = form();
    if (!there || !f || there.dataset.formId !== id || formId() !== id || !base || base.id !== id) return;
    const theirs = Array.from(there.querySelectorAll("fieldset.question")).map(questionDraft);
    let took = false;
    f.querySelectorAll("fieldset.question").forEach(function (fs, q) {
      took = takeTheirs(fs, theirs[q], base.drafts[q]) || took;
    });
    base = { id: id, drafts: theirs };
    f.dataset.rev = there.dataset.rev;
    staleRev = null;
    if (took) document.getElementById("review").hidden = true; // it showed the answers before
    // A save on its way carries what was here before: save again once it is in.
    if (took && saving > 0) { clearTimeout(saveTimer); saveTimer = setTimeout(saveNow, SAVE_DELAY); }
  }
  function takeTheirs(fs, theirs, was) {
    const mine = questionDraft(fs);
    const same = function (a, b) { return JSON.stringify(a) === JSON.stringify(b); };
    let took = false;
    const custom = fs.querySelector("textarea.custom");
    if (same([mine.selected, mine.customSelected], [was.selected, was.customSelected]) &&
        !same([mine.selected, mine.customSelected], [theirs.selected, theirs.customSelected])) {
      fs.querySelectorAll("input.choice").forEach(function (i) {
        i.checked = theirs.selected.indexOf(Number(i.value)) >= 0;
      });
      custom.dataset.selected = theirs.customSelected ? "true" : "false";
      took = true;
    }
    function text(box, now, before, then) {
      if (now !== before || now === then) return;
      box.value = then;
      setDirection(box);
      took = true;
    }
    text(custom, mine.custom, was.custom, theirs.custom);
    text(fs.querySelector("textarea.note"), mine.note, was.note, theirs.note);
    fs.querySelectorAll("textarea.option-note-text").forEach(function (box) {
      const value = box.dataset.value;
      const then = theirs.optionNotes[value] || "";
      text(box, mine.optionNotes[value] || "", was.optionNotes[value] || "", then);
      if (then.trim()) {
        const toggle = fs.querySelector('[aria-controls="' + box.parentNode.id + '"]');
        toggle.setAttribute("aria-expanded", "true");
        box.parentNode.hidden = false;
      }
    });
    if (mine.skipped === was.skipped && mine.skipped !== theirs.skipped) {
      fs.querySelector("button.skip").setAttribute("aria-pressed", theirs.skipped ? "true" : "false");
      fs.classList.toggle("skipped", theirs.skipped);
      took = true;
    }
    return took;
  }
  slot.addEventListener("focusout", function () {
    if (staleRev !== null) setTimeout(function () { if (staleRev !== null) syncDrafts(staleRev); }, 0);
  });

  // -- the live stream --------------------------------------------------------------------
  let stream = null;
  const LOST = "The live connection to the desk is lost (the network, or the desk stopped): " +
    "this page may not be up to date. It reconnects by itself; what you type meanwhile stays " +
    "here and is saved then.";
  function streamError() {
    // The browser reconnects by itself unless the stream was answered with an error: the
    // desk refused it (signed out), or a proxy in front of the desk answered for a desk that
    // is away (TLS, a tunnel). The session says which.
    if (stream.readyState === EventSource.CLOSED) whyClosed();
    else say(LOST, true);
  }
  const RECONNECT = 2000; // ms before a stream a proxy answered for is opened again
  async function whyClosed() {
    let status = 0;
    try {
      status = (await fetch("/session", { credentials: "same-origin" })).status;
    } catch (e) {
      status = 0;
    }
    if (status === 401 || status === 403) {
      document.dispatchEvent(new Event("desk:reachable")); // it answered, refusing
      const text = "This page is signed out of the desk (Sign out in another tab, or a desk " +
        "restart, which signs everyone out): " +
        "open a new sign-in link (pi-agent-ask desk login-url) in another tab, then come back " +
        "here. This page keeps what you typed and saves it then.";
      say(text, true);
      // Where the person last read that the desk could not be reached: what holds now.
      const box = document.getElementById("form-errors");
      if (box && box.textContent === UNREACHABLE) box.textContent = text;
      return;
    }
    // Away (or signed in after all): the stream is opened again after a while, as the
    // browser does for one the network dropped.
    if (status !== 200) say(LOST, true);
    setTimeout(function () { if (stream.readyState === EventSource.CLOSED) connect(); }, RECONNECT);
  }
  function streamOpen() {
    document.dispatchEvent(new Event("desk:reachable"));
    if (statusBox.textContent === LOST) say("");
  }
  // Whether the form this page answered is listed again under another showing (see
  // ``sent``); if so the page says so and shows it again.
  function cameBack(digest) {
    if (!sent || !digest) return false;
    // Not listed means nothing yet: the board drops a form for a moment before showing it
    // again. A recorded answer's form never comes back, so ``sent`` may stay.
    const listed = digest.forms.filter(function (f) { return f.id === sent.id; })[0];
    if (!listed || listed.shown === sent.shown) return false;
    const id = sent.id;
    const text = sent.text;
    sent = null;
    leaving = null;
    say(text);
    // Once the form is back, the sentence is read where the person pressed (beside the
    // buttons, in view): on a phone the status line is a long scroll away, above the form.
    loadMain(id).then(function () {
      if (formId() !== id || statusBox.textContent !== text) return;
      say("");
      answerButton(text);
    });
    return true;
  }
  function boardEvent(event) {
    boards += 1;
    lastDigest = JSON.parse(event.data);
    // For the page's other parts (notice.js: the desk's notices).
    document.dispatchEvent(new CustomEvent("desk:board", { detail: lastDigest }));
    follow(lastDigest);
  }
  // The page brought in line with the board's ``digest`` (``skip``: as ``loadMain``'s, a form
  // this page just answered, which the digest may still list).
  function follow(digest, skip) {
    if (cameBack(digest)) return;
    const ids = digest.forms.map(function (f) { return f.id; })
      .filter(function (listed) { return listed !== skip; });
    const id = formId();
    if (id && ids.indexOf(id) < 0) {
      // Until the next form is on the page (a load takes a while on a slow link, and the
      // board may change again meanwhile), the form shown is still the one this page sent.
      if (leaving !== id) say(leftSaying(digest.ended[id]));
      loadMain(null, skip);
    } else if (!id && ids.length) {
      loadMain(null, skip);
    } else {
      refreshQueue();
      if (id) {
        const more = form().querySelector(".more-waiting");
        more.firstElementChild.textContent = digest.behind + " more waiting";
        more.hidden = !digest.behind;
      }
      const mine = digest.forms.filter(function (f) { return f.id === id; })[0];
      if (mine) {
        const f = form();
        f.querySelector(".when-blocked").hidden = !mine.blocked;
        f.querySelector(".when-free").hidden = mine.blocked;
        const held = f.querySelector(".held-by");
        held.textContent = mine.held || "";
        held.hidden = !mine.held;
        // Free now, or reachable again: claim it, keep the text. Back (the network, a new
        // sign-in) on a form taken meanwhile, the desk's refusal says by whom (a note when it is
        // this desk's terminal) and the text waits for it to be free. (Not for text the desk
        // refused or could not write: each save would bring another board event.)
        if (unsaved === id && (unsavedWhy === "lost" || (unsavedWhy === "held" && !mine.held)) && !saving) saveNow();
        else syncDrafts(mine.rev);
      }
    }
  }
  function connect() {
    stream = new EventSource("/events");
    stream.addEventListener("error", streamError);
    stream.addEventListener("open", streamOpen);
    stream.addEventListener("board", boardEvent);
  }
  agreed();
  connect();
})();
