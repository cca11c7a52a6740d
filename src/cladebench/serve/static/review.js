// cladebench serve, review area: pick a taxon by typing, save, go on to the next row, all from the keyboard.
// No field has the focus when a page opens, so the shortcuts work at once; / enters the taxon box, Esc leaves it.
// Every name is put on the page as text (textContent), never as markup.
"use strict";
(function () {
  const form = document.getElementById("review-form");
  if (!form) {  // the queue: Enter opens the next row to review
    const start = document.getElementById("start");
    if (start) start.focus({preventScroll: true});
    return;
  }
  const blind = form.hasAttribute("data-blind"), hidden = form.hasAttribute("data-hidden");
  const onward = document.getElementById("next-unreviewed");
  if (onward) onward.focus({preventScroll: true});
  const input = document.getElementById("taxon");
  const list = document.getElementById("taxa");
  const picked = document.getElementById("picked");
  const save = document.getElementById("save");
  const message = document.getElementById("message");
  let matches = [], active = -1, choice = null, timer = null, asked = 0, busy = false;

  function say(text, bad) { message.textContent = text; message.classList.toggle("bad", !!bad); }
  function close() { list.hidden = true; list.replaceChildren(); matches = []; active = -1; }
  function pick(match) {
    choice = match;
    input.value = match.name;
    picked.textContent = match.rank ? "Picked: " + match.name + " (" + match.rank + ")" : "Picked: " + match.name;
    save.disabled = false;
    close();
  }
  function highlight(i) {
    active = i;
    Array.from(list.children).forEach(function (li, j) { li.setAttribute("aria-selected", j === i ? "true" : "false"); });
    if (list.children[i]) list.children[i].scrollIntoView({block: "nearest"});
  }
  function show(found) {
    matches = found;
    list.replaceChildren();
    found.forEach(function (m, i) {
      const li = document.createElement("li");
      li.setAttribute("role", "option");
      const name = document.createElement("span");
      name.textContent = m.name;
      li.appendChild(name);
      if (m.rank) {
        const rank = document.createElement("span");
        rank.className = "rank";
        rank.textContent = " " + m.rank + (m.source === "taxonomy" ? " · iNat taxonomy" : "");
        li.appendChild(rank);
        const lin = document.createElement("span");
        lin.className = "lin";
        lin.textContent = m.lineage.filter(function (n) { return n; }).join(" › ");
        li.appendChild(lin);
      }
      li.addEventListener("mousedown", function (event) { event.preventDefault(); pick(m); });
      list.appendChild(li);
    });
    list.hidden = found.length === 0;
    highlight(found.length ? 0 : -1);
  }
  function lookup(text) {
    const ticket = ++asked;
    return fetch("/review/taxa?q=" + encodeURIComponent(text), {credentials: "same-origin"})
      .then(function (r) { return r.ok ? r.json() : []; })
      .then(function (found) { return ticket === asked ? found : null; });
  }
  input.addEventListener("input", function () {
    choice = null; save.disabled = true; picked.textContent = "";
    clearTimeout(timer);
    const text = input.value.trim();
    if (!text) { close(); return; }
    timer = setTimeout(function () { lookup(text).then(function (found) { if (found) show(found); }); }, 120);
  });
  input.addEventListener("keydown", function (event) {
    if (event.key === "ArrowDown" && matches.length) { event.preventDefault(); highlight((active + 1) % matches.length); }
    else if (event.key === "ArrowUp" && matches.length) { event.preventDefault(); highlight((active - 1 + matches.length) % matches.length); }
    else if (event.key === "Escape") { event.preventDefault(); close(); input.blur(); }
    else if (event.key === "Enter" && !event.ctrlKey) {
      event.preventDefault();
      if (!list.hidden && active >= 0) pick(matches[active]);
      else if (choice) submit();
    }
  });
  input.addEventListener("blur", function () { setTimeout(close, 150); });
  // Esc anywhere in the form (the note, a confidence) leaves it too, so the row's keys work again.
  form.addEventListener("keydown", function (event) {
    if (event.key === "Escape" && event.target !== input) { event.preventDefault(); event.target.blur(); }
  });

  // A suggestion names a label in the run's style: find the taxon it ends with (the binomial, or the last name).
  function pickLabel(label) {
    const words = label.trim().split(/\s+/);
    const tries = [label.trim(), words.slice(-2).join(" "), words[words.length - 1]];
    function attempt(i) {
      if (i >= tries.length) { input.value = label; input.focus(); input.dispatchEvent(new Event("input")); return; }
      lookup(tries[i]).then(function (found) {
        const hit = (found || []).find(function (m) { return m.rank && m.name.toLowerCase() === tries[i].toLowerCase(); });
        if (hit) pick(hit); else attempt(i + 1);
      });
    }
    attempt(0);
  }
  Array.from(document.querySelectorAll("button.suggestion")).forEach(function (b) {
    b.addEventListener("click", function () { pickLabel(b.dataset.name); });
  });
  function notIdentifiable() { pick({name: "not identifiable", rank: null, lineage: null, not_identifiable: true}); }

  // A pick not yet saved is never dropped silently: "n" (on to the next row) saves it first, and any other way off
  // the page (a link, back, closing the tab) asks the browser's "leave this page?" first.
  let leaving = false;
  window.addEventListener("beforeunload", function (event) {
    if (choice && !leaving) { event.preventDefault(); event.returnValue = ""; }
  });
  function moveOn(href) { leaving = true; window.location.href = href; }

  function submit() {
    if (busy) return;
    if (!choice) { say("Pick a taxon first (type, then Enter).", true); input.focus(); return; }
    const checked = form.querySelector('input[name="confidence"]:checked');
    const body = (choice.not_identifiable || !choice.rank) ? {not_identifiable: true}
      : {name: choice.name, rank: choice.rank, lineage: choice.lineage};
    body.note = document.getElementById("note").value;
    body.confidence = checked ? checked.value : "";
    body.blind = hidden;  // nothing but the image was on the screen
    busy = true; save.disabled = true; say("Saving…");
    window.cladebench.post(form.dataset.save, body)
      .then(function (r) { return r.json().catch(function () { return {saved: false, error: "HTTP " + r.status}; }); })
      .then(function (answer) {
        busy = false;
        if (answer.saved) {
          say("Saved: " + answer.label);
          // blind: the same row again, now showing what the dataset and the runs said beside the answer
          moveOn(hidden ? window.location.pathname + "?blind=1"
            : answer.next + (blind && answer.next.indexOf("?") < 0 ? "?blind=1" : ""));
        }
        else { save.disabled = false; say("Not saved: " + (answer.error || "unknown error"), true); }
      })
      .catch(function (error) { busy = false; save.disabled = false; say("Not saved: " + error, true); });
  }
  form.addEventListener("submit", function (event) { event.preventDefault(); submit(); });
  document.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && event.ctrlKey) { event.preventDefault(); submit(); return; }
    const target = event.target;
    if (target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT|BUTTON)$/.test(target.tagName))) return;
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    if (/^[1-5]$/.test(event.key)) {
      const buttons = document.querySelectorAll("button.suggestion kbd");
      const kbd = buttons[Number(event.key) - 1];
      if (kbd) { event.preventDefault(); pickLabel(kbd.parentElement.dataset.name); }
    } else if (event.key === "0") { event.preventDefault(); notIdentifiable(); }
    else if (event.key === "/") { event.preventDefault(); input.focus(); }
    else if (event.key === "n") { event.preventDefault(); if (choice) submit(); else moveOn(form.dataset.next); }
    else if (event.key === "Enter" && choice) { event.preventDefault(); submit(); }
  });
})();
