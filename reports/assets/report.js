// converge report: the cursor on the timeline, the event log's filter and
// links, the index's sorting and filter. No network, no libraries.
(function () {
  "use strict";
  var $ = function (sel, root) { return (root || document).querySelector(sel); };
  var $$ = function (sel, root) { return Array.prototype.slice.call((root || document).querySelectorAll(sel)); };

  // --- The timeline: instants <-> positions.
  var wrap = $(".chart-wrap");
  var axis = null;
  if (wrap) {
    axis = {
      left: parseFloat(wrap.dataset.left), right: parseFloat(wrap.dataset.right),
      t0: parseFloat(wrap.dataset.t0), t1: parseFloat(wrap.dataset.t1)
    };
  }
  function fraction(t) {
    var f = (t - axis.t0) / (axis.t1 - axis.t0);
    return axis.left + Math.min(Math.max(f, 0), 1) * (axis.right - axis.left);
  }
  function instant(frac) {
    return axis.t0 + (frac - axis.left) / (axis.right - axis.left) * (axis.t1 - axis.t0);
  }
  function placeMarkers() {
    $$(".marker", wrap).forEach(function (m) { m.style.left = (fraction(parseFloat(m.dataset.t)) * 100) + "%"; });
  }
  function setCursor(t) {
    var c = $(".cursor", wrap);
    c.style.left = (fraction(t) * 100) + "%";
    c.style.display = "block";
    $("span", c).textContent = t.toFixed(3) + "s";
  }

  // filter shows the rows whose attribute attr is switched on by its
  // checkbox and whose text holds the query; it returns how many it shows.
  function filter(list, attr, boxes, query) {
    var q = query.trim().toLowerCase();
    var on = {};
    boxes.forEach(function (b) { on[b.dataset[attr]] = b.checked; });
    var shown = 0;
    list.forEach(function (tr) {
      var ok = on[tr.dataset[attr]] !== false && (q === "" || tr.textContent.toLowerCase().indexOf(q) >= 0);
      tr.classList.toggle("hidden", !ok);
      if (ok) { shown++; }
    });
    return shown;
  }

  // --- The event log.
  var log = $(".log");
  var rows = log ? $$("tbody tr", log) : [];
  function select(tr) {
    var old = $("tr.sel", log);
    if (old) { old.classList.remove("sel"); }
    tr.classList.add("sel");
  }
  function goTo(t, scroll) {
    if (!axis) { return; }
    setCursor(t);
    if (scroll) { wrap.scrollIntoView({ block: "nearest" }); }
  }
  if (log) {
    log.addEventListener("click", function (ev) {
      var tr = ev.target.closest("tr[data-t]");
      if (!tr) { return; }
      select(tr);
      goTo(parseFloat(tr.dataset.t), true);
    });
    var search = $("#log-filter");
    var boxes = $$("input[data-kind]");
    var apply = function () {
      $("#log-count").textContent = filter(rows, "kind", boxes, search.value) + " of " + rows.length;
    };
    var timer = null;
    search.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(apply, 120); });
    boxes.forEach(function (b) { b.addEventListener("change", apply); });
    $("#log-count").textContent = rows.length + " of " + rows.length;
  }

  // Anything with data-goto jumps to its instant: on the timeline, and in the log.
  // showInLog selects the first shown row at or after t and scrolls to it.
  function showInLog(t) {
    if (!log) { return; }
    for (var i = 0; i < rows.length; i++) {
      if (!rows[i].classList.contains("hidden") && parseFloat(rows[i].dataset.t) >= t - 1e-9) {
        select(rows[i]);
        log.scrollTop = rows[i].offsetTop - log.clientHeight / 3;
        return;
      }
    }
  }
  function jump(t) {
    goTo(t, true);
    showInLog(t);
  }
  $$("[data-goto]").forEach(function (el) {
    el.addEventListener("click", function (ev) { ev.preventDefault(); jump(parseFloat(el.dataset.goto)); });
  });

  if (wrap) {
    placeMarkers();
    wrap.addEventListener("click", function (ev) {
      if (ev.target.closest(".marker")) { jump(parseFloat(ev.target.closest(".marker").dataset.t)); return; }
      var box = wrap.getBoundingClientRect();
      var t = instant((ev.clientX - box.left) / box.width);
      if (t < axis.t0 || t > axis.t1) { return; }
      setCursor(t);
      showInLog(t);
    });
  }

  // --- Copy the replay command.
  $$("button[data-copy]").forEach(function (b) {
    b.addEventListener("click", function () {
      var text = $(b.dataset.copy).textContent;
      var done = function () { b.textContent = "Copied"; setTimeout(function () { b.textContent = "Copy"; }, 1500); };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(done, function () { selectText(b.dataset.copy); });
      } else {
        selectText(b.dataset.copy);
        try { if (document.execCommand("copy")) { done(); } } catch (e) { /* the text stays selected */ }
      }
    });
  });
  function selectText(sel) {
    var range = document.createRange();
    range.selectNodeContents($(sel));
    var s = window.getSelection();
    s.removeAllRanges();
    s.addRange(range);
  }

  // --- The index: sort by a column, filter by text and status.
  var runs = $("table.runs");
  if (runs) {
    var body = $("tbody", runs);
    $$("th[data-sort]", runs).forEach(function (th, col) {
      var dir = 1;
      th.addEventListener("click", function () {
        var idx = Array.prototype.indexOf.call(th.parentNode.children, th);
        var numeric = th.dataset.sort === "num";
        var list = $$("tr", body);
        list.sort(function (a, b) {
          var x = a.children[idx].dataset.v, y = b.children[idx].dataset.v;
          if (numeric) { return (parseFloat(x) - parseFloat(y)) * dir; }
          return x.localeCompare(y) * dir;
        });
        list.forEach(function (tr) { body.appendChild(tr); });
        dir = -dir;
      });
    });
    var runFilter = $("#run-filter");
    var statusBoxes = $$("input[data-status]");
    var applyRuns = function () {
      $("#run-count").textContent = filter($$("tr", body), "status", statusBoxes, runFilter.value);
    };
    runFilter.addEventListener("input", applyRuns);
    statusBoxes.forEach(function (b) { b.addEventListener("change", applyRuns); });
  }
})();
