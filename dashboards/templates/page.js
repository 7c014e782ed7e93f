// The dashboard page's script (dashboards/templates/page.html.j2 inlines it, with the page's nonce).
// It embeds every chart spec of #chart-specs with vega-embed and links them: a click on a system's
// mark sets system_focus on every chart and system_filter on all but the clicked one, and hides the
// other systems' rows of the annotation table. window.tracehouse exposes the views for the tests.
(() => {
  "use strict";
  const specs = JSON.parse(document.getElementById("chart-specs").textContent);
  const options = JSON.parse(document.getElementById("embed-options").textContent);
  const state = { views: {}, errors: [], focus: null, ready: null };
  window.tracehouse = state;
  const status = document.getElementById("focus-status");

  function setFocus(system, source) {
    state.focus = system;
    for (const [name, view] of Object.entries(state.views)) {
      view.signal("system_focus", system);
      view.signal("system_filter", name === source ? null : system);
      view.runAsync();
    }
    for (const row of document.querySelectorAll("#annotation-table tbody tr")) {
      row.hidden = system !== null && row.dataset.system !== system;
    }
    status.textContent = system === null ? "all systems" : system;
  }
  document.getElementById("clear-focus").addEventListener("click", () => setFocus(null, null));

  function picked(value) {
    const systems = value && value.system;
    return Array.isArray(systems) && systems.length ? String(systems[0]) : null;
  }

  state.ready = Promise.all(Object.keys(specs).map((name) => {
    const target = document.getElementById("chart-" + name);
    return vegaEmbed(target, specs[name], options).then((result) => {
      state.views[name] = result.view;
      result.view.addSignalListener("pick", (_, value) => setFocus(picked(value), name));
    }).catch((error) => {
      state.errors.push(name + ": " + error);
      target.textContent = "This chart could not be drawn: " + error;
      console.error(error);
    });
  })).then(() => {
    document.body.dataset.rendered = state.errors.length ? "with-errors" : "true";
  });
})();
