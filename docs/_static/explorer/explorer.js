// The sharding explorer's form: builds itself into #spmd-explorer, keeps its question in the
// address's fragment (so a choice can be shared as a link) and shows what model.js answers:
// each device's blocks, the result's layout, the collectives and their bytes, or JAX's refusal.
(function () {
  "use strict";
  const explorer = globalThis.spmdExplorer;
  const planner = globalThis.spmdPlanner;
  const mount = document.getElementById("spmd-explorer");
  if (!explorer || !mount) return;
  const chips = planner ? JSON.parse(planner.chipsJson()) : {};

  const el = (tag, attrs = {}, ...children) => {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs)) {
      if (key === "text") node.textContent = value;
      else node.setAttribute(key, value);
    }
    for (const child of children) node.append(child);
    return node;
  };

  const inputs = {};
  const problems = {};
  function field(key, label, input, hint) {
    input.id = `explorer-${key}`;
    input.name = key;
    inputs[key] = input;
    const problem = el("p", { class: "planner-field-error", id: `explorer-${key}-error`, hidden: "" });
    problems[key] = problem;
    input.setAttribute("aria-describedby", problem.id);
    return el("div", { class: "planner-field planner-value" },
      el("label", { for: input.id, text: label }), input, hint ? el("small", { text: hint }) : "", problem);
  }
  const text = (placeholder) => el("input", { type: "text", autocomplete: "off", spellcheck: "false", placeholder });
  const select = (options) => {
    const node = el("select");
    for (const [value, label] of options) node.append(el("option", { value, text: label }));
    return node;
  };

  const PARAM_LABELS_FIRST = "out_sharding, optional (a spec)";
  const presetNames = explorer.presets.map((p, i) => [String(i), p.name]);
  const form = el("form", { class: "planner-form", "aria-label": "Question for the explorer" },
    el("fieldset", {}, el("legend", { text: "Preset" }),
      field("preset", "Start from", select([["", "(your own)"], ...presetNames]))),
    el("fieldset", {}, el("legend", { text: "Mesh" }),
      field("mesh", "Axes, name=size", text("x=2, y=4"), "1 to 3 axes, sizes 1 to 8"),
      field("types", "Axis types", select([["Explicit", "Explicit (jax.make_mesh's default)"], ["Auto", "Auto"]]))),
    el("fieldset", {}, el("legend", { text: "Operation" }),
      field("op", "Operation", select([["matmul", "matmul A @ B"], ["add", "add A + B"], ["sum", "sum A over a dimension"], ["reshard", "reshard A"]])),
      field("param", PARAM_LABELS_FIRST, text("e.g. x, None")),
      field("chip", "Chip, for the time", select(Object.entries(chips).map(([k, c]) => [k, c.name])))),
    el("fieldset", {}, el("legend", { text: "Arrays" }),
      field("array0", "A: shape ; spec", text("16, 32 ; x, None")),
      field("array1", "B: shape ; spec", text("32, 64 ; None, y"))),
  );
  const status = el("p", { class: "planner-status", role: "status", "aria-live": "polite" });
  const results = el("div", { class: "explorer-results" });
  mount.replaceChildren(form, status, results);

  class FieldError extends Error {
    constructor(message, field) {
      super(message);
      this.field = field;
    }
  }

  // "x, None", "(x, y), None", "P('x', None)" -> ["x", null], [["x", "y"], null], ...
  function parseSpec(raw, fieldName) {
    let body = raw.trim().replace(/^P\(/, "").replace(/\)$/, "");
    const entries = [];
    const pattern = /\s*(\([^)]*\)|[^,()]+)\s*(,|$)/y;
    if (!body) return entries;
    let match;
    while (pattern.lastIndex < body.length && (match = pattern.exec(body))) {
      const piece = match[1].trim();
      const names = piece.startsWith("(") ? piece.slice(1, -1).split(",").map((s) => s.trim()).filter(Boolean) : [piece];
      const clean = names.map((n) => n.replace(/^['"]|['"]$/g, ""));
      if (clean.length === 1 && (clean[0] === "None" || clean[0] === "-")) entries.push(null);
      else entries.push(clean.length === 1 ? clean[0] : clean);
      if (!match[2]) break;
    }
    if (pattern.lastIndex < body.length && body.slice(pattern.lastIndex).trim()) {
      throw new FieldError(`cannot read the spec "${raw}": write entries like x, None or (x, y), None`, fieldName);
    }
    return entries;
  }

  function parseArray(raw, fieldName) {
    const [shapeText, specText] = raw.split(";");
    if (specText === undefined) throw new FieldError("write the shape, a semicolon, then the spec: 16, 32 ; x, None", fieldName);
    const shape = shapeText.split(",").map((s) => s.trim()).filter(Boolean).map((s) => {
      if (!/^[0-9]+$/.test(s)) throw new FieldError(`shape entry "${s}" is not a whole number in digits`, fieldName);
      return Number(s);
    });
    return { shape, spec: parseSpec(specText, fieldName) };
  }

  function readQuestion() {
    const axes = inputs.mesh.value.split(",").map((s) => s.trim()).filter(Boolean).map((pair) => {
      const [name, size] = pair.split("=").map((s) => (s || "").trim());
      if (!name || !/^[0-9]+$/.test(size || "")) throw new FieldError(`cannot read "${pair}": write each axis as name=size, e.g. x=2`, "mesh");
      return [name, Number(size)];
    });
    const kind = inputs.op.value;
    const arrays = [parseArray(inputs.array0.value, "array0")];
    if (kind === "add" || kind === "matmul") arrays.push(parseArray(inputs.array1.value, "array1"));
    const op = { kind };
    const param = inputs.param.value.trim();
    if (kind === "sum") {
      if (param === "" || param === "all") op.axis = null;
      else if (/^[0-9]+$/.test(param)) op.axis = Number(param);
      else throw new FieldError(`sum over "${param}": give a dimension number, or all`, "param");
    } else if (kind === "reshard") {
      op.spec = parseSpec(param, "param");
    } else if (kind === "matmul" && param) {
      op.out_spec = parseSpec(param, "param");
    }
    return { mesh: { axes, types: inputs.types.value }, arrays, op };
  }

  function writeQuestion(question) {
    const specText = (spec) => spec.map((e) => (e === null ? "None" : Array.isArray(e) ? `(${e.join(", ")})` : e)).join(", ");
    inputs.mesh.value = question.mesh.axes.map(([n, s]) => `${n}=${s}`).join(", ");
    inputs.types.value = question.mesh.types;
    inputs.op.value = question.op.kind;
    inputs.array0.value = `${question.arrays[0].shape.join(", ")} ; ${specText(question.arrays[0].spec)}`;
    inputs.array1.value = question.arrays[1] ? `${question.arrays[1].shape.join(", ")} ; ${specText(question.arrays[1].spec)}` : "";
    const op = question.op;
    inputs.param.value = op.kind === "sum" ? (op.axis === null ? "all" : String(op.axis))
      : op.kind === "reshard" ? specText(op.spec) : op.out_spec ? specText(op.out_spec) : "";
  }

  // A 2D picture of an array's blocks: each block a rectangle in a tint of its first holder's
  // colour (the site's palette), labelled with the devices that hold it, so the numbers, not
  // colours, say who holds what.
  function picture(title, shape, blocks) {
    const rows = shape.length ? shape[0] : 1, cols = shape.length > 1 ? shape[1] : 1;
    const width = 300, height = Math.max(60, Math.min(220, (300 * rows) / cols));
    const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    svg.setAttribute("role", "img");
    svg.setAttribute("class", "explorer-picture");
    const holders = new Map();
    blocks.forEach((block, device) => {
      const key = JSON.stringify([block[0] || [0, 1], block[1] || [0, 1]]);
      if (!holders.has(key)) holders.set(key, []);
      holders.get(key).push(device);
    });
    const described = [];
    for (const [key, devices] of holders) {
      const [[r0, r1], [c0, c1]] = JSON.parse(key);
      const rect = document.createElementNS(svg.namespaceURI, "rect");
      const x = (c0 / cols) * width, y = (r0 / rows) * height;
      const w = ((c1 - c0) / cols) * width, h = ((r1 - r0) / rows) * height;
      Object.entries({ x, y, width: w, height: h, class: `explorer-block explorer-device-${devices[0] % 8}` })
        .forEach(([k, v]) => rect.setAttribute(k, v));
      svg.append(rect);
      const label = document.createElementNS(svg.namespaceURI, "text");
      Object.entries({ x: x + w / 2, y: y + h / 2, "text-anchor": "middle", "dominant-baseline": "middle" })
        .forEach(([k, v]) => label.setAttribute(k, v));
      label.textContent = devices.length > 4 ? `${devices[0]}…${devices[devices.length - 1]}` : devices.join(",");
      svg.append(label);
      described.push(`rows ${r0}:${r1}, columns ${c0}:${c1} on device${devices.length > 1 ? "s" : ""} ${devices.join(", ")}`);
    }
    svg.setAttribute("aria-label", `${title}: ${described.join("; ")}`);
    const note = shape.length > 2 ? ` (dimensions 0 and 1 of ${shape.length})` : "";
    return el("figure", { class: "explorer-figure" }, svg, el("figcaption", { text: `${title}${note}` }));
  }

  function show(question, answer) {
    const chip = chips[inputs.chip.value];
    const parts = [];
    answer.inputs.forEach((input, i) => {
      const name = i ? "B" : "A";
      parts.push(picture(`${name} ${input.type}: local ${input.local_shape.join("×")}, ${input.copies} cop${input.copies > 1 ? "ies" : "y"} of each block`,
        question.arrays[i].shape, input.blocks));
    });
    if (answer.refused) {
      status.textContent = `JAX refuses: ${answer.refused.error}: ${answer.refused.message}. Fix: ${answer.refused.fix}.`;
      status.setAttribute("data-error", "");
      results.replaceChildren(...parts);
      return;
    }
    status.removeAttribute("data-error");
    const r = answer.result;
    parts.push(picture(`result ${r.type}: local ${r.local_shape.join("×") || "a scalar"}, ${r.copies} cop${r.copies > 1 ? "ies" : "y"} of each block`,
      r.shape, r.blocks));
    status.textContent = `Result ${r.spec_text}, typed ${r.type}, each device holding ${r.local_shape.join("×") || "a scalar"}; ${answer.collectives.length} collective${answer.collectives.length === 1 ? "" : "s"}.`;
    const table = el("table", {}, el("caption", { text: "The collectives the compiled program holds" }),
      el("thead", {}, el("tr", {}, ...["collective", "over axes", "per-device shape", "bytes each device sends",
        `bytes ÷ bandwidth on ${chip ? chip.name : "a chip"}: one direction, no latency, no overlap; an order of magnitude`].map((h) => el("th", { text: h })))));
    const body = el("tbody");
    for (const c of answer.collectives) {
      const link = chip ? explorer.bandwidth(chip, question.mesh, c.axes) : null;
      const seconds = link ? explorer.seconds({ bytes_sent: c.bytes }, link.bytesPerSecond) : NaN;
      body.append(el("tr", {}, ...[c.kind, c.axes.join(", "), c.shape.join("×") || "()", Math.round(c.bytes).toLocaleString("en"),
        Number.isFinite(seconds) ? `${(seconds * 1e6).toFixed(2)} µs (${link.label})` : "-"].map((v) => el("td", { text: v }))));
    }
    if (!answer.collectives.length) body.append(el("tr", {}, el("td", { colspan: "5", text: "none: every device has what it needs" })));
    table.append(body);
    results.replaceChildren(...parts, el("div", { class: "planner-table" }, table));
  }

  function clearProblems() {
    for (const p of Object.values(problems)) { p.hidden = true; p.textContent = ""; }
    for (const input of Object.values(inputs)) input.removeAttribute("aria-invalid");
  }

  const PARAM_LABELS = {
    matmul: "out_sharding, optional (a spec)",
    add: "(add takes nothing more)",
    sum: "Dimension to sum over, or all",
    reshard: "Spec to reshard to",
  };
  function labelParam() {
    document.querySelector('label[for="explorer-param"]').textContent = PARAM_LABELS[inputs.op.value];
    inputs.param.disabled = inputs.op.value === "add";
    inputs.array1.disabled = inputs.op.value === "sum" || inputs.op.value === "reshard";
  }

  function update(fromPreset) {
    clearProblems();
    let question;
    try {
      if (fromPreset && inputs.preset.value !== "") writeQuestion(explorer.presets[Number(inputs.preset.value)].question);
      labelParam();
      question = readQuestion();
      const answer = explorer.explain(question);
      show(question, answer);
      history.replaceState(null, "", `#q=${encodeURIComponent(JSON.stringify({ ...question, chip: inputs.chip.value }))}`);
    } catch (error) {
      const key = { arrays: "array0" }[error.field] || error.field || "op";
      const where = problems[key] || problems.op;
      where.textContent = error.message;
      where.hidden = false;
      (inputs[key] || inputs.op).setAttribute("aria-invalid", "true");
      status.setAttribute("data-error", "");
      status.textContent = `Not shown: ${error.message}`;
      results.replaceChildren();
    }
  }

  function fromFragment() {
    const match = location.hash.match(/^#q=(.*)$/);
    if (match) {
      try {
        const saved = JSON.parse(decodeURIComponent(match[1]));
        if (saved.chip in chips) inputs.chip.value = saved.chip;
        writeQuestion(saved);
        return;
      } catch (error) {
        // An address that does not hold a question opens the first preset.
      }
    }
    inputs.preset.value = "0";
    writeQuestion(explorer.presets[0].question);
  }

  fromFragment();
  form.addEventListener("input", (event) => {
    if (event.target !== inputs.preset) inputs.preset.value = "";
    update(event.target === inputs.preset);
  });
  form.addEventListener("submit", (event) => event.preventDefault());
  window.addEventListener("hashchange", () => { fromFragment(); update(false); });
  update(false);
})();
