// A failure view's script (dashboards/templates/failure.html.j2 inlines it, with the page's nonce).
// It brings the decisive step (multi-agent trajectories) or the labelled span (an OpenTelemetry
// trace's waterfall) into view on load, unless the address names another place (#step-3, #span-7),
// and lets "expand all" open or close every long text.
(() => {
  "use strict";
  const decisive = document.querySelector("li.step.decisive, li.span.labelled > .wf-row");
  if (decisive && !location.hash) {
    decisive.scrollIntoView({ block: "center" });
  }
  const button = document.getElementById("expand-all");
  if (button) {
    button.addEventListener("click", () => {
      const all = Array.from(document.querySelectorAll("details.long"));
      const open = !all.every((d) => d.open);
      for (const d of all) d.open = open;
      button.textContent = open ? "collapse all" : "expand all";
    });
  }
  document.body.dataset.ready = "true";
})();
