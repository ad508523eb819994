// The planner's form: builds itself into #spmd-planner, keeps its settings in the address's
// fragment (so a configuration can be shared as a link) and shows what model.js answers.
(function () {
  "use strict";
  const planner = globalThis.spmdPlanner;
  const mount = document.getElementById("spmd-planner");
  if (!planner || !mount) return;

  const FIELDS = [
    ["Model", [
      ["layers", "Layers", "number"],
      ["width", "Width (d_model)", "number"],
      ["heads", "Attention heads", "number"],
      ["mlp", "MLP width", "number"],
      ["vocab", "Vocabulary", "number"],
      ["seq", "Sequence length", "number"],
    ]],
    ["Precision", [
      ["param_dtype", "Parameters", ["float32", "bfloat16"]],
      ["grad_dtype", "Gradients", ["float32", "bfloat16"]],
      ["opt_dtype", "Optimizer state", ["float32", "bfloat16"]],
      ["act_dtype", "Activations", ["float32", "bfloat16"]],
    ]],
    ["Training", [
      ["batch", "Global batch (sequences)", "number"],
      ["microbatches", "Microbatches", "number"],
      ["remat", "Remat policy", [["none", "none: keep every activation"], ["selective", "selective: recompute attention scores"], ["full", "full: keep each layer's input"]]],
    ]],
    ["Parallelism", [
      ["data", "Data axis", "number"],
      ["zero", "ZeRO stage over data", [["0", "0: replicated"], ["1", "1: optimizer state split"], ["3", "3: all split (FSDP)"]]],
      ["tensor", "Tensor axis", "number"],
      ["sequence_parallel", "Sequence parallel", "checkbox"],
      ["pipe", "Pipeline stages", "number"],
      ["schedule", "Pipeline schedule", [["gpipe", "GPipe"], ["1f1b", "1F1B"]]],
    ]],
    ["Target", [
      ["chip", "Chip", Object.entries(planner.CHIPS).map(([key, chip]) => [key, chip.name])],
    ]],
  ];

  const GB = 1e9;
  const el = (tag, attrs = {}, ...children) => {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs)) {
      if (key === "text") node.textContent = value;
      else node.setAttribute(key, value);
    }
    for (const child of children) node.append(child);
    return node;
  };

  const form = el("form", { class: "planner-form", "aria-label": "Training configuration" });
  const inputs = {};
  for (const [legend, fields] of FIELDS) {
    const set = el("fieldset", {}, el("legend", { text: legend }));
    for (const [key, label, kind] of fields) {
      const id = `planner-${key}`;
      let input;
      if (Array.isArray(kind)) {
        input = el("select", { id, name: key });
        for (const option of kind) {
          const [value, text] = Array.isArray(option) ? option : [option, option];
          input.append(el("option", { value, text }));
        }
      } else if (kind === "checkbox") {
        input = el("input", { id, name: key, type: "checkbox" });
      } else {
        input = el("input", { id, name: key, type: "number", min: "1", step: "1", inputmode: "numeric" });
      }
      inputs[key] = input;
      set.append(el("div", { class: `planner-field planner-${kind === "checkbox" ? "check" : "value"}` },
        el("label", { for: id, text: label }), input));
    }
    form.append(set);
  }

  const status = el("p", { class: "planner-status", role: "status", "aria-live": "polite" });
  const results = el("div", { class: "planner-results" });
  mount.replaceChildren(form, status, results);

  function readForm() {
    const config = {};
    for (const [key, input] of Object.entries(inputs)) {
      if (input.type === "checkbox") config[key] = input.checked;
      else if (input.value === "") config[key] = null;
      else if (input.type === "number" || key === "zero") config[key] = Number(input.value);
      else config[key] = input.value;
    }
    return config;
  }

  function writeForm(config) {
    for (const [key, input] of Object.entries(inputs)) {
      if (input.type === "checkbox") input.checked = Boolean(config[key]);
      else input.value = String(config[key]);
    }
  }

  // The address's fragment holds the settings that differ from the defaults (model.js). A
  // value that is not a setting's is kept as written, for plan() to refuse by name.
  function fromFragment() {
    const config = Object.assign({}, planner.DEFAULTS);
    const params = new URLSearchParams(location.hash.slice(1));
    for (const [key, value] of params) {
      const usual = planner.DEFAULTS[key];
      if (typeof usual === "number" && /^[0-9]+$/.test(value)) config[key] = Number(value);
      else if (typeof usual === "boolean" && (value === "true" || value === "false")) config[key] = value === "true";
      else config[key] = value;
    }
    return config;
  }

  function toFragment(config) {
    const text = planner.fragment(config);
    history.replaceState(null, "", text ? `#${text}` : location.pathname + location.search);
  }

  // Three significant figures, with thousands separated: 0.00123, 12.3, 1,234.
  const figure = (value) => Number(value.toPrecision(3)).toLocaleString("en-US", { maximumSignificantDigits: 3 });
  const gb = (bytes) => figure(bytes / GB);
  const seconds = (value) => (value < 1 ? `${figure(value * 1e3)} ms` : `${figure(value)} s`);

  function formula(part, name) {
    return el("details", { class: "planner-formula" },
      el("summary", { text: "formula", "aria-label": `Formula: ${name}` }),
      el("code", { text: part.formula }),
      el("span", { text: ` = ${part.numbers}` }));
  }

  function table(caption, head, rows, name) {
    const body = el("tbody");
    for (const row of rows) body.append(row);
    const headRow = el("tr");
    for (const text of head) headRow.append(el("th", { scope: "col", text }));
    // A keyboard can scroll the table sideways where the column is narrow.
    return el("div", { class: "planner-table", tabindex: "0", role: "region", "aria-label": caption },
      el("table", { "data-planner": name }, el("caption", { text: caption }), el("thead", {}, headRow), body));
  }

  const MEMORY_NAMES = {
    parameters: "Parameters", optimizer: "Optimizer state", gradients: "Gradients",
    activations: "Activations kept for the backward pass", working: "Working memory", batch: "Batch",
  };

  function render(answer) {
    const { chip, memory } = answer;
    const memoryRows = Object.entries(memory).map(([key, part]) => {
      const share = Math.min(100, (100 * part.value) / chip.hbm);
      return el("tr", { "data-bucket": key, "data-bytes": String(part.value) },
        el("th", { scope: "row", text: MEMORY_NAMES[key] }),
        el("td", { class: "planner-number", text: gb(part.value) }),
        el("td", {},
          el("span", { class: "planner-bar", style: `width:${share.toFixed(1)}%` }),
          el("span", { class: "planner-share", text: `${figure((100 * part.value) / chip.hbm)}%` }),
          formula(part, MEMORY_NAMES[key])));
    });
    memoryRows.push(el("tr", { "data-bucket": "total", "data-bytes": String(answer.memoryTotal) },
      el("th", { scope: "row", text: "Total" }),
      el("td", { class: "planner-number", text: gb(answer.memoryTotal) }),
      el("td", { text: `of ${gb(chip.hbm)} GB HBM: ${answer.fits ? "fits" : "does not fit"}` })));

    const commRows = answer.comms.map((comm) =>
      el("tr", { "data-axis": comm.axis, "data-op": comm.op, "data-bytes": String(comm.value) },
        el("th", { scope: "row", text: `${comm.op} over ${comm.axis}` }),
        el("td", { text: comm.what }),
        el("td", { class: "planner-number", text: gb(comm.value) }),
        el("td", { class: "planner-number", text: `${seconds(comm.seconds)} (${comm.bandwidth})` }),
        el("td", {}, formula(comm, `${comm.op} over ${comm.axis}`))));
    if (commRows.length === 0) {
      commRows.push(el("tr", {}, el("td", { colspan: "5", text: "One device: nothing to communicate." })));
    }

    const TIME_NAMES = { compute: "Compute", memory: "HBM traffic (weights, optimizer, kept activations)", communication: "Communication" };
    const timeRows = Object.entries(answer.time).map(([key, part]) =>
      el("tr", { "data-bound": key, "data-seconds": String(part.value) },
        el("th", { scope: "row", text: TIME_NAMES[key] }),
        el("td", { class: "planner-number", text: seconds(part.value) }),
        el("td", {}, formula(part, TIME_NAMES[key]))));

    const summary = el("p", { class: "planner-summary" });
    summary.textContent =
      `${(answer.parameters / 1e9).toFixed(2)} billion parameters on ${answer.devices} ${chip.name} ` +
      `(${answer.config.pipe} × ${answer.config.data} × ${answer.config.tensor}, pipe × data × tensor): ` +
      `${gb(answer.memoryTotal)} GB per device of ${gb(chip.hbm)} GB, ` +
      `${answer.fits ? "fits" : "does not fit"}. A step takes at least ${seconds(answer.stepSeconds.overlapped)} ` +
      `at the chip's peak rates (${seconds(answer.stepSeconds.serial)} if no communication overlaps compute).`;
    summary.dataset.fits = String(answer.fits);
    results.replaceChildren(
      summary,
      table("Memory per device, GB", ["Bucket", "GB", "Share of HBM"], memoryRows, "memory"),
      table("Communication per step, per device", ["Collective", "Carries", "GB sent", "Time", "Formula"], commRows, "comms"),
      table("Step time: each bound alone", ["Bound", "Time", "Formula"], timeRows, "time"));
  }

  function update(config = readForm()) {
    let answer;
    try {
      answer = planner.plan(config);
    } catch (error) {
      status.textContent = error.message;
      status.dataset.error = "true";
      results.classList.add("planner-stale");
      return;
    }
    status.textContent = `${gb(answer.memoryTotal)} GB per device: ${answer.fits ? "fits" : "does not fit"}.`;
    delete status.dataset.error;
    results.classList.remove("planner-stale");
    toFragment(answer.config);
    render(answer);
  }

  // The form shows the address's settings; plan() judges them as written, so a bad value in a
  // shared link is named, not silently replaced.
  function load() {
    const config = fromFragment();
    writeForm(config);
    update(config);
  }

  form.addEventListener("input", () => update());
  form.addEventListener("change", () => update());
  form.addEventListener("submit", (event) => event.preventDefault());
  // A link to a configuration (the table below the planner has one per row) opens it here.
  window.addEventListener("hashchange", () => {
    load();
    mount.scrollIntoView({ block: "start" });
  });
  load();
})();
