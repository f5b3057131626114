// lmstfy-py dashboard: refreshes the parts of a page marked data-refresh every few seconds
// without reloading it. It fetches the page's own URL again and swaps each marked element
// (matched by id) for its new version. A part the user has typed into, or that holds the
// focused field, is left alone. Pages work without this script; they are just not live.
(function () {
  "use strict";
  var every = Number(document.body.getAttribute("data-refresh-ms") || 0);
  var live = document.getElementById("live");
  if (!every || !window.fetch || !window.DOMParser) {
    return;
  }
  var dirty = new WeakSet();
  document.addEventListener("input", function (event) {
    var part = event.target.closest && event.target.closest("[data-refresh]");
    if (part) {
      dirty.add(part);
    }
  });

  function busy(part) {
    var focused = document.activeElement;
    var typing = focused && /^(INPUT|SELECT|TEXTAREA)$/.test(focused.tagName) && part.contains(focused);
    return dirty.has(part) || typing;
  }

  function swap(html) {
    var fresh = new DOMParser().parseFromString(html, "text/html");
    document.querySelectorAll("[data-refresh]").forEach(function (part) {
      var next = part.id && fresh.getElementById(part.id);
      if (next && !busy(part)) {
        part.replaceWith(document.adoptNode(next));
      }
    });
  }

  function say(text, failed) {
    if (live) {
      live.textContent = text;
      live.classList.toggle("failed", failed);
    }
  }

  function tick() {
    if (document.hidden) {
      setTimeout(tick, every);
      return;
    }
    fetch(window.location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (response) {
        if (!response.ok) {
          throw new Error("HTTP " + response.status);
        }
        return response.text();
      })
      .then(function (html) {
        swap(html);
        say("live · updated " + new Date().toLocaleTimeString(), false);
      })
      .catch(function (error) {
        say("not updating: " + error.message, true);
      })
      .then(function () {
        setTimeout(tick, every);
      });
  }

  setTimeout(tick, every);
})();

// The queue page's live tail of events (SPEC 13): an EventSource on the admin twin of the queue's
// event stream. EventSource reconnects by itself, sending the last id as Last-Event-ID, so the
// tail goes on where it left off; the server's gap frame says how many events were trimmed meanwhile.
(function () {
  "use strict";
  var tail = document.getElementById("event-tail");
  if (!tail || !window.EventSource) {
    return;
  }
  var SHOWN = 50;
  var KINDS = ["published", "ready", "reserved", "released", "touched", "completed", "buried", "dead",
    "expired", "deleted", "respawned", "promoted", "gap"];
  var list = tail.querySelector("ol");
  var state = tail.querySelector("[data-tail-state]");
  var source = new EventSource(tail.getAttribute("data-events-url"));

  function describe(event) {
    if (event.kind === "gap") {
      return event.lost + " event(s) trimmed before they were shown";
    }
    var text = event.job_id + " · attempt " + event.attempt;
    if (event.reason) {
      text += " · " + event.reason;
    }
    if (event.priority !== undefined) {
      text += " · priority " + event.priority;
    }
    return text;
  }

  function show(message) {
    var event = JSON.parse(message.data);
    var row = document.createElement("li");
    row.setAttribute("data-event", event.kind);
    var kind = document.createElement("span");
    kind.className = "badge state-" + event.kind;
    kind.textContent = event.kind;
    var when = document.createElement("span");
    when.className = "meta";
    when.textContent = event.ts_ms ? new Date(event.ts_ms).toLocaleTimeString() : "";
    var what = document.createElement("code");
    what.textContent = describe(event);
    row.append(kind, " ", what, " ", when);
    list.prepend(row);
    while (list.children.length > SHOWN) {
      list.lastElementChild.remove();
    }
  }

  KINDS.forEach(function (kind) {
    source.addEventListener(kind, show);
  });
  source.onopen = function () {
    state.textContent = "live";
  };
  source.onerror = function () {
    state.textContent = "reconnecting…";
  };
})();
