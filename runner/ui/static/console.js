// The console's only script. A live run's page follows the run's events (EventSource on the console's own
// /api/runs/ID/events): each piece of the reply the model writes is added to its text as it comes, and when
// anything else is logged (a tool call starts or ends, a step, the end) the page's live part is fetched again,
// HTML the server escaped. Without EventSource, or when it fails, the live part is fetched every 2 s instead,
// as the runs page does while it shows a live run. Text from the run goes in with textContent, never as HTML.
// With a token, it keeps the key to act (handed over once, in the address's #key=) in sessionStorage, which is
// per host and port, and adds it to each form the page posts: the console's cookie alone cannot act.
(function () {
  "use strict";
  var EVERY_MS = 2000;
  var KEY = "runner-ui-key";
  var FAILS = 3;  // errors in a row, with no event between, before a page stops following and polls

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

  // The page's live part again, from the server: calls back with (html, live) or (null) when it could not.
  function fetchPart(kind, done) {
    fetch(window.location.href, { headers: { "X-Refresh": kind }, credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) { done(null, false); return; }
        var live = response.headers.get("X-Live") === "1";
        return response.text().then(function (html) { done(html, live); });
      })
      .catch(function () { done(null, false); });
  }

  // The server's HTML in place of ``target``'s, keeping open the details the reader opened.
  function replace(target, html) {
    var open = Array.prototype.map.call(target.querySelectorAll("details[open][id]"), function (d) { return d.id; });
    target.innerHTML = html;
    open.forEach(function (id) {
      var again = document.getElementById(id);
      if (again && target.contains(again)) { again.open = true; }
    });
  }

  function follow(target, kind, holder) {
    function tick() {
      fetchPart(kind, function (html, live) {
        if (html === null) { window.setTimeout(tick, EVERY_MS * 2); return; }
        replace(target, html);
        holder.setAttribute("data-live", live ? "1" : "0");
        if (live) { window.setTimeout(tick, EVERY_MS); }
      });
    }
    window.setTimeout(tick, EVERY_MS);
  }

  // A live run's page, following its events. ``last``: the last event the page shows (drawn from, or added).
  function stream(live) {
    var delta = live.getAttribute("data-delta"), reply = live.getAttribute("data-reply");
    var end = live.getAttribute("data-end"), url = live.getAttribute("data-events");
    var last = drawnAt();
    var writing = { step: null, text: "", done: false };  // the reply being written, as the events tell it
    var wanted = 0, busy = false, fails = 0, timer = null;
    var source = new window.EventSource(url + (url.indexOf("?") < 0 ? "?" : "&") + "after=" + last);

    function drawnAt() {
      var header = live.querySelector("#run-header");
      return header ? Number(header.getAttribute("data-seq")) || 0 : 0;
    }

    function draw() {
      if (writing.step === null || writing.done) { return; }
      var shown = live.querySelector("#streaming");
      if (shown && shown.classList.contains("cut")) {  // a reply cut off before this one: this one is new
        shown.parentNode.removeChild(shown);
        shown = null;
      }
      if (!shown) {
        var timeline = live.querySelector("#timeline");
        if (!timeline) { return; }
        shown = document.createElement("li");
        shown.className = "entry model streaming";
        shown.id = "streaming";
        shown.setAttribute("data-kind", "streaming");
        var what = document.createElement("div");
        what.className = "what";
        what.appendChild(document.createTextNode("model writing "));
        var step = document.createElement("span");
        step.className = "dim";
        what.appendChild(step);
        var text = document.createElement("pre");
        text.className = "text";
        shown.appendChild(what);
        shown.appendChild(text);
        timeline.appendChild(shown);
      }
      shown.setAttribute("data-step", String(writing.step));
      shown.setAttribute("data-seq", String(last));
      shown.querySelector(".what .dim").textContent = "step " + writing.step;
      shown.querySelector("pre.text").textContent = writing.text;
    }

    // After a fetch: the page as drawn when it is as new as the events, else the reply the events tell.
    function settle() {
      var at = drawnAt();
      if (at >= last) {
        var shown = live.querySelector("#streaming");
        writing = shown ? { step: Number(shown.getAttribute("data-step")), done: shown.classList.contains("cut"),
                            text: shown.querySelector("pre.text").textContent } : { step: null, text: "", done: false };
        last = at;
      } else {
        draw();
      }
    }

    function refresh() {
      wanted += 1;
      if (busy) { return; }
      busy = true;
      var asked = wanted;
      fetchPart("run", function (html, isLive) {
        busy = false;
        if (html !== null) {
          replace(live, html);
          live.setAttribute("data-live", isLive ? "1" : "0");
          settle();
          if (!isLive) { stop(); return; }
        }
        if (wanted > asked) { refresh(); } else { childrenLater(); }
      });
    }

    // A sub-agent's child run logs in its own log: while one still goes, its part is fetched as before.
    function childrenLater() {
      if (timer !== null || !source) { return; }
      if (!live.querySelector('li.entry.child[data-status="running"], li.entry.child[data-status="queued"]')) {
        return;
      }
      timer = window.setTimeout(function () { timer = null; refresh(); }, EVERY_MS);
    }

    function stop() {
      if (source) { source.close(); source = null; }
    }

    function onDelta(message) {
      fails = 0;
      var seq = Number(message.lastEventId);
      if (!(seq > last)) { return; }  // the page was drawn from it already
      last = seq;
      var event = JSON.parse(message.data);
      var piece = event.data.text, offset = event.data.offset;
      if (event.step !== writing.step || offset === 0 || writing.done) {
        writing = { step: event.step, text: "", done: false };
      }
      if (offset > writing.text.length) { refresh(); return; }  // a piece this page never saw: the server's page
      writing.text = writing.text.slice(0, offset) + piece;
      draw();
    }

    function onFact(message) {
      fails = 0;
      var seq = Number(message.lastEventId);
      if (!(seq > last)) { return; }
      last = seq;
      if (message.type === reply && JSON.parse(message.data).step === writing.step) { writing.done = true; }
      if (message.type === end) { stop(); }
      refresh();
    }

    live.getAttribute("data-kinds").split(" ").forEach(function (kind) {
      if (kind) { source.addEventListener(kind, kind === delta ? onDelta : onFact); }
    });
    source.onopen = function () { fails = 0; };
    source.onerror = function () {
      fails += 1;
      if (source && (source.readyState === window.EventSource.CLOSED || fails >= FAILS)) {
        stop();  // refused, or the stream ended for good: the page is fetched every 2 s while the run goes
        if (live.getAttribute("data-live") === "1") { follow(live, "run", live); }
      }
    };
    childrenLater();
  }

  document.addEventListener("DOMContentLoaded", function () {
    var table = document.getElementById("runs");
    var rows = document.getElementById("rows");
    if (table && rows && table.getAttribute("data-live") === "1") { follow(rows, "rows", table); }
    var live = document.getElementById("live");
    if (!live || live.getAttribute("data-live") !== "1") { return; }
    if (window.EventSource && live.getAttribute("data-events")) { stream(live); } else { follow(live, "run", live); }
  });
})();
