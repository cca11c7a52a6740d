// cladebench serve: the few lines of script the pages use (no framework, no network but this server).
"use strict";
(function () {
  // Writes carry the page's CSRF value (the server refuses a write without it).
  const csrf = document.querySelector('meta[name="csrf"]');
  window.cladebench = {
    post: function (url, body) {
      return fetch(url, {method: "POST", credentials: "same-origin",
                         headers: {"Content-Type": "application/json", "X-Cladebench-CSRF": csrf ? csrf.content : ""},
                         body: JSON.stringify(body)});
    },
  };
  // Arrow keys page through the grid (when no field has the focus).
  document.addEventListener("keydown", function (event) {
    const target = event.target;
    if (target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName))) return;
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    const rel = event.key === "ArrowRight" ? "next" : event.key === "ArrowLeft" ? "prev" : null;
    if (!rel) return;
    const link = document.querySelector('a[rel="' + rel + '"]');
    if (link) { event.preventDefault(); window.location.href = link.href; }
  });
})();
