// The planner's formulas: memory per device, communication per step and a roofline step time
// for training a decoder-only transformer with Adam on a (pipe, data, tensor) mesh.
//
// One source for two readers: the page's form runs it in the browser, and the site's build
// runs it in Python (spmd_guide.planner, through V8) to check it against compiled programs.
// It is a classic script with no imports, so both can load it as it is.
(function (root) {
  "use strict";

  // Rates are published figures. TPUs: How to Scale Your Model (jax-ml/scaling-book), "How to
  // Think About TPUs". GPUs: NVIDIA's H100 and H200 SXM datasheets (dense bf16, NVLink 4 at
  // 900 GB/s both ways, one 400 Gb/s InfiniBand NIC per GPU beyond the 8 GPUs of a node).
  //
  // hbm is the memory a program may use, in bytes. TPUs: what the TPU compiler offers a program
  // on one chip, as its refusals state it ("exceeds available HBM (15.75G)"); the planner page's
  // build reads it again from libtpu. GPUs: what JAX's allocator may hand out by default, its
  // memory_stats()["bytes_limit"] as recorded on the card (about 75% of it; XLA_CLIENT_MEM_FRACTION
  // changes the share): H100 80GB HBM3 in the run h100-2026-11-jax-0.11.2, H200 in
  // h200-2026-11-28-jax-0.11.2 (src/spmd_guide/recorded_gpu_runs; the planner page checks both).
  const GiB = 2 ** 30;
  const CHIPS = {
    v5e: { name: "TPU v5e", hbm: 15.75 * GiB, hbmBandwidth: 8.1e11, flops: 1.97e14, link: 4.5e10, kind: "tpu" },
    v5p: { name: "TPU v5p", hbm: 95.73 * GiB, hbmBandwidth: 2.8e12, flops: 4.59e14, link: 9e10, wrapsEvery: 4, kind: "tpu" },
    v6e: { name: "TPU v6e", hbm: 31.24 * GiB, hbmBandwidth: 1.6e12, flops: 9.2e14, link: 9e10, kind: "tpu" },
    h100: { name: "H100 SXM", hbm: 63.76e9, hbmBandwidth: 3.35e12, flops: 9.89e14, link: 4.5e11, kind: "gpu", nodeGpus: 8, network: 5e10 },
    h200: { name: "H200 SXM", hbm: 112583507968, hbmBandwidth: 4.8e12, flops: 9.89e14, link: 4.5e11, kind: "gpu", nodeGpus: 8, network: 5e10 },
  };

  // The expected step on a GPU chip (expectedStep below): the two constants fitted on the
  // recorded one-GPU steps, the share of its roofline a kernel achieves and the time each kernel
  // adds. spmd_guide.planner.fit_expected fits them; the planner page checks that these are the fit.
  const EXPECTED = { efficiency: 0.76, kernelSeconds: 37e-6 };

  const DTYPE_BYTES = { float32: 4, bfloat16: 2 };
  const REMAT = ["saved", "selective", "full"];
  const SCHEDULES = ["gpipe", "1f1b"];

  const DEFAULTS = {
    layers: 32, width: 4096, heads: 32, mlp: 16384, vocab: 32000, seq: 4096,
    param_dtype: "float32", grad_dtype: "float32", opt_dtype: "float32", act_dtype: "bfloat16",
    batch: 256, microbatches: 1, remat: "full",
    data: 16, zero: 3, tensor: 4, sequence_parallel: false, pipe: 1, schedule: "1f1b",
    chip: "v5e",
  };

  const INTEGER_FIELDS = {
    layers: "layers", width: "width (d_model)", heads: "attention heads", mlp: "MLP width",
    vocab: "vocabulary", seq: "sequence length", batch: "global batch",
    microbatches: "microbatches", data: "data axis", tensor: "tensor axis", pipe: "pipeline stages",
  };

  // Larger sizes than any model has; it keeps every product exact in a double.
  const LARGEST = 10_000_000;

  function describe(value) {
    return typeof value === "number" && !Number.isFinite(value) ? String(value) : JSON.stringify(value);
  }

  // A refusal names the setting to change (`field`), so that a form can mark that field.
  function fail(message, field) {
    const error = new Error(message);
    error.field = field;
    throw error;
  }

  function divides(what, size, by, byName, fix, field) {
    if (size % by !== 0) {
      fail(`${what} (${size}) is not divisible by ${byName} (${by}); ${fix}`, field);
    }
  }

  function check(config) {
    const c = Object.assign({}, DEFAULTS, config);
    // Addresses shared before the policy was renamed say "none" for it.
    if (c.remat === "none") c.remat = "saved";
    for (const key of Object.keys(c)) {
      if (!(key in DEFAULTS)) fail(`unknown setting "${key}"; the settings are: ${Object.keys(DEFAULTS).join(", ")}`);
    }
    for (const [key, label] of Object.entries(INTEGER_FIELDS)) {
      const value = c[key];
      if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 1 || value > LARGEST) {
        fail(`${label} must be a whole number from 1 to ${LARGEST.toLocaleString("en-US")}, got ${describe(value)}`, key);
      }
    }
    for (const key of ["param_dtype", "grad_dtype", "opt_dtype", "act_dtype"]) {
      if (!(c[key] in DTYPE_BYTES)) fail(`${key} must be float32 or bfloat16, got ${JSON.stringify(c[key])}`, key);
    }
    if (!REMAT.includes(c.remat)) fail(`remat must be one of ${REMAT.join(", ")}, got ${JSON.stringify(c.remat)}`, "remat");
    if (!SCHEDULES.includes(c.schedule)) fail(`schedule must be gpipe or 1f1b, got ${JSON.stringify(c.schedule)}`, "schedule");
    if (![0, 1, 2, 3].includes(c.zero)) fail(`ZeRO stage must be 0, 1, 2 or 3, got ${JSON.stringify(c.zero)}`, "zero");
    if (typeof c.sequence_parallel !== "boolean") fail("sequence parallel must be true or false", "sequence_parallel");
    if (!(c.chip in CHIPS)) fail(`chip must be one of ${Object.keys(CHIPS).join(", ")}, got ${JSON.stringify(c.chip)}`, "chip");
    divides("width", c.width, c.heads, "the heads", "choose a head count that divides the width", "heads");
    divides("heads", c.heads, c.tensor, "the tensor axis", "choose a tensor axis that divides the heads", "tensor");
    divides("MLP width", c.mlp, c.tensor, "the tensor axis", "choose a tensor axis that divides the MLP width", "tensor");
    divides("vocabulary", c.vocab, c.tensor, "the tensor axis", "pad the vocabulary to a multiple of the tensor axis", "vocab");
    if (c.sequence_parallel) {
      if (c.tensor === 1) fail("sequence parallel splits activations over the tensor axis, which has size 1; give the tensor axis 2 or more devices, or turn sequence parallel off", "sequence_parallel");
      divides("sequence length", c.seq, c.tensor, "the tensor axis", "choose a sequence length that the tensor axis divides, or turn sequence parallel off", "seq");
    }
    divides("layers", c.layers, c.pipe, "the pipeline stages", "choose a stage count that divides the layers", "pipe");
    divides("global batch", c.batch, c.data * c.microbatches, "data axis × microbatches",
      `choose a batch that is a multiple of ${c.data * c.microbatches}, or fewer microbatches`, "batch");
    if (c.zero > 0 && c.data === 1) fail(`ZeRO stage ${c.zero} shards over the data axis, which has size 1; give the data axis 2 or more devices, or choose stage 0`, "zero");
    if (c.zero === 2 && c.pipe > 1) fail("ZeRO stage 2 splits the accumulation loop's running sum of gradients, and the pipeline schedules here accumulate inside the pipeline instead: choose stage 1 or 3 with a pipeline, or one stage", "zero");
    if (c.zero > 0) {
      divides("width", c.width, c.data, "the data axis", `ZeRO stage ${c.zero} splits each weight's width over the data axis: choose a data axis that divides ${c.width}`, "data");
    }
    return c;
  }

  function fmt(n) {
    return Number.isInteger(n) ? n.toLocaleString("en-US") : n.toPrecision(4);
  }

  function ring(size) {
    return (size - 1) / size;
  }

  // One entry of an answer: its value, the formula in symbols, and the formula with the
  // configuration's numbers put in.
  function entry(value, formula, numbers) {
    return { value, formula, numbers };
  }

  function plan(config) {
    const c = check(config);
    const chip = CHIPS[c.chip];
    const P = DTYPE_BYTES[c.param_dtype], G = DTYPE_BYTES[c.grad_dtype];
    const O = DTYPE_BYTES[c.opt_dtype], A = DTYPE_BYTES[c.act_dtype];
    const { layers: L, width: h, heads: n, mlp: f, vocab: V, seq: s } = c;
    const { data: d, tensor: t, pipe: p, microbatches: m } = c;
    const devices = d * t * p;
    const z = c.zero;
    const fsdp = z === 3 ? d : 1;
    const stateSplit = z >= 1 ? d : 1;
    const sp = c.sequence_parallel ? t : 1;

    const perLayer = 4 * h * h + 2 * h * f;
    const edges = 2 * V * h;
    const total = L * perLayer + edges;
    // Elements one device stores when the data axis splits by `split`.
    const held = (split) => (L / p) * perLayer / t / split + edges / t / split;

    const memory = {};
    memory.parameters = entry(
      held(fsdp) * P,
      "(L/p · (4h² + 2hf) + 2Vh) / (t · z_p) × bytes(param), z_p = d under ZeRO 3, else 1",
      `(${L}/${p} · ${fmt(perLayer)} + ${fmt(edges)}) / (${t} · ${fsdp}) × ${P}`);
    memory.optimizer = entry(
      2 * held(stateSplit) * O + 4,
      "2 moments × (L/p · (4h² + 2hf) + 2Vh) / (t · z_o) × bytes(opt) + 4 (step count), z_o = d under ZeRO 1, 2 or 3, else 1",
      `2 × ${fmt(held(stateSplit))} × ${O} + 4`);
    // Gradients live inside the step: with ZeRO 3 each layer's is reduce-scattered as the
    // backward pass makes it; otherwise every device makes every gradient whole first.
    // Microbatches' gradients are summed into a running total beside the current one's, in
    // an accumulation loop and in a pipeline alike; ZeRO 2 keeps that total split over data.
    const accumulating = m > 1;
    if (accumulating && z === 2) {
      memory.gradients = entry(
        held(1) * G + held(d) * G,
        "(current + accumulated / d) × (L/p · (4h² + 2hf) + 2Vh) / t × bytes(grad)",
        `${fmt(held(1))} × ${G} + ${fmt(held(d))} × ${G}`);
    } else {
      const gradCopies = accumulating ? 2 : 1;
      memory.gradients = entry(
        gradCopies * held(fsdp) * G,
        (accumulating ? "2 (accumulated and current) × " : "") + "(L/p · (4h² + 2hf) + 2Vh) / (t · z_p) × bytes(grad)",
        `${gradCopies} × ${fmt(held(fsdp))} × ${G}`);
    }

    const rows = c.batch / (d * m);
    const tokens = rows * s;
    // Kept per layer for the backward pass, per microbatch in flight.
    const wide = 4 * h / sp;
    const split = (4 * h + 2 * f) / t;
    const probs = (n / t) * s * s * rows;
    const keptPerLayer = {
      saved: A * (tokens * (wide + split) + probs),
      selective: A * tokens * (wide + split),
      full: A * tokens * h / sp,
    }[c.remat];
    const keptFormula = {
      saved: "bytes(act) · (b·s·(4h/sp + (4h + 2f)/t) + b·(n/t)·s²)",
      selective: "bytes(act) · b·s·(4h/sp + (4h + 2f)/t)",
      full: "bytes(act) · b·s·h/sp",
    }[c.remat];
    // A pipeline keeps what its layers keep for each microbatch a stage has started and not
    // yet finished backward: GPipe, differentiated by jax.grad as written, keeps every tick's
    // (the m + p − 1 ticks, bubble included); 1F1B at most p, at stage 0.
    const gpipe = p > 1 && c.schedule === "gpipe";
    let inFlight = 1, inFlightFormula = "1";
    if (p > 1) {
      inFlight = gpipe ? m + p - 1 : Math.min(p, m);
      inFlightFormula = gpipe ? "(m + p − 1) (GPipe: every tick)" : "min(p, m) (1F1B, stage 0)";
    }
    memory.activations = entry(
      (L / p) * keptPerLayer * inFlight,
      `L/p × ${keptFormula} × ${inFlightFormula}`,
      `${L}/${p} × ${fmt(keptPerLayer)} × ${inFlight}, with b = ${fmt(rows)} rows per device per microbatch`);

    // While it runs: the layer being differentiated, with its attention probabilities
    // recomputed if they were not kept; the float32 logits and their gradient;
    // under ZeRO 3 one layer's weights gathered whole. 1F1B's last stage computes a
    // microbatch's loss and lets go of its logits before its layers run backward, so the two
    // are not held at once.
    const layerWhole = A * (tokens * (wide + split) + probs);
    // GPipe computes the loss once, for all microbatches, after the pipeline.
    const logitRows = gpipe ? c.batch / d : rows;
    const logits = 2 * 4 * logitRows * s * V / t;
    const gathered = z === 3 ? 2 * A * perLayer / t : 0;
    const oneFOneB = p > 1 && !gpipe;
    const layerFormula = "bytes(act)·(b·s·(4h/sp + (4h+2f)/t) + b·(n/t)·s²)";
    const logitFormula = "2 × 4·" + (gpipe ? "(B/d)" : "b") + "·s·V/t";
    memory.working = entry(
      (oneFOneB ? Math.max(layerWhole, logits) : layerWhole + logits) + gathered,
      (oneFOneB ? `max(${layerFormula}, ${logitFormula})` : `${layerFormula} + ${logitFormula}`) +
        (z === 3 ? " + 2 × bytes(act)·(4h² + 2hf)/t" : ""),
      (oneFOneB ? `max(${fmt(layerWhole)}, ${fmt(logits)})` : `${fmt(layerWhole)} + ${fmt(logits)}`) +
        (z === 3 ? ` + ${fmt(gathered)}` : ""));
    memory.batch = entry(
      4 * (c.batch / d) * (s + 1),
      "4 × B/d × (s + 1) (int32 tokens)",
      `4 × ${c.batch / d} × ${s + 1}`);

    const memoryTotal = Object.values(memory).reduce((sum, part) => sum + part.value, 0);

    // Communication per step, per device, by collective and mesh axis: the bytes each device
    // sends (ring algorithms: (k-1)/k of the buffer for a gather or scatter, twice for a sum).
    const comms = [];
    const whole = held(1);
    if (d > 1) {
      if (z === 0) {
        comms.push({ op: "all-reduce", axis: "data", what: "gradients", ...entry(2 * ring(d) * whole * G,
          "2(d−1)/d × gradient bytes", `2 × ${d - 1}/${d} × ${fmt(whole * G)}`) });
      } else {
        // ZeRO 2 and 3 scatter each microbatch's gradients into their split running sum;
        // ZeRO 1 sums the microbatches whole and scatters once.
        const scatters = z >= 2 ? m : 1;
        comms.push({ op: "reduce-scatter", axis: "data", what: "gradients", ...entry(ring(d) * whole * G * scatters,
          (scatters > 1 ? "m × " : "") + "(d−1)/d × gradient bytes", `${scatters > 1 ? m + " × " : ""}${d - 1}/${d} × ${fmt(whole * G)}`) });
        // ZeRO 3 gathers each layer's weights for the forward pass and again for the backward
        // (whose recomputation, under remat, uses the same gathered copy), per microbatch.
        const gathers = z === 3 ? 2 * m : 1;
        const gatherBytes = z === 3 ? A : P;
        comms.push({ op: "all-gather", axis: "data", what: z === 3 ? "weights, per use" : "updated parameters",
          ...entry(gathers * ring(d) * whole * gatherBytes,
            (z === 3 ? `${gathers} uses × ` : "") + `(d−1)/d × ${z === 3 ? "weights in bytes(act)" : "parameter bytes"}`,
            `${gathers} × ${d - 1}/${d} × ${fmt(whole * gatherBytes)}`) });
      }
    }
    if (t > 1) {
      // Megatron: two sums of b·s·h per layer forward, two backward, two more when the
      // forward is recomputed; with sequence parallel each is a gather and a scatter instead.
      const perPass = (c.remat === "full" ? 6 : 4) * (L / p) * m * A * tokens * h;
      const op = c.sequence_parallel ? "all-gather + reduce-scatter" : "all-reduce";
      comms.push({ op, axis: "tensor", what: "activations", ...entry(2 * ring(t) * perPass,
        `2(t−1)/t × ${c.remat === "full" ? 6 : 4} × L/p × m × bytes(act)·b·s·h`,
        `2 × ${t - 1}/${t} × ${c.remat === "full" ? 6 : 4} × ${L / p} × ${m} × ${fmt(A * tokens * h)}`) });
    }
    if (p > 1) {
      comms.push({ op: "collective-permute", axis: "pipe", what: "activations and their gradients",
        ...entry(2 * m * A * tokens * h / sp, "2 × m × bytes(act)·b·s·h/sp",
          `2 × ${m} × ${fmt(A * tokens * h / sp)}`) });
    }

    // Roofline: each bound on its own; the step takes at least the largest.
    const matmulFlops = 2 * (L * perLayer + V * h) * c.batch * s;
    const attentionFlops = 4 * L * s * s * h * c.batch;
    // Selective remat recomputes the scores (Q·Kᵀ, half the attention's matmuls); full remat
    // the whole forward pass of the layers.
    const recompute = { saved: 0, selective: attentionFlops / 2, full: matmulFlops - 2 * V * h * c.batch * s + attentionFlops }[c.remat];
    const flops = 3 * (matmulFlops + attentionFlops) + recompute;
    const bubble = p > 1 ? (m + p - 1) / m : 1;
    const compute = flops / devices / chip.flops * bubble;
    // Weights read whole (gathered, under ZeRO 3) per pass per microbatch, the optimizer's
    // update, and the kept activations written and read back. Not the intermediate values each
    // layer writes and reads again, which a fused kernel may keep on chip.
    const passes = c.remat === "saved" ? 3 : 4;
    const keptTraffic = 2 * (L / p) * keptPerLayer * m;
    const hbmBytes = passes * m * held(1) * A + held(fsdp) * (2 * P + G) + 4 * held(stateSplit) * O + keptTraffic;
    const time = {};
    time.compute = entry(compute,
      "(6·N·B·s + 12·L·s²·h·B + recompute) / devices / bf16 peak" + (p > 1 ? " × (m + p − 1)/m" : ""),
      `${flops.toExponential(3)} FLOPs / ${devices} / ${chip.flops.toExponential(2)}` + (p > 1 ? ` × ${bubble.toFixed(3)}` : ""));
    time.memory = entry(hbmBytes / chip.hbmBandwidth,
      "(weights read per pass + optimizer update + kept activations written and read) / HBM bandwidth",
      `${hbmBytes.toExponential(3)} B / ${chip.hbmBandwidth.toExponential(2)} B/s`);
    const axisSize = { data: d, tensor: t, pipe: p };
    const inner = { tensor: 1, data: t, pipe: t * d };
    for (const comm of comms) {
      const bandwidth = axisBandwidth(chip, axisSize[comm.axis], inner[comm.axis], comm.op);
      comm.seconds = comm.value / bandwidth.bytesPerSecond;
      comm.bandwidth = bandwidth.label;
    }
    const commSeconds = comms.reduce((sum, comm) => sum + comm.seconds, 0);
    // Collectives on different axes use different links and may run at once: the bound is the
    // busiest axis's time; their sum is the serial figure.
    const perAxis = {};
    for (const comm of comms) perAxis[comm.axis] = (perAxis[comm.axis] || 0) + comm.seconds;
    const busiestAxis = Math.max(0, ...Object.values(perAxis));
    time.communication = entry(busiestAxis, "max over axes of Σ bytes sent on that axis / its bandwidth",
      Object.entries(perAxis).map(([axis, seconds]) => `${seconds.toExponential(2)} s (${axis})`).join(", max of ") || "0");
    const bound = Math.max(compute, time.memory.value, busiestAxis);

    const stepSeconds = { overlapped: bound, serial: compute + commSeconds };
    let expected = null;
    if (chip.kind === "gpu") {
      const kernels = stepKernels(c, chip);
      const roofline = kernels.reduce((sum, k) => sum + k.count * k.seconds, 0);
      const launched = kernels.reduce((sum, k) => sum + k.count, 0);
      const work = roofline / EXPECTED.efficiency + launched * EXPECTED.kernelSeconds;
      stepSeconds.expected = Math.max(bound, work + commSeconds);
      expected = {
        rooflineSeconds: roofline, kernels: launched, communicationSeconds: commSeconds,
        ...EXPECTED,
        ...entry(stepSeconds.expected,
          "max(bound, Σ kernels' roofline / efficiency + kernels × overhead + communication, not overlapped)",
          `max(${bound.toExponential(3)}, ${roofline.toExponential(3)} s / ${EXPECTED.efficiency} + ` +
          `${fmt(launched)} × ${EXPECTED.kernelSeconds.toExponential(1)} s + ${commSeconds.toExponential(3)} s)`),
        breakdown: kernels.map(({ what, count, seconds }) => ({ what, count, seconds: count * seconds })),
      };
    }

    return {
      config: c,
      chip: { key: c.chip, ...chip },
      devices,
      parameters: total,
      memory,
      memoryTotal,
      fits: memoryTotal <= chip.hbm,
      comms,
      time,
      stepSeconds,
      expected,
      tokensPerSecond: c.batch * s / bound,
    };
  }

  // The kernels one device runs in a step, as the expected time counts them: each with its
  // FLOPs and the bytes it reads and writes, timed at its roofline (the larger of FLOPs at the
  // chip's peak and bytes at its HBM bandwidth). Matrix products, attention's two products per
  // head and the memory-bound steps between them (normalisation, softmax, residual adds, the
  // activation, the loss, casts, the optimizer's update). A backward pass counts twice a forward
  // one; remat adds the forward work it recomputes; a pipeline's bubble stretches every layer.
  function stepKernels(c, chip) {
    const A = DTYPE_BYTES[c.act_dtype], P = DTYPE_BYTES[c.param_dtype];
    const G = DTYPE_BYTES[c.grad_dtype], O = DTYPE_BYTES[c.opt_dtype];
    const { layers: L, width: h, heads: n, mlp: f, vocab: V, seq: s } = c;
    const { data: d, tensor: t, pipe: p, microbatches: m } = c;
    const fsdp = c.zero === 3 ? d : 1, stateSplit = c.zero >= 1 ? d : 1;
    const sp = c.sequence_parallel ? t : 1;
    const rows = c.batch / (d * m), tokens = rows * s, headsHere = n / t, dh = h / n;
    const perLayer = 4 * h * h + 2 * h * f, edges = 2 * V * h;
    const held = (split) => (L / p) * perLayer / t / split + edges / t / split;
    const roof = (flops, bytes) => Math.max(flops / chip.flops, bytes / chip.hbmBandwidth);
    const matmul = (M, K, N, batch = 1) => roof(2 * batch * M * K * N, A * batch * (M * K + K * N + M * N));
    const memory = (bytes) => roof(0, bytes);
    const scores = rows * headsHere * s * s;
    const forward = [
      ["layer norms", 2, memory(2 * A * tokens * h / sp)],
      ["q, k, v projections", 3, matmul(tokens, h, h / t)],
      ["attention scores", 1, matmul(s, dh, s, rows * headsHere)],
      ["softmax", 1, memory(2 * A * scores)],
      ["attention values", 1, matmul(s, s, dh, rows * headsHere)],
      ["output projection", 1, matmul(tokens, h / t, h)],
      ["residual adds", 2, memory(3 * A * tokens * h / sp)],
      ["MLP up", 1, matmul(tokens, h, f / t)],
      ["activation", 1, memory(2 * A * tokens * f / t)],
      ["MLP down", 1, matmul(tokens, f / t, h)],
      ["weights cast", 6, memory(perLayer / t * (P / fsdp + A) / 6)],
    ];
    const recomputed = { saved: [], selective: ["attention scores", "softmax"], full: forward.map((k) => k[0]) }[c.remat];
    // Per layer: forward once, backward twice over, and the recomputed part once more; for each
    // microbatch, in every tick of a pipeline's schedule.
    const layerRuns = (L / p) * m * (p > 1 ? (m + p - 1) / m : 1);
    const kernels = forward.map(([what, count, seconds]) => ({
      what, count: count * layerRuns * (3 + (recomputed.includes(what) ? 1 : 0)), seconds,
    }));
    const logits = tokens * V / t;
    kernels.push(
      { what: "embedding", count: 3 * m, seconds: memory(2 * A * tokens * h) },
      { what: "unembedding", count: 3 * m, seconds: matmul(tokens, h, V / t) },
      { what: "loss on float32 logits", count: 3 * m, seconds: memory(2 * 4 * logits) },
      { what: "optimizer update", count: 8 * 3, seconds: memory((held(stateSplit) * (2 * P + G + 4 * O) + held(fsdp) * (P + G)) / 24) },
    );
    if (m > 1) kernels.push({ what: "gradient accumulation", count: 8 * m, seconds: memory(3 * G * held(fsdp) / 8) });
    return kernels;
  }

  // The settings a reader can change without changing the model, the batch, the chip or the
  // number of devices: each alternative value of each, in the order a tie is settled.
  function alternatives(c) {
    const changes = [];
    for (const remat of REMAT) if (remat !== c.remat) changes.push(["remat", remat]);
    for (const zero of [0, 1, 2, 3]) if (zero !== c.zero) changes.push(["zero", zero]);
    // Every microbatch count that divides each device's share of the batch.
    const share = c.batch / c.data;
    for (let m = 1; m * m <= share; m++) {
      if (share % m !== 0) continue;
      for (const count of new Set([m, share / m])) if (count !== c.microbatches) changes.push(["microbatches", count]);
    }
    changes.push(["sequence_parallel", !c.sequence_parallel]);
    if (c.pipe > 1) for (const schedule of SCHEDULES) if (schedule !== c.schedule) changes.push(["schedule", schedule]);
    return changes;
  }

  // For a step that does not fit: the one setting whose change saves the most memory per device
  // (the first in alternatives() order on a tie), with what the step then needs; null when the
  // step fits or no single change saves any.
  function suggest(config) {
    const asked = plan(config);
    if (asked.fits) return null;
    let best = null;
    for (const [field, value] of alternatives(asked.config)) {
      let answer;
      try {
        answer = plan({ ...asked.config, [field]: value });
      } catch {
        continue;  // a value check() refuses for this configuration
      }
      if (best === null || answer.memoryTotal < best.memoryTotal) {
        best = {
          field, from: asked.config[field], value, memoryTotal: answer.memoryTotal,
          fits: answer.fits, stepSeconds: answer.stepSeconds.overlapped,
        };
      }
    }
    return best !== null && best.memoryTotal < asked.memoryTotal ? best : null;
  }

  // The bandwidth one device has for a collective over a mesh axis.
  function axisBandwidth(chip, size, innerDevices, op) {
    if (chip.kind === "tpu") {
      // A ring sends both ways round, over two links, only where the axis closes into a ring:
      // a v5p slice has wraparound links along a dimension that is a multiple of 4, a v5e or
      // v6e slice only along a whole pod's 16 (How to Scale Your Model, part 2). The planner
      // cannot tell how a mesh axis lies on the slice, so it counts wraparound on v5p axes of a
      // multiple of 4 only. A permute to the next stage uses one link.
      const wraps = wrapsAround(chip, size) && op !== "collective-permute";
      return wraps
        ? { bytesPerSecond: 2 * chip.link, label: "2 × ICI link (a ring with wraparound)" }
        : { bytesPerSecond: chip.link, label: "1 × ICI link (no wraparound assumed)" };
    }
    if (size * innerDevices <= chip.nodeGpus) {
      return { bytesPerSecond: chip.link, label: "NVLink" };
    }
    return { bytesPerSecond: chip.network, label: "InfiniBand" };
  }

  function wrapsAround(chip, size) {
    return chip.wrapsEvery !== undefined && size % chip.wrapsEvery === 0;
  }

  // A configuration as the settings that differ from the defaults, "tensor=8&remat=saved": the
  // page's address carries it after the "#".
  function fragment(config) {
    return Object.entries(check(config))
      .filter(([key, value]) => value !== DEFAULTS[key])
      .map(([key, value]) => `${encodeURIComponent(key)}=${encodeURIComponent(String(value))}`)
      .join("&");
  }

  function planJson(text) {
    try {
      return JSON.stringify(plan(JSON.parse(text)));
    } catch (error) {
      return JSON.stringify({ error: error.message });
    }
  }

  root.spmdPlanner = {
    CHIPS, DEFAULTS, DTYPE_BYTES, EXPECTED, REMAT, SCHEDULES, plan, check, fragment, planJson, suggest,
    suggestJson: (text) => JSON.stringify(suggest(JSON.parse(text))),
    fragmentJson: (text) => fragment(JSON.parse(text)),
    defaultsJson: () => JSON.stringify(DEFAULTS),
    chipsJson: () => JSON.stringify(CHIPS),
    expectedJson: () => JSON.stringify(EXPECTED),
  };
})(globalThis);
