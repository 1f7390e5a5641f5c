// Live provisioning progress without a framework: while a panel carries
// data-refresh-url, fetch its fresh HTML every two seconds and swap it in.
// The server stops sending the URL when the job is finished.
(function () {
  "use strict";
  function poll() {
    var el = document.getElementById("progress");
    if (!el) return;
    var url = el.getAttribute("data-refresh-url");
    if (!url) return;
    // Marks the page as following a job until it reloads (tests wait for
    // the reload before they look at or photograph the finished page).
    document.documentElement.setAttribute("data-progress-polling", "");
    window.setTimeout(function () {
      fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } })
        .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
        .then(function (html) {
          var tmp = document.createElement("div");
          tmp.innerHTML = html;
          var fresh = tmp.querySelector("#progress");
          if (fresh) { el.replaceWith(fresh); }
          if (fresh && !fresh.getAttribute("data-refresh-url")) {
            // Finished: reload once so state, history and actions are current.
            window.location.reload();
            return;
          }
          poll();
        })
        .catch(function () { window.setTimeout(poll, 5000); });
    }, 2000);
  }
  document.addEventListener("DOMContentLoaded", poll);
})();
