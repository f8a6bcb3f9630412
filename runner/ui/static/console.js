// The console's only script: while a page shows something live (a running or queued run), it fetches
// the page's live part every 2 s and puts the server's HTML (escaped there) in place, keeping open the
// details the reader opened. With a token, it keeps the key to act (handed over once, in the address's
// #key=) in sessionStorage, which is per host and port, and adds it to each form the page posts: the
// console's cookie alone cannot act.
(function () {
  "use strict";
  var EVERY_MS = 2000;
  var KEY = "runner-ui-key";

  var handed = /^#key=([0-9a-f]{64})$/.exec(window.location.hash);
  if (handed) {
    window.sessionStorage.setItem(KEY, handed[1]);
    window.history.replaceState(null, "", window.location.pathname + window.location.search);
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    var key = window.sessionStorage.getItem(KEY);
    if (!key || !form || String(form.method).toLowerCase() !== "post") { return; }
    var field = form.querySelector('input[name="_key"]');
    if (!field) {
      field = document.createElement("input");
      field.type = "hidden";
      field.name = "_key";
      form.appendChild(field);
    }
    field.value = key;
  }, true);

  function follow(target, kind, holder) {
    function tick() {
      fetch(window.location.href, { headers: { "X-Refresh": kind }, credentials: "same-origin" })
        .then(function (response) {
          if (!response.ok) { return null; }
          var live = response.headers.get("X-Live") === "1";
          return response.text().then(function (html) {
            var open = Array.prototype.map.call(target.querySelectorAll("details[open][id]"),
                                                function (d) { return d.id; });
            target.innerHTML = html;
            open.forEach(function (id) {  // what the reader opened stays open
              var again = document.getElementById(id);
              if (again && target.contains(again)) { again.open = true; }
            });
            holder.setAttribute("data-live", live ? "1" : "0");
            if (live) { window.setTimeout(tick, EVERY_MS); }
          });
        })
        .catch(function () { window.setTimeout(tick, EVERY_MS * 2); });
    }
    window.setTimeout(tick, EVERY_MS);
  }

  document.addEventListener("DOMContentLoaded", function () {
    var table = document.getElementById("runs");
    var rows = document.getElementById("rows");
    if (table && rows && table.getAttribute("data-live") === "1") { follow(rows, "rows", table); }
    var live = document.getElementById("live");
    if (live && live.getAttribute("data-live") === "1") { follow(live, "run", live); }
  });
})();
