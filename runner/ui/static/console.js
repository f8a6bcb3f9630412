// The console's only script: while a page shows something live (a running or queued run), it fetches
// the page's live part every 2 s and puts the server's HTML (escaped there) in place. Nothing else.
(function () {
  "use strict";
  var EVERY_MS = 2000;

  function follow(target, kind, holder) {
    function tick() {
      fetch(window.location.href, { headers: { "X-Refresh": kind }, credentials: "same-origin" })
        .then(function (response) {
          if (!response.ok) { return null; }
          var live = response.headers.get("X-Live") === "1";
          return response.text().then(function (html) {
            target.innerHTML = html;
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
