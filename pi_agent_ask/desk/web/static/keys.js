// pi-agent-ask web desk: the number keys, as on the terminal. A digit chooses a row of the
// question that has the focus: its options, then Type your own. A row chosen here is changed
// as a click changes it (a "change" event on the option, which desk.js saves as a draft).
"use strict";
(function () {
  // From 10 on a row is two digits typed in a row (1 then 2: row 12); so on a question with
  // ten rows or more, a digit that can start one waits ``JUMP_TIMEOUT`` ms for a second one
  // (the terminal's wait), else it acts at once. While it waits, the question's key hint
  // says what the next key does (a second digit, Enter: the digit's own row at once, Esc:
  // clear it), in the terminal's words, rendered by the server (_form.html).
  const JUMP_TIMEOUT = 600;
  let held = null; // { fs, digit, timer }: a first digit waiting for a second

  let told = null; // what the page said of two digits past the last row, until the next digit

  function form() { return document.getElementById("ask-form"); }

  // Said beside the buttons (role=status), as the terminal says it above its key hints.
  function tell(text) {
    const box = document.getElementById("form-note");
    if (!box) return;
    if (text === null) { if (told !== null && box.textContent === told) box.textContent = ""; }
    else box.textContent = text;
    told = text;
  }
  function rows(fs) { return fs.querySelectorAll("input.choice").length + 1; }
  // What the page says of ``number``, past the question's last row.
  function noRow(fs, number) {
    const said = fs.querySelector('.past [data-number="' + number + '"]');
    return said ? said.textContent : null;
  }
  // The question's key hint while ``digit`` waits (``null``: none waits).
  function showHeld(fs, digit) {
    const keys = fs.querySelector(".keys");
    if (!keys) return;
    const text = digit === null ? null : keys.querySelector('.held-text[data-digit="' + digit + '"]');
    keys.classList.toggle("holding", text !== null);
    keys.querySelector(".held").textContent = text ? text.textContent : "";
  }

  function digitIn(event, fs, digit) {
    if (digit === 0) return; // no row 0; 0 is only ever a second digit
    event.preventDefault();
    if (digit * 10 > rows(fs)) { chooseRow(fs, digit); return; }
    held = { fs: fs, digit: digit, timer: setTimeout(letGo, JUMP_TIMEOUT) };
    showHeld(fs, digit);
  }

  // The digit that waits, waiting no more.
  function release() {
    const first = held;
    clearTimeout(first.timer);
    held = null;
    showHeld(first.fs, null);
    return first;
  }
  function letGo() {
    if (!held) return;
    const first = release();
    if (first.fs.isConnected) chooseRow(first.fs, first.digit);
  }

  function chooseRow(fs, number) {
    const choices = fs.querySelectorAll("input.choice");
    if (number === choices.length + 1) { fs.querySelector("textarea.custom").focus(); return; }
    const choice = choices[number - 1];
    if (!choice) { tell(noRow(fs, number)); return; } // as the terminal: never silence
    const multi = fs.dataset.multi === "true";
    choice.checked = multi ? !choice.checked : true;
    choice.dispatchEvent(new Event("change", { bubbles: true }));
    // One answer chosen: on to the next question (or Submit), as on the terminal.
    const next = multi ? null
      : fs.nextElementSibling && fs.nextElementSibling.matches("fieldset.question")
        ? fs.nextElementSibling.querySelector("input.choice") : document.getElementById("submit");
    (next || choice).focus();
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const target = event.target;
    const isDigit = /^[0-9]$/.test(event.key);
    const typing = target.matches && target.matches("textarea, input[type=search], input[type=text], select");
    if (held && !isDigit) {
      // Enter: the digit's own row at once (not the review); Esc: the digit is dropped. Any
      // other key: the digit acts first, as typed, then the key.
      if (!typing && (event.key === "Enter" || event.key === "Escape")) {
        event.preventDefault();
        if (event.key === "Escape") release(); else letGo();
        return;
      }
      letGo();
    }
    if (typing) return;
    if (!isDigit || !form()) return;
    // The question that has the focus; with the focus nowhere (the page itself), the first.
    // Elsewhere (the buttons, the review, the agents) a digit chooses nothing: on the
    // terminal's review 1 means Submit, and here it must not change an answer unseen.
    const fs = (target.closest && target.closest("fieldset.question")) ||
      (target === document.body ? form().querySelector("fieldset.question") : null);
    if (!fs) return;
    const digit = Number(event.key);
    tell(null);
    if (held) {
      const first = release();
      const number = first.digit * 10 + digit;
      if (first.fs === fs && number <= rows(fs)) {
        event.preventDefault();
        chooseRow(fs, number);
        return;
      }
      if (first.fs === fs) {
        // Past the last row (1 then 5 of 13 rows): nothing is chosen, and the page says so,
        // as the terminal does; never row 1 and then a 5 of its own on the next question.
        event.preventDefault();
        tell(noRow(fs, number));
        return;
      }
      // The focus went to another question meanwhile: the first digit acts alone, and this
      // one is a key of its own, in the question that has the focus now.
      chooseRow(first.fs, first.digit);
      const now = document.activeElement;
      const there = now && now.closest && now.closest("fieldset.question");
      if (there) digitIn(event, there, digit);
      else event.preventDefault();
      return;
    }
    digitIn(event, fs, digit);
  });
})();
