/* virtbench web: live progress, form row variants, confirmations. No inline scripts (CSP);
   no external requests: it only polls this site's own JSON API. */
(function () {
  "use strict";
  var ACTIVE = { queued: true, running: true };

  function setText(root, field, text) {
    var el = root.querySelector('[data-field="' + field + '"]');
    if (el) el.textContent = text;
  }

  function setStatus(root, status) {
    var el = root.querySelector('[data-field="status"]');
    if (!el) return;
    var badge = document.createElement("span");
    badge.className = "badge st-" + status;
    badge.textContent = status;
    el.replaceChildren(badge);
  }

  function watch(root) {
    var id = root.getAttribute("data-progress-run");
    var wasActive = null;
    function poll() {
      fetch("/api/runs/" + encodeURIComponent(id) + "/progress", { headers: { Accept: "application/json" } })
        .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
        .then(function (p) {
          setStatus(root, p.status);
          setText(root, "counts", p.executions + "/" + p.planned);
          setText(root, "cap", p.cap > p.planned ? "(planned so far; adaptive cap " + p.cap + ")" : "");
          setText(root, "eta", p.eta || "");
          setText(root, "failed", p.failed ? p.failed + " failed" : "");
          setText(root, "step", p.step || "–");
          setText(root, "error", p.error || "");
          setText(root, "host", p.host || "any free worker");
          setText(root, "worker", p.worker || (ACTIVE[p.status] ? "none yet" : "–"));
          if (p.log) setText(root, "log", p.log.join("\n"));
          var bar = root.querySelector("progress");
          if (bar) { bar.max = p.planned || 1; bar.value = p.executions; }
          var active = !!ACTIVE[p.status];
          root.setAttribute("data-status", p.status);
          if (p.status === "running") {  // deleting is refused while a worker measures: hide it
            var del = document.getElementById("delete");
            if (del) del.closest("form").remove();
          }
          if (p.started_at) setText(root, "started", p.started_at.replace("T", " ").replace("Z", " UTC"));
          if (wasActive === true && !active && root.id === "progress") {
            window.setTimeout(function () { window.location.reload(); }, 800);
            return;
          }
          wasActive = active;
          if (active) window.setTimeout(poll, 2000);
        })
        .catch(function () { window.setTimeout(poll, 5000); });
    }
    poll();
  }

  function cloneRow(button) {
    var row = button.closest("tr");
    var body = row.parentNode;
    var kind = row.className.indexOf("prow") >= 0 ? "p" : "b";
    var used = Array.prototype.map.call(body.querySelectorAll("tr"), function (tr) {
      return parseInt((tr.getAttribute("data-prefix") || "x0").slice(1), 10);
    });
    var next = Math.max.apply(null, used) + 1;
    var copy = row.cloneNode(true);
    var old = row.getAttribute("data-prefix");
    copy.setAttribute("data-prefix", kind + next);
    copy.querySelectorAll("[name]").forEach(function (el) {
      el.name = el.name.replace(old + ".", kind + next + ".");
      if (el.type === "checkbox") el.checked = true;
    });
    if (kind === "p") {
      var name = copy.querySelector('input[name$=".name"]');
      if (name) name.value = name.value + "-" + next;
    }
    copy.querySelectorAll("button.clone").forEach(function (b) { b.addEventListener("click", onClone); });
    body.insertBefore(copy, row.nextSibling);
  }

  function onClone(ev) { ev.preventDefault(); cloneRow(ev.currentTarget); }

  function showExperiment() {  // only the chosen kind's settings (without script: all show, the chosen one is used)
    var select = document.getElementById("f-experiment");
    if (!select) return;
    document.querySelectorAll(".experiment-section").forEach(function (s) {
      s.hidden = s.getAttribute("data-kind") !== select.value;
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-progress-run]").forEach(watch);
    var experiment = document.getElementById("f-experiment");
    if (experiment) { experiment.addEventListener("change", showExperiment); showExperiment(); }
    document.querySelectorAll("button.clone").forEach(function (b) { b.addEventListener("click", onClone); });
    document.querySelectorAll("form[data-confirm]").forEach(function (f) {
      f.addEventListener("submit", function (ev) {
        if (!window.confirm(f.getAttribute("data-confirm"))) ev.preventDefault();
      });
    });
    document.body.setAttribute("data-ready", "1");
  });
})();
