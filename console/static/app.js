// The state console's script: countdowns, relative times, the live event
// stream and dismissible notices. Pages work without it; it keeps them live.
(function () {
  "use strict";
  var body = document.body;
  var base = body.dataset.base || "/ui";
  var skew = Number(body.dataset.now || Date.now()) - Date.now(); // server minus browser

  function now() { return Date.now() + skew; }

  function human(ms) {
    var s = ms / 1000;
    if (s < 10) return s.toFixed(1) + "s";
    if (s < 60) return Math.floor(s) + "s";
    var m = Math.floor(s / 60);
    if (m < 60) return m + "m" + String(Math.floor(s % 60)).padStart(2, "0") + "s";
    var h = Math.floor(m / 60);
    if (h < 48) return h + "h" + String(m % 60).padStart(2, "0") + "m";
    return Math.floor(h / 24) + "d";
  }

  function tick() {
    var t = now();
    document.querySelectorAll(".countdown[data-expires]").forEach(function (el) {
      var left = Number(el.dataset.expires) - t;
      if (left > 0) {
        el.textContent = human(left);
        el.classList.remove("expired");
        el.classList.toggle("soon", left < 5000);
      } else {
        el.textContent = "expired " + human(-left) + " ago";
        el.classList.add("expired");
        el.classList.remove("soon");
      }
    });
    document.querySelectorAll(".t[data-ms]").forEach(function (el) {
      var d = t - Number(el.dataset.ms);
      el.textContent = d >= 0 ? human(d) + " ago" : "in " + human(-d);
    });
  }
  tick();
  setInterval(tick, 250);

  // The notice of an action is shown once: a reload must not repeat it.
  if (window.URLSearchParams && location.search.indexOf("flash=") >= 0) {
    var q = new URLSearchParams(location.search);
    q.delete("flash");
    history.replaceState(null, "", location.pathname + (q.toString() ? "?" + q : ""));
  }

  document.addEventListener("click", function (e) {
    var b = e.target.closest(".dismiss");
    if (b) { b.parentElement.hidden = true; }
  });

  // link mirrors the server's: the page of an event's record.
  function link(op, key) {
    switch (op.split(".")[0]) {
      case "workflow": return "/runs/" + encodeURIComponent(key);
      case "kv": return "/key?k=" + encodeURIComponent(key);
      case "lease": return "/leases?prefix=" + encodeURIComponent(key);
      case "session": return "/sessions?prefix=" + encodeURIComponent(key);
    }
    return "";
  }

  function pretty(v) { try { return JSON.stringify(v, null, 2); } catch (e) { return String(v); } }

  function eventItem(ev) {
    var li = document.createElement("li");
    li.className = "ev fresh";
    if (ev.op === "workflow.heartbeat" || ev.op === "lease.renew") li.classList.add("beat");
    li.dataset.id = ev.id;
    var t = document.createElement("span");
    t.className = "t"; t.dataset.ms = ev.time_ms; t.title = new Date(ev.time_ms).toISOString();
    var op = document.createElement("span"); op.className = "op"; op.textContent = ev.op;
    var what = document.createElement("span"); what.className = "what"; what.textContent = ev.summary;
    li.append(t, " ", op, " ", what);
    var href = link(ev.op, ev.key);
    if (href) {
      var a = document.createElement("a");
      a.className = "open"; a.href = base + href; a.textContent = "open";
      li.append(" ", a);
    }
    if (ev.value !== undefined) {
      var d = document.createElement("details");
      var s = document.createElement("summary"); s.textContent = "JSON";
      var pre = document.createElement("pre"); pre.textContent = pretty(ev.value);
      d.append(s, pre);
      li.append(d);
    }
    return li;
  }

  // A page of records follows the change feed from when it was read and
  // says, without reloading under the reader's eyes, how many of its kind
  // of records changed since.
  var follow = document.querySelector("[data-follow]");
  var changes = document.getElementById("changes");
  if (follow && changes && window.EventSource) {
    var kind = follow.dataset.follow, n = 0;
    var fprefix = follow.dataset.prefix || "";
    var fes = new EventSource(base + "/events/stream?after=" + encodeURIComponent(changes.dataset.after || "0") +
      (fprefix ? "&prefix=" + encodeURIComponent(fprefix) : ""));
    fes.onmessage = function (m) {
      var ev = JSON.parse(m.data);
      if (ev.op.indexOf(kind) !== 0 || ev.op === "workflow.heartbeat") return;
      n++;
      document.getElementById("changes-text").textContent = n + (n === 1 ? " change" : " changes") + " since this page was read";
      changes.hidden = false;
    };
  }

  var stream = document.getElementById("stream");
  if (stream && window.EventSource) {
    var list = stream.querySelector("ol.log");
    var state = document.getElementById("live-state");
    var prefix = stream.dataset.prefix || "";
    var url = base + "/events/stream?after=" + encodeURIComponent(stream.dataset.after || "0") +
      (prefix ? "&prefix=" + encodeURIComponent(prefix) : "");
    var es = new EventSource(url);
    es.onopen = function () { state.textContent = "live"; state.className = "dot on"; };
    es.onerror = function () { state.textContent = "reconnecting…"; state.className = "dot"; };
    es.onmessage = function (m) {
      var ev = JSON.parse(m.data);
      var empty = list.querySelector(".empty"); if (empty) empty.remove();
      list.prepend(eventItem(ev));
      while (list.children.length > 500) list.lastElementChild.remove();
      tick();
    };
    es.addEventListener("gap", function () {
      state.textContent = "events were removed before they could be shown: reload"; state.className = "dot bad";
      es.close();
    });
    var hide = document.getElementById("hide-beats");
    if (hide) hide.addEventListener("change", function () { list.classList.toggle("no-beats", hide.checked); });
  }
})();
