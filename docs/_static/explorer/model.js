// The sharding explorer's formulas: for a mesh, one or two arrays laid out by PartitionSpecs and
// an operation, each device's blocks, the result's layout, the collectives JAX's compilation
// inserts with the mesh axes they run over, the bytes each device sends, and, on Explicit axes,
// JAX's refusal and its fix.
//
// One source for two readers, as the planner's model.js is: the explorer page runs it in the
// browser, and the site's build runs it in Python (spmd_guide.explorer, through V8) and checks
// every preset against the program XLA compiles.
(function (root) {
  "use strict";

  const OPS = ["add", "matmul", "sum", "reshard"];
  const LARGEST_AXIS = 8;
  const LARGEST_DIM = 1_000_000;
  const AUTO_CONFLICT =
    "on Auto axes the compiler chooses how two different layouts meet; this explorer shows it on Explicit axes, where JAX refuses and names the fix";

  function fail(message, field) {
    const error = new Error(message);
    error.field = field;
    throw error;
  }

  // A spec entry is null (whole), an axis name, or a list of axis names (split over their
  // product, the first outermost).
  function axesOf(entry) {
    if (entry === null || entry === undefined) return [];
    return Array.isArray(entry) ? entry : [entry];
  }

  function sameAxes(a, b) {
    const x = axesOf(a), y = axesOf(b);
    return x.length === y.length && x.every((name, i) => name === y[i]);
  }

  function entryText(entry) {
    const axes = axesOf(entry);
    if (!axes.length) return "None";
    if (axes.length === 1) return `'${axes[0]}'`;
    return `(${axes.map((a) => `'${a}'`).join(", ")})`;
  }

  function specText(spec) {
    return `P(${spec.map(entryText).join(", ")})`;
  }

  function checkMesh(mesh) {
    if (!mesh || !Array.isArray(mesh.axes) || mesh.axes.length < 1 || mesh.axes.length > 3) {
      fail("a mesh has 1 to 3 axes, each a name and a size", "mesh");
    }
    const seen = new Set();
    for (const [name, size] of mesh.axes) {
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(String(name))) {
        fail(`axis name ${JSON.stringify(name)}: use letters, digits and _ , starting with a letter`, "mesh");
      }
      if (seen.has(name)) fail(`two axes are named '${name}': name each axis once`, "mesh");
      seen.add(name);
      if (!Number.isInteger(size) || size < 1 || size > LARGEST_AXIS) {
        fail(`axis '${name}' has size ${JSON.stringify(size)}: give a whole number from 1 to ${LARGEST_AXIS}`, "mesh");
      }
    }
    if (!["Explicit", "Auto"].includes(mesh.types)) fail("axis types are Explicit or Auto", "mesh");
  }

  function axisSizes(mesh) {
    return Object.fromEntries(mesh.axes.map(([name, size]) => [name, size]));
  }

  function checkArray(array, mesh, field) {
    const sizes = axisSizes(mesh);
    if (!array || !Array.isArray(array.shape) || array.shape.length < 1 || array.shape.length > 3) {
      fail("an array has 1 to 3 dimensions", field);
    }
    for (const dim of array.shape) {
      if (!Number.isInteger(dim) || dim < 1 || dim > LARGEST_DIM) {
        fail(`dimension ${JSON.stringify(dim)}: give a whole number from 1 to ${LARGEST_DIM}`, field);
      }
    }
    if (!Array.isArray(array.spec) || array.spec.length !== array.shape.length) {
      fail(`the spec needs one entry per dimension (${array.shape.length}), each an axis, a list of axes or None`, field);
    }
    const used = new Set();
    array.spec.forEach((entry, d) => {
      let ways = 1;
      for (const axis of axesOf(entry)) {
        if (!(axis in sizes)) fail(`the spec names '${axis}', which the mesh has not: use ${Object.keys(sizes).map((a) => `'${a}'`).join(", ")}`, field);
        if (used.has(axis)) fail(`the spec uses '${axis}' twice: an axis splits one dimension at most`, field);
        used.add(axis);
        ways *= sizes[axis];
      }
      if (array.shape[d] % ways) {
        fail(`dimension ${d} (${array.shape[d]}) does not divide over ${entryText(entry)} (${ways} ways): pad it to a multiple of ${ways}`, field);
      }
    });
  }

  function ways(entry, sizes) {
    return axesOf(entry).reduce((n, axis) => n * sizes[axis], 1);
  }

  function localShape(array, sizes) {
    return array.shape.map((dim, d) => dim / ways(array.spec[d], sizes));
  }

  // How many devices hold each block: the product of the sizes of the axes the spec leaves out.
  function copies(array, mesh) {
    const used = new Set(array.spec.flatMap(axesOf));
    return mesh.axes.filter(([name]) => !used.has(name)).reduce((n, [, size]) => n * size, 1);
  }

  // Device d's position along each axis, devices numbered in row-major order of the mesh.
  function coordinates(device, mesh) {
    const position = {};
    let rest = device;
    for (let i = mesh.axes.length - 1; i >= 0; i--) {
      const [name, size] = mesh.axes[i];
      position[name] = rest % size;
      rest = Math.floor(rest / size);
    }
    return position;
  }

  // Each device's block of `array`: [start, stop) per dimension.
  function blocks(array, mesh, sizes) {
    const count = mesh.axes.reduce((n, [, size]) => n * size, 1);
    const local = localShape(array, sizes);
    const found = [];
    for (let device = 0; device < count; device++) {
      const at = coordinates(device, mesh);
      found.push(array.spec.map((entry, d) => {
        let index = 0;
        for (const axis of axesOf(entry)) index = index * sizes[axis] + at[axis];
        return [index * local[d], (index + 1) * local[d]];
      }));
    }
    return found;
  }

  // Bytes one device sends in a collective over `n` devices on a ring (or a pair exchange):
  // all-gather and reduce-scatter move (n - 1)/n of the whole, all-reduce twice that, an
  // all-to-all (n - 1)/n of its input, a permute all of it.
  function bytesSent(kind, n, resultBytes, inputBytes) {
    if (kind === "all-gather") return (resultBytes * (n - 1)) / n;
    if (kind === "all-reduce") return (2 * resultBytes * (n - 1)) / n;
    if (kind === "reduce-scatter") return (inputBytes * (n - 1)) / n;
    if (kind === "all-to-all") return (inputBytes * (n - 1)) / n;
    return inputBytes;
  }

  function product(list) {
    return list.reduce((n, x) => n * x, 1);
  }

  function collective(kind, axes, shape, sizes, dtypeBytes, inputShape) {
    const n = product(axes.map((a) => sizes[a]));
    const resultBytes = product(shape) * dtypeBytes;
    const inputBytes = product(inputShape || shape) * dtypeBytes;
    return { kind, axes, shape, bytes: bytesSent(kind, n, resultBytes, inputBytes) };
  }

  function refusal(message, fix) {
    return { refused: { error: "ShardingTypeError", message, fix } };
  }

  function typeText(array, sizes) {
    return `float32[${array.shape.map((dim, d) => {
      const axes = axesOf(array.spec[d]);
      return axes.length ? `${dim}@${axes.length === 1 ? axes[0] : `(${axes.join(",")})`}` : `${dim}`;
    }).join(",")}]`;
  }

  function add(a, b, mesh, sizes) {
    if (a.shape.join() !== b.shape.join()) fail("add takes two arrays of the same shape", "arrays");
    const explicit = mesh.types === "Explicit";
    const spec = [];
    for (let d = 0; d < a.shape.length; d++) {
      const x = axesOf(a.spec[d]), y = axesOf(b.spec[d]);
      if (x.length && y.length && !sameAxes(a.spec[d], b.spec[d])) {
        if (!explicit) fail(AUTO_CONFLICT, "arrays");
        return refusal(
          `add got incompatible shardings for broadcasting: dimension ${d} is split over ${entryText(a.spec[d])} in one and ${entryText(b.spec[d])} in the other`,
          `reshard one to the other's layout first: jax.reshard(b, ${specText(a.spec)})`,
        );
      }
      spec.push(x.length ? a.spec[d] : b.spec[d]);
    }
    const used = spec.flatMap(axesOf);
    if (new Set(used).size !== used.length) {
      if (!explicit) fail(AUTO_CONFLICT, "arrays");
      return refusal(
        `add operation with inputs: ${typeText(a, sizes)}, ${typeText(b, sizes)} produces an illegally sharded result, ${typeText({ shape: a.shape, spec }, sizes)}, one axis splitting two dimensions`,
        `reshard one input so that each axis splits one dimension: jax.reshard(b, ${specText(a.spec)})`,
      );
    }
    return { result: { shape: a.shape.slice(), spec }, collectives: [] };
  }

  function matmul(a, b, op, mesh, sizes, dtypeBytes) {
    if (a.shape.length !== 2 || b.shape.length !== 2 || a.shape[1] !== b.shape[0]) {
      fail("matmul takes A of shape (I, J) and B of shape (J, K)", "arrays");
    }
    const [aI, aJ] = a.spec;
    const [bJ, bK] = b.spec;
    const explicit = mesh.types === "Explicit";
    const out = op.out_spec && op.out_spec.length ? op.out_spec : null;
    if (out && !explicit) {
      fail("out_sharding names Explicit axes only: on Auto axes leave it empty (the compiler chooses), or make the axes Explicit", "op");
    }
    if (out && !(axesOf(aJ).length && sameAxes(aJ, bJ))) {
      fail("out_sharding is needed only where both operands split the contraction the same way; here leave it empty and the result's layout follows", "op");
    }
    const collectives = [];
    const freeAxes = [...axesOf(aI), ...axesOf(bK)];
    const clash = freeAxes.length !== new Set(freeAxes).size;
    if (axesOf(aJ).length && axesOf(bJ).length) {
      if (!sameAxes(aJ, bJ)) fail("this explorer compares contractions split over the same axes, or over one side only", "arrays");
      if (explicit && !out) {
        return refusal(
          "Contracting dimensions are sharded and it is ambiguous how the output should be sharded",
          `say where the sum goes: jnp.matmul(a, b, out_sharding=${specText([aI, null])}), or ${specText([aI, aJ])} to keep it split`,
        );
      }
      // Each device multiplies its slices; the partial products are added over aJ's axes.
      const partial = [a.shape[0] / ways(aI, sizes), b.shape[1] / ways(bK, sizes)];
      collectives.push(collective("all-reduce", axesOf(aJ), partial, sizes, dtypeBytes));
      const spec = out ? out.slice() : [aI, bK];
      return { result: { shape: [a.shape[0], b.shape[1]], spec }, collectives, case: 3 };
    }
    if (clash) {
      if (explicit) {
        return refusal(
          `dot_general operation with inputs: ${typeText(a, sizes)}, ${typeText(b, sizes)} produces an illegally sharded result, ${typeText({ shape: [a.shape[0], b.shape[1]], spec: [aI, bK] }, sizes)}`,
          `gather one side first: jax.reshard(a, ${specText([null, aJ])})`,
        );
      }
      // The compiler gathers A's rows and keeps B's columns split.
      collectives.push(collective("all-gather", axesOf(aI), [a.shape[0], a.shape[1] / ways(aJ, sizes)], sizes, dtypeBytes));
      return { result: { shape: [a.shape[0], b.shape[1]], spec: [null, bK] }, collectives, case: 4 };
    }
    if (axesOf(aJ).length) {
      collectives.push(collective("all-gather", axesOf(aJ), [a.shape[0] / ways(aI, sizes), a.shape[1]], sizes, dtypeBytes));
      return { result: { shape: [a.shape[0], b.shape[1]], spec: [aI, bK] }, collectives, case: 2 };
    }
    if (axesOf(bJ).length) {
      collectives.push(collective("all-gather", axesOf(bJ), [b.shape[0], b.shape[1] / ways(bK, sizes)], sizes, dtypeBytes));
      return { result: { shape: [a.shape[0], b.shape[1]], spec: [aI, bK] }, collectives, case: 2 };
    }
    return { result: { shape: [a.shape[0], b.shape[1]], spec: [aI, bK] }, collectives, case: 1 };
  }

  function sum(a, op, sizes, dtypeBytes) {
    const axis = op.axis;
    if (axis !== null && (!Number.isInteger(axis) || axis < 0 || axis >= a.shape.length)) {
      fail(`sum over dimension ${JSON.stringify(axis)}: choose one from 0 to ${a.shape.length - 1}, or all`, "op");
    }
    const summed = axis === null ? a.shape.map((_, d) => d) : [axis];
    const kept = a.shape.map((_, d) => d).filter((d) => !summed.includes(d));
    const shape = kept.map((d) => a.shape[d]);
    const spec = kept.map((d) => a.spec[d]);
    const local = kept.map((d) => a.shape[d] / ways(a.spec[d], sizes));
    // One all-reduce for each summed dimension that is split, innermost dimension first.
    const collectives = summed.slice().reverse()
      .filter((d) => axesOf(a.spec[d]).length)
      .map((d) => collective("all-reduce", axesOf(a.spec[d]), local, sizes, dtypeBytes));
    return { result: { shape, spec }, collectives };
  }

  function reshard(a, op, mesh, sizes, dtypeBytes) {
    const target = { shape: a.shape, spec: op.spec };
    checkArray(target, mesh, "op");
    const collectives = [];
    const spec = a.spec;
    const from = spec.map(axesOf), to = op.spec.map(axesOf);
    const local = localShape(a, sizes);
    const moved = [];
    for (let d = spec.length - 1; d >= 0; d--) {
      if (sameAxes(spec[d], op.spec[d])) continue;
      const lost = from[d].filter((axis) => !to[d].includes(axis));
      const gained = to[d].filter((axis) => !from[d].includes(axis));
      if (!lost.length) continue; // splitting further needs no data from elsewhere
      const goesTo = op.spec.findIndex((entry, e) => e !== d && axesOf(entry).length === lost.length && lost.every((axis) => axesOf(entry).includes(axis)));
      if (goesTo >= 0 && !from[goesTo].length && !gained.length) {
        // An axis moves from one dimension to another: an all-to-all over it.
        moved.push(d);
        const shape = local.slice();
        collectives.push(collective("all-to-all", lost, shape, sizes, dtypeBytes, shape));
      } else if (!gained.length && to[d].every((axis, i) => axis === from[d][i])) {
        // Axes dropped from the end: an all-gather over them.
        const shape = local.slice();
        shape[d] = a.shape[d] / ways(op.spec[d], sizes);
        collectives.push(collective("all-gather", lost, shape, sizes, dtypeBytes));
        for (let e = 0; e < d; e++) shape[e] = a.shape[e] / ways(spec[e], sizes);
      } else {
        fail("this explorer's reshards gather an axis's split away, split further, or move an axis to a whole dimension", "op");
      }
    }
    // Gathers run one axis after another, the earlier ones on the arrays the later ones left.
    let current = local.slice();
    for (const c of collectives) {
      if (c.kind !== "all-gather") continue;
      const d = c.shape.findIndex((size, e) => size !== current[e]);
      current = current.map((size, e) => (e === d ? size * product(c.axes.map((x) => sizes[x])) : size));
      c.shape = current.slice();
      c.bytes = bytesSent("all-gather", product(c.axes.map((x) => sizes[x])), product(c.shape) * dtypeBytes, 0);
    }
    return { result: { shape: a.shape.slice(), spec: op.spec.slice() }, collectives };
  }

  function explain(question) {
    const { mesh, arrays, op } = question;
    const dtypeBytes = question.dtype_bytes || 4;
    checkMesh(mesh);
    if (!op || !OPS.includes(op.kind)) fail(`choose an operation: ${OPS.join(", ")}`, "op");
    const needed = op.kind === "add" || op.kind === "matmul" ? 2 : 1;
    if (!Array.isArray(arrays) || arrays.length !== needed) fail(`${op.kind} takes ${needed} array${needed > 1 ? "s" : ""}`, "arrays");
    arrays.forEach((array, i) => checkArray(array, mesh, `array${i}`));
    if (op.out_spec) checkArray({ shape: [arrays[0].shape[0], arrays[1].shape[1]], spec: op.out_spec }, mesh, "op");
    const sizes = axisSizes(mesh);
    let found;
    if (op.kind === "add") found = add(arrays[0], arrays[1], mesh, sizes);
    else if (op.kind === "matmul") found = matmul(arrays[0], arrays[1], op, mesh, sizes, dtypeBytes);
    else if (op.kind === "sum") found = sum(arrays[0], op, sizes, dtypeBytes);
    else found = reshard(arrays[0], op, mesh, sizes, dtypeBytes);
    const inputs = arrays.map((array) => ({
      local_shape: localShape(array, sizes),
      copies: copies(array, mesh),
      blocks: blocks(array, mesh, sizes),
      type: typeText(array, sizes),
    }));
    const answer = { inputs, refused: null, result: null, collectives: [], ...found };
    if (answer.result) {
      answer.result.local_shape = localShape(answer.result, sizes);
      answer.result.type = typeText(answer.result, sizes);
      answer.result.spec_text = specText(answer.result.spec);
      answer.result.blocks = blocks(answer.result, mesh, sizes);
      answer.result.copies = copies(answer.result, mesh);
    }
    answer.bytes_sent = answer.collectives.reduce((n, c) => n + c.bytes, 0);
    return answer;
  }

  function seconds(answer, linkBytesPerSecond) {
    return answer.bytes_sent / linkBytesPerSecond;
  }

  // The bandwidth one device has for a collective over `axes` of `mesh` on `chip` (one of the
  // planner's CHIPS), by the planner's rule (axisBandwidth in docs/_static/planner/model.js): on
  // a TPU, two ICI links where the ring wraps around (a v5p axis of a multiple of 4), one
  // otherwise; on GPUs, NVLink per GPU while the devices the axes span fit in one node, the
  // network beyond. A collective over two axes is given the links of one.
  function bandwidth(chip, mesh, axes) {
    const sizes = Object.fromEntries(mesh.axes);
    if (chip.kind === "tpu") {
      const wraps = chip.wrapsEvery !== undefined && axes.length > 0 &&
        axes.every((axis) => sizes[axis] % chip.wrapsEvery === 0);
      return wraps
        ? { bytesPerSecond: 2 * chip.link, label: "2 × ICI link (a ring with wraparound)" }
        : { bytesPerSecond: chip.link, label: "1 × ICI link (no wraparound assumed)" };
    }
    const names = mesh.axes.map(([name]) => name);
    const outermost = Math.min(...axes.map((axis) => names.indexOf(axis)));
    const span = mesh.axes.slice(outermost).reduce((n, [, size]) => n * size, 1);
    return span <= chip.nodeGpus
      ? { bytesPerSecond: chip.link, label: "NVLink per GPU" }
      : { bytesPerSecond: chip.network, label: "InfiniBand" };
  }

  // Every preset is compiled by the site's build, which asserts that the explorer's layout,
  // collectives, axes and sizes equal the compiled program's.
  const M = (types, axes = [["x", 2], ["y", 4]]) => ({ axes, types });
  const A = (spec, shape = [16, 32]) => ({ shape, spec });
  const B = (spec, shape = [32, 64]) => ({ shape, spec });
  const PRESETS = [
    ["matmul, case 1: no contraction split", "Explicit", M("Explicit"), [A(["x", null]), B([null, "y"])], { kind: "matmul" }],
    ["matmul, case 2: A's contraction split", "Explicit", M("Explicit"), [A(["x", "y"]), B([null, null])], { kind: "matmul" }],
    ["matmul, case 2: B's contraction split", "Explicit", M("Explicit"), [A([null, null]), B(["y", null])], { kind: "matmul" }],
    ["matmul, case 3: both split, refused", "Explicit", M("Explicit"), [A(["x", "y"]), B(["y", null])], { kind: "matmul" }],
    ["matmul, case 3: the sum whole", "Explicit", M("Explicit"), [A(["x", "y"]), B(["y", null])], { kind: "matmul", out_spec: ["x", null] }],
    ["matmul, case 3: the sum split", "Explicit", M("Explicit"), [A(["x", "y"]), B(["y", null])], { kind: "matmul", out_spec: ["x", "y"] }],
    ["matmul, case 4: one axis on both free dimensions, refused", "Explicit", M("Explicit"), [A(["y", null]), B([null, "y"])], { kind: "matmul" }],
    ["matmul, case 1 on Auto axes", "Auto", M("Auto"), [A(["x", null]), B([null, "y"])], { kind: "matmul" }],
    ["matmul, case 2 on Auto axes", "Auto", M("Auto"), [A(["x", "y"]), B([null, null])], { kind: "matmul" }],
    ["matmul, case 3 on Auto axes", "Auto", M("Auto"), [A(["x", "y"]), B(["y", null])], { kind: "matmul" }],
    ["matmul, case 4 on Auto axes", "Auto", M("Auto"), [A(["y", null]), B([null, "y"])], { kind: "matmul" }],
    ["matmul, contraction over two axes", "Explicit", M("Explicit", [["a", 2], ["b", 2], ["c", 2]]), [A(["a", ["b", "c"]]), B([["b", "c"], null])], { kind: "matmul", out_spec: ["a", null] }],
    ["matmul on a 1D mesh, the sum whole", "Explicit", M("Explicit", [["x", 8]]), [A([null, "x"]), B(["x", null])], { kind: "matmul", out_spec: [null, null] }],
    ["matmul on a 1D mesh, rows split", "Explicit", M("Explicit", [["x", 8]]), [A(["x", null]), B([null, null])], { kind: "matmul" }],
    ["sum over a split dimension", "Explicit", M("Explicit"), [A(["x", "y"])], { kind: "sum", axis: 0 }],
    ["sum over the other split dimension", "Explicit", M("Explicit"), [A(["x", "y"])], { kind: "sum", axis: 1 }],
    ["sum of everything", "Explicit", M("Explicit"), [A(["x", "y"])], { kind: "sum", axis: null }],
    ["sum over a whole dimension", "Explicit", M("Explicit"), [A([null, "y"])], { kind: "sum", axis: 0 }],
    ["sum over a dimension split two ways", "Explicit", M("Explicit"), [A([["x", "y"], null])], { kind: "sum", axis: 0 }],
    ["sum on Auto axes", "Auto", M("Auto"), [A(["x", "y"])], { kind: "sum", axis: 1 }],
    ["sum of a 3D array", "Explicit", M("Explicit", [["a", 2], ["b", 2], ["c", 2]]), [A(["a", "b", "c"], [4, 8, 16])], { kind: "sum", axis: 2 }],
    ["reshard: gather everything", "Explicit", M("Explicit"), [A(["x", "y"])], { kind: "reshard", spec: [null, null] }],
    ["reshard: gather one axis", "Explicit", M("Explicit"), [A(["x", "y"])], { kind: "reshard", spec: ["x", null] }],
    ["reshard: gather the inner of two axes", "Explicit", M("Explicit"), [A([["x", "y"], null])], { kind: "reshard", spec: ["x", null] }],
    ["reshard: move an axis to the other dimension", "Explicit", M("Explicit"), [A(["x", null])], { kind: "reshard", spec: [null, "x"] }],
    ["reshard: split a whole array", "Explicit", M("Explicit"), [A([null, null])], { kind: "reshard", spec: ["x", "y"] }],
    ["reshard: split further", "Explicit", M("Explicit"), [A(["x", null])], { kind: "reshard", spec: ["x", "y"] }],
    ["reshard on a 1D mesh", "Explicit", M("Explicit", [["x", 8]]), [A(["x", null])], { kind: "reshard", spec: [null, null] }],
    ["sharding constraint on Auto axes", "Auto", M("Auto"), [A(["x", "y"])], { kind: "reshard", spec: [null, null] }],
    ["add: layouts that merge", "Explicit", M("Explicit"), [A(["x", null]), A([null, "y"])], { kind: "add" }],
    ["add: the same layout", "Explicit", M("Explicit"), [A(["x", "y"]), A(["x", "y"])], { kind: "add" }],
    ["add: one dimension split two ways, refused", "Explicit", M("Explicit"), [A(["x", null]), A(["y", null])], { kind: "add" }],
    ["add: one axis on two dimensions, refused", "Explicit", M("Explicit"), [A(["x", null]), A([null, "x"])], { kind: "add" }],
    ["add on Auto axes", "Auto", M("Auto"), [A(["x", null]), A([null, "y"])], { kind: "add" }],
  ].map(([name, types, mesh, arrays, op]) => ({ name, types, question: { mesh, arrays, op } }));

  root.spmdExplorer = {
    presets: PRESETS,
    presetsJson: () => JSON.stringify(PRESETS),
    bytesSent,
    bandwidth,
    bandwidthJson: (chip, mesh, axes) => JSON.stringify(bandwidth(JSON.parse(chip), JSON.parse(mesh), JSON.parse(axes))),
    explain,
    seconds,
    specText,
    explainJson: (text) => JSON.stringify(explain(JSON.parse(text))),
  };
})(typeof globalThis !== "undefined" ? globalThis : this);
