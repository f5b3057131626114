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
