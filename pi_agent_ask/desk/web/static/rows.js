// pi-agent-ask web desk: the keyboard path through a question's options. The options are one
// Tab stop (a radio group is one by itself; a multi-select question's checkboxes are made one
// here, the arrow keys moving between them as they do between radios, Space toggling), and
// after them one note button: the note of the option in focus. The other note buttons are out
// of the Tab order only; a tap, a click and a screen reader's reading still find each. So Tab
// goes from thirty options to the next question in a few presses (it went through thirty
// "Note on …" buttons), and the note of any option is one Tab from that option.
// The page renders the first chosen option (else the first) as the one in focus.
"use strict";
(function () {
  const STEPS = { ArrowDown: 1, ArrowRight: 1, ArrowUp: -1, ArrowLeft: -1 };

  function inFocus(fs, option) {
    fs.querySelectorAll("div.option").forEach(function (row) {
      const here = row === option;
      row.querySelector("button.option-note-toggle").tabIndex = here ? 0 : -1;
      const choice = row.querySelector("input.choice");
      if (choice.type === "checkbox") choice.tabIndex = here ? 0 : -1;
    });
  }

  document.addEventListener("focusin", function (event) {
    const target = event.target;
    if (!target.matches || !target.matches("input.choice")) return;
    const fs = target.closest("fieldset.question");
    if (fs) inFocus(fs, target.closest("div.option"));
  });

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || event.shiftKey) return;
    const target = event.target;
    if (!target.matches || !target.matches("input.choice[type=checkbox]")) return;
    const boxes = Array.from(target.closest("fieldset.question").querySelectorAll("input.choice"));
    const at = boxes.indexOf(target);
    let next = null;
    if (event.key in STEPS) next = boxes[(at + STEPS[event.key] + boxes.length) % boxes.length];
    else if (event.key === "Home") next = boxes[0];
    else if (event.key === "End") next = boxes[boxes.length - 1];
    if (!next) return;
    event.preventDefault();
    next.focus();
  });
})();
