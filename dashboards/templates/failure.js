// A failure view's script (dashboards/templates/failure.html.j2 inlines it, with the page's nonce).
// It never scrolls on load: the decisive step (multi-agent trajectories) and the labelled span (an
// OpenTelemetry trace) are shown in the header, so the first screen, a static screenshot included, is
// the view's top; their links, or an address naming a place (#step-3, #span-7), go to them in full.
// "expand all" opens or closes every long text.
(() => {
  "use strict";
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
