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
      ["remat", "Remat policy", [["saved", "saved: keep the named activations, recompute none"], ["selective", "selective: recompute attention scores"], ["full", "full: keep each layer's input"]]],
    ]],
    ["Parallelism", [
      ["data", "Data axis", "number"],
      ["zero", "ZeRO stage over data", [["0", "0: replicated"], ["1", "1: optimizer state split"], ["2", "2: optimizer state and summed gradients split"], ["3", "3: all split (FSDP)"]]],
      ["tensor", "Tensor axis", "number"],
      ["sequence_parallel", "Sequence parallel", "checkbox"],
      ["pipe", "Pipeline stages", "number"],
      ["schedule", "Pipeline schedule", [["gpipe", "GPipe"], ["1f1b", "1F1B"]]],
    ]],
    ["Target", [
      ["chip", "Chip", Object.entries(planner.CHIPS).map(([key, chip]) => [key, chip.name])],
    ]],
  ];

  const GiB = 2 ** 30;
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
  const labels = {};
  const problems = {};
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
      labels[key] = label;
      // Where a refusal of this field's value is shown, beside the field.
      const problem = el("p", { class: "planner-field-error", id: `${id}-error`, hidden: "" });
      problems[key] = problem;
      set.append(el("div", { class: `planner-field planner-${kind === "checkbox" ? "check" : "value"}` },
        el("label", { for: id, text: label }), input, problem));
    }
    form.append(set);
  }

  // The verdict stays in view while the form is edited: beside it on a wide screen, pinned to
  // the bottom of the screen on a narrow one (the stylesheet's .planner-verdict).
  const status = el("p", { class: "planner-status", role: "status", "aria-live": "polite" });
  const devices = el("p", { class: "planner-devices" });
  const band = el("p", { class: "planner-band" });
  const step = el("p", { class: "planner-step" });
  const advice = el("p", { class: "planner-advice" });
  const verdict = el("aside", { class: "planner-verdict", "aria-label": "Verdict" }, status, step, advice, devices, band);
  const results = el("div", { class: "planner-results" });
  new ResizeObserver(() => {
    document.documentElement.style.setProperty("--planner-verdict-height", `${verdict.offsetHeight + 16}px`);
  }).observe(verdict);
  mount.replaceChildren(el("div", { class: "planner-layout" }, form, verdict), results);

  class FieldError extends Error {
    constructor(message, field) {
      super(message);
      this.field = field;
    }
  }

  function readForm() {
    const config = {};
    for (const [key, input] of Object.entries(inputs)) {
      if (input.type === "checkbox") config[key] = input.checked;
      else if (input.type === "number") {
        // The browser reads "1e3" as 1000 and an unfinished "1e" as empty: only digits count.
        const text = input.value.trim();
        if (!/^[0-9]+$/.test(text)) {
          const what = text === "" && input.validity.valid ? "is empty" : "is not a whole number in digits";
          throw new FieldError(`${labels[key]} ${what}: enter a whole number of 1 or more`, key);
        }
        config[key] = Number(text);
      } else if (key === "zero") config[key] = Number(input.value);
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
  // Memory in GiB; traffic in GB, as the links' published rates are in GB/s.
  const gib = (bytes) => figure(bytes / GiB);
  const gb = (bytes) => figure(bytes / 1e9);
  // A chip's usable memory as stated where it was read: 15.75, 95.73.
  const capacity = (bytes) => Number((bytes / GiB).toFixed(2)).toLocaleString("en-US");
  const seconds = (value) => (value < 1 ? `${figure(value * 1e3)} ms` : `${figure(value)} s`);

  // What each symbol of the formulas stands for, listed under each formula that uses it.
  const SYMBOLS = [
    ["L", "layers"], ["h", "width (d_model)"], ["f", "MLP width"], ["n", "attention heads"],
    ["V", "vocabulary"], ["s", "sequence length"], ["B", "global batch, in sequences"],
    ["b", "sequences per device per microbatch, B / (d · m)"], ["m", "microbatches"],
    ["d", "data axis"], ["t", "tensor axis"], ["p", "pipeline stages"],
    ["sp", "the tensor axis with sequence parallel, else 1"],
    ["z_p", "the data axis under ZeRO 3, else 1"], ["z_o", "the data axis under ZeRO 1 or 3, else 1"],
    ["N", "parameters of the layers and the output projection, not the embedding"],
    ["bytes(x)", "bytes per element of the dtype chosen for x"],
  ];

  const NAMED = new Set(["sp", "z_p", "z_o"]);
  const LETTERS = new Set(SYMBOLS.map(([symbol]) => symbol).filter((symbol) => symbol.length === 1));

  // The symbols a formula uses: a name such as z_p, or a product of one-letter symbols written
  // together (2Vh, 4h²), never a letter inside a word (bf16, axis's, moments).
  function symbolsIn(text) {
    const found = new Set();
    if (text.includes("bytes(")) found.add("bytes(x)");
    const bare = text.replace(/bytes\([a-z]+\)|bf16|'s\b/g, " ");
    for (const word of bare.match(/[A-Za-z_]+/g) ?? []) {
      if (NAMED.has(word)) found.add(word);
      else if (word.length <= 2 && [...word].every((letter) => LETTERS.has(letter))) {
        for (const letter of word) found.add(letter);
      }
    }
    return SYMBOLS.filter(([symbol]) => found.has(symbol));
  }

  function formula(part, name) {
    const used = symbolsIn(part.formula);
    const where = used.length
      ? [el("dl", { class: "planner-symbols" },
          ...used.flatMap(([symbol, meaning]) => [el("dt", { text: symbol }), el("dd", { text: meaning })]))]
      : [];
    return el("details", { class: "planner-formula" },
      el("summary", { text: "formula", "aria-label": `Formula: ${name}` }),
      el("code", { text: part.formula }),
      el("span", { text: ` = ${part.numbers}` }),
      ...where);
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

  function render(answer, words) {
    const { chip, memory } = answer;
    const memoryRows = Object.entries(memory).map(([key, part]) => {
      const share = Math.min(100, (100 * part.value) / chip.hbm);
      return el("tr", { "data-bucket": key, "data-bytes": String(part.value) },
        el("th", { scope: "row", text: MEMORY_NAMES[key] }),
        el("td", { class: "planner-number", text: gib(part.value) }),
        el("td", {},
          el("span", { class: "planner-bar", style: `width:${share.toFixed(1)}%` }),
          el("span", { class: "planner-share", text: `${figure((100 * part.value) / chip.hbm)}%` }),
          formula(part, MEMORY_NAMES[key])));
    });
    memoryRows.push(el("tr", { "data-bucket": "total", "data-bytes": String(answer.memoryTotal) },
      el("th", { scope: "row", text: "Total" }),
      el("td", { class: "planner-number", text: gib(answer.memoryTotal) }),
      el("td", { text: `of ${capacity(chip.hbm)} GiB usable: ${words}` })));

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
      `${gib(answer.memoryTotal)} GiB per device of ${capacity(chip.hbm)} GiB, ` +
      `${words}. A step takes at least ${seconds(answer.stepSeconds.overlapped)} ` +
      `at the chip's peak rates (${seconds(answer.stepSeconds.serial)} if no communication overlaps compute)` +
      (answer.stepSeconds.expected === undefined ? "; no step has been measured on this chip, so that bound is all there is." :
        `, and can be expected to take about ${seconds(answer.stepSeconds.expected)} on this GPU ` +
        `(fitted on the steps recorded on GPUs).`);
    summary.dataset.fits = String(answer.fits);
    if (answer.stepSeconds.expected !== undefined) summary.dataset.expected = String(answer.stepSeconds.expected);
    results.replaceChildren(
      summary,
      ...[measuredLine(answer)].filter(Boolean),
      table("Memory per device, GiB", ["Bucket", "GiB", "Share of usable memory"], memoryRows, "memory"),
      table("Communication per step, per device", ["Collective", "Carries", "GB sent", "Time", "Formula"], commRows, "comms"),
      table("Step time: each bound alone", ["Bound", "Time", "Formula"], timeRows, "time"));
  }

  // The build's check of the formulas against two compilers (the table below the planner):
  // for each configuration it compiled, the compilers' temporaries over the planner's.
  const checked = (() => {
    const data = document.getElementById("planner-grid-data");
    return data ? Object.values(JSON.parse(data.textContent)).filter((row) => row.ratios) : [];
  })();

  // Steps recorded on a GPU (the page's data, from the repository's recorded runs).
  const gpuSteps = (() => {
    const data = document.getElementById("planner-gpu-steps");
    return data ? JSON.parse(data.textContent) : [];
  })();

  // The recorded step on this chip whose planner bound is nearest this configuration's, in
  // ratio: the measured time to set beside the bound.
  function nearestGpuStep(answer) {
    const onChip = gpuSteps.filter((step) => step.chip === answer.chip.key);
    if (!onChip.length) return null;
    const distance = (step) => Math.abs(Math.log(step.bound / answer.stepSeconds.overlapped));
    return onChip.reduce((best, step) => (distance(step) < distance(best) ? step : best));
  }

  function measuredLine(answer) {
    if (answer.chip.kind !== "gpu") return null;
    const line = el("p", { class: "planner-measured" });
    const step = nearestGpuStep(answer);
    if (!step) {
      line.textContent = `No step has been measured on an ${answer.chip.name}; the bound above is all there is.`;
      return line;
    }
    const c = step.config;
    const same = Math.abs(step.bound / answer.stepSeconds.overlapped - 1) < 1e-9;
    const onChip = gpuSteps.filter((s) => s.chip === answer.chip.key).length;
    line.dataset.seconds = String(step.seconds);
    line.textContent =
      `Measured ${same ? "for this configuration" : `for the recorded configuration nearest this one in its bound (of ${onChip} recorded on this chip)`}: ` +
      `${c.layers} layers of width ${c.width}, batch ${c.batch} of ${c.seq} tokens, ${c.remat} remat, ` +
      `on ${step.devices} ${answer.chip.name}: ` +
      `${seconds(step.seconds)} a step, ${figure(step.seconds / step.bound)} times the planner's bound ` +
      `of ${seconds(step.bound)} for it and ${figure(step.seconds / step.expected)} times its expected ` +
      `${seconds(step.expected)}, at ${figure(100 * step.mfu)}% model FLOPs utilisation; ` +
      `${step.label}.`;
    return line;
  }

  // Configurations like this one: the same ZeRO stage, and the same axes in use.
  const kind = (c) => `${c.zero}|${c.data > 1}|${c.tensor > 1}|${c.pipe > 1}`;

  function measuredBand(answer) {
    const like = checked.filter((row) => kind(row.config) === kind(answer.config));
    const rows = like.length ? like : checked;
    if (!rows.length) return null;
    // Every configuration has the CPU's ratio; those the TPU compiler compiled have its too.
    const ratios = rows.flatMap((row) => [row.ratios.cpu, row.ratios.tpu]).filter((r) => typeof r === "number");
    return { low: Math.min(...ratios), high: Math.max(...ratios), count: rows.length, like: like.length > 0 };
  }

  function markField(key, message) {
    for (const [name, input] of Object.entries(inputs)) {
      const problem = problems[name];
      if (name === key) {
        input.setAttribute("aria-invalid", "true");
        input.setAttribute("aria-describedby", problem.id);
        problem.textContent = message;
        problem.hidden = false;
      } else {
        input.removeAttribute("aria-invalid");
        input.removeAttribute("aria-describedby");
        problem.textContent = "";
        problem.hidden = true;
      }
    }
  }

  const BOUND_NAMES = { compute: "compute", memory: "HBM traffic", communication: "communication" };

  function showStep(answer) {
    const bound = answer.stepSeconds.overlapped;
    const by = Object.keys(answer.time).find((key) => answer.time[key].value === bound);
    step.textContent = `Step: at least ${seconds(bound)}, bound by ${BOUND_NAMES[by]}.`;
    step.dataset.seconds = String(bound);
    step.dataset.bound = by;
  }

  // A setting's value as its field shows it: the option's words, on or off.
  function shown(field, value) {
    const input = inputs[field];
    if (input.type === "checkbox") return value ? "on" : "off";
    const option = input.tagName === "SELECT" && [...input.options].find((o) => o.value === String(value));
    return option ? option.textContent.split(":")[0] : String(value);
  }

  // When the step does not fit: the one change that saves the most memory, and a button that
  // makes it.
  function showAdvice(answer) {
    const change = answer.fits ? null : planner.suggest(answer.config);
    delete advice.dataset.field;
    if (answer.fits) {
      advice.replaceChildren();
      return;
    }
    if (change === null) {
      advice.textContent = "No single setting saves memory here: change the model, the batch or the devices.";
      return;
    }
    const after = `${gib(change.memoryTotal)} GiB, ${change.fits ? "fits" : "still too big"}; step at least ${seconds(change.stepSeconds)}`;
    const apply = el("button", { type: "button", class: "planner-apply", text: "Make this change" });
    apply.addEventListener("click", () => {
      writeForm(Object.assign(readForm(), { [change.field]: change.value }));
      update();
      inputs[change.field].focus();
    });
    advice.dataset.field = change.field;
    advice.dataset.value = String(change.value);
    advice.replaceChildren(
      `Saves most: ${labels[change.field]} ${shown(change.field, change.from)} → ` +
      `${shown(change.field, change.value)} (${after}). `, apply);
  }

  function showDevices(config) {
    const axes = ["pipe", "data", "tensor"].map((key) => Number(config[key]));
    devices.textContent = axes.every((n) => Number.isSafeInteger(n) && n > 0)
      ? `${axes[0] * axes[1] * axes[2]} devices: pipe ${axes[0]} × data ${axes[1]} × tensor ${axes[2]}`
      : "";
    devices.dataset.devices = devices.textContent ? String(axes[0] * axes[1] * axes[2]) : "";
  }

  function update(config) {
    let answer;
    try {
      answer = planner.plan(config ?? readForm());
    } catch (error) {
      status.textContent = error.message;
      status.dataset.error = "true";
      delete status.dataset.verdict;
      band.textContent = "";
      step.textContent = "";
      advice.replaceChildren();
      markField(error.field, error.message);
      results.classList.add("planner-stale");
      return;
    }
    markField(null, "");
    const { chip, memory } = answer;
    const stored = memory.parameters.value + memory.optimizer.value + memory.batch.value;
    const transient = answer.memoryTotal - stored;
    const share = (100 * answer.memoryTotal) / chip.hbm;
    const measured = measuredBand(answer);
    const atHigh = measured ? stored + transient * measured.high : answer.memoryTotal;
    const level = !answer.fits ? "does-not-fit" : atHigh > chip.hbm ? "tight" : "fits";
    const words = { "does-not-fit": "does not fit", tight: "a close call", fits: "fits with room" }[level];
    status.textContent = `${gib(answer.memoryTotal)} GiB per device of ${capacity(chip.hbm)} GiB (${figure(share)}%): ${words}.`;
    status.dataset.verdict = level;
    delete status.dataset.error;
    band.textContent = measured
      ? `The CPU and TPU compilers planned ${figure(measured.low)} to ${figure(measured.high)} times ` +
        `these temporaries for the ${measured.count} ${measured.like ? "like configurations" : "configurations"} ` +
        `the build checked${chip.kind === "gpu" ? " (none for a GPU)" : ""}: a total of ` +
        `${gib(stored + transient * measured.low)} to ${gib(atHigh)} GiB.`
      : "";
    showStep(answer);
    showAdvice(answer);
    showDevices(answer.config);
    inputs.schedule.disabled = answer.config.pipe === 1;
    results.classList.remove("planner-stale");
    toFragment(answer.config);
    render(answer, words);
  }

  // The form shows the address's settings; plan() judges them as written, so a bad value in a
  // shared link is named, not silently replaced.
  function load() {
    const config = fromFragment();
    writeForm(config);
    update(config);
  }

  form.addEventListener("change", () => update());
  form.addEventListener("input", () => showDevices({
    pipe: inputs.pipe.value, data: inputs.data.value, tensor: inputs.tensor.value,
  }));
  // Enter in a field submits the form: take it as committing the value.
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    update();
  });
  // A link to a configuration (the table below the planner has one per row) opens it here.
  window.addEventListener("hashchange", () => {
    load();
    mount.scrollIntoView({ block: "start" });
  });
  load();
})();
