// The dashboard page's script (dashboards/templates/page.html.j2 inlines it, with the page's nonce).
// It embeds every chart spec of #chart-specs with vega-embed and links them: a click on a system's
// mark sets system_focus on every chart and system_filter on all but the clicked one, and selects
// that system in the annotation table. The table sorts by any column (click its header), filters by
// system, dataset and error type, searches its text, and expands a row's long cells on click.
// window.tracehouse exposes the views and the table's state for the tests.
(() => {
  "use strict";
  const specs = JSON.parse(document.getElementById("chart-specs").textContent);
  const options = JSON.parse(document.getElementById("embed-options").textContent);
  const state = { views: {}, errors: [], focus: null, ready: null, sort: null };
  window.tracehouse = state;
  const status = document.getElementById("focus-status");

  // -- the annotation table ------------------------------------------------------------------
  const table = document.getElementById("annotation-table");
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  const filters = {
    system: document.getElementById("filter-system"),
    dataset: document.getElementById("filter-dataset"),
    error: document.getElementById("filter-error"),
  };
  const search = document.getElementById("table-search");
  const count = document.getElementById("table-count");
  const texts = new Map(rows.map((row) => [row, (row.dataset.annotation + " " + row.textContent).toLowerCase()]));

  function applyFilters() {
    const wanted = Object.fromEntries(Object.entries(filters).map(([key, select]) => [key, select.value]));
    const words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
    let shown = 0;
    for (const row of rows) {
      const text = texts.get(row);
      const visible = Object.entries(wanted).every(([key, value]) => !value || row.dataset[key] === value)
        && words.every((word) => text.includes(word));
      row.hidden = !visible;
      if (visible) shown += 1;
    }
    count.textContent = `${shown} of ${rows.length} annotations`;
  }

  function cellKey(row, column, numeric) {
    const cell = row.cells[column];
    const raw = cell.dataset.value !== undefined ? cell.dataset.value : cell.textContent.trim();
    return numeric ? Number(raw) : raw;
  }

  const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });
  function sortBy(column) {
    const header = table.tHead.rows[0].cells[column];
    const numeric = header.dataset.type === "number";
    const ascending = header.getAttribute("aria-sort") !== "ascending";
    for (const th of table.tHead.rows[0].cells) th.setAttribute("aria-sort", "none");
    header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    const keyed = rows.map((row, index) => [cellKey(row, column, numeric), index, row]);
    keyed.sort((a, b) => {
      const order = numeric ? a[0] - b[0] : collator.compare(a[0], b[0]);
      return (ascending ? order : -order) || a[1] - b[1];
    });
    for (const [, , row] of keyed) body.appendChild(row);
    state.sort = { column, ascending };
  }
  Array.from(table.tHead.rows[0].cells).forEach((th, column) => {
    th.querySelector("button").addEventListener("click", () => sortBy(column));
  });
  for (const select of Object.values(filters)) select.addEventListener("change", applyFilters);
  filters.system.addEventListener("change", () => setFocus(filters.system.value || null, null, false));
  search.addEventListener("input", applyFilters);
  body.addEventListener("click", (event) => {
    const cell = event.target.closest("td.long");
    if (cell && !event.target.closest("a")) cell.parentElement.classList.toggle("expanded");
  });

  // -- the charts, linked by system --------------------------------------------------------------
  function setFocus(system, source, fromChart = true) {
    state.focus = system;
    for (const [name, view] of Object.entries(state.views)) {
      view.signal("system_focus", system);
      view.signal("system_filter", name === source ? null : system);
      view.runAsync();
    }
    if (fromChart) {
      const known = Array.from(filters.system.options).some((option) => option.value === system);
      filters.system.value = system !== null && known ? system : "";
    }
    applyFilters();
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
      // a chart that sums over systems has no click selection ("pick"): it only follows the focus
      if (JSON.stringify(specs[name]).includes('"name":"pick"')) {  // params may sit in a layer or facet
        result.view.addSignalListener("pick", (_, value) => setFocus(picked(value), name));
      }
    }).catch((error) => {
      state.errors.push(name + ": " + error);
      target.textContent = "This chart could not be drawn: " + error;
      console.error(error);
    });
  })).then(() => {
    document.body.dataset.rendered = state.errors.length ? "with-errors" : "true";
  });
})();
