// The exact calculator of the model pages (archcalc/site/calculator.py writes its data into each page).
// Numbers are exact rationals of BigInts, [numerator, denominator], so a 100T-parameter count keeps every
// digit. Hyperparameters are bound as `archcalc count --set` binds them: the typed value, else the size's,
// else the default; each must come out whole and within its bounds, as must every width the IR uses.
(function () {
  "use strict";

  class CalcError extends Error {}

  const abs = (a) => (a < 0n ? -a : a);
  const gcd = (a, b) => { a = abs(a); b = abs(b); while (b) { [a, b] = [b, a % b]; } return a; };
  function Q(num, den = 1n) {
    if (den === 0n) throw new CalcError("division by zero");
    if (den < 0n) { num = -num; den = -den; }
    const g = gcd(num, den) || 1n;
    return [num / g, den / g];
  }
  const add = (a, b) => Q(a[0] * b[1] + b[0] * a[1], a[1] * b[1]);
  const sub = (a, b) => Q(a[0] * b[1] - b[0] * a[1], a[1] * b[1]);
  const mul = (a, b) => Q(a[0] * b[0], a[1] * b[1]);
  const div = (a, b) => Q(a[0] * b[1], a[1] * b[0]);
  const cmp = (a, b) => { const x = a[0] * b[1], y = b[0] * a[1]; return x < y ? -1 : x > y ? 1 : 0; };
  const isInt = (a) => a[1] === 1n;
  function floor(a) {
    let q = a[0] / a[1];  // BigInt division truncates toward zero
    if (a[0] % a[1] !== 0n && a[0] < 0n) q -= 1n;
    return [q, 1n];
  }
  const ceil = (a) => { const f = floor([-a[0], a[1]]); return [-f[0], 1n]; };
  const mod = (a, b) => { if (b[0] === 0n) throw new CalcError("division by zero"); return sub(a, mul(b, floor(div(a, b)))); };
  function pow(a, e) {
    let k = e[0] / e[1];  // Python's int(): toward zero
    if (k < 0n) { a = div([1n, 1n], a); k = -k; }
    if (k > 64n) throw new CalcError("exponent too large");
    let out = [1n, 1n];
    for (let i = 0n; i < k; i++) out = mul(out, a);
    return out;
  }

  // Evaluate a JSON tree (see archcalc/site/exprjson.py); `name` resolves a symbol.
  function evaluate(t, name) {
    const ev = (x) => evaluate(x, name);
    const op = t[0];
    switch (op) {
      case "num": return Q(BigInt(t[1]), BigInt(t[2]));
      case "bool": return t[1];
      case "name": return name(t[1]);
      case "+": return t.slice(1).map(ev).reduce(add);
      case "*": return t.slice(1).map(ev).reduce(mul);
      case "-": return sub(ev(t[1]), ev(t[2]));
      case "/": return div(ev(t[1]), ev(t[2]));
      case "//": return floor(div(ev(t[1]), ev(t[2])));
      case "%": return mod(ev(t[1]), ev(t[2]));
      case "**": return pow(ev(t[1]), ev(t[2]));
      case "neg": { const a = ev(t[1]); return [-a[0], a[1]]; }
      case "pos": return ev(t[1]);
      case "not": return !ev(t[1]);
      case "and": return Boolean(ev(t[1])) && Boolean(ev(t[2]));
      case "or": return Boolean(ev(t[1])) || Boolean(ev(t[2]));
      case "pw": {
        for (const [value, cond] of t.slice(1)) if (ev(cond)) return ev(value);
        throw new CalcError("no case of a piecewise formula applies");
      }
      case "fn": return fn(t[1], t.slice(2).map(ev));
      default: {
        const [a, b] = [ev(t[1]), ev(t[2])];
        const c = typeof a === "boolean" ? (a === b ? 0 : 1) : cmp(a, b);
        switch (op) {
          case "==": return c === 0;
          case "!=": return c !== 0;
          case "<": return c < 0;
          case "<=": return c <= 0;
          case ">": return c > 0;
          case ">=": return c >= 0;
        }
      }
    }
    throw new CalcError(`unknown operation ${op}`);
  }

  function fn(f, x) {
    switch (f) {
      case "floor": return floor(x[0]);
      case "ceil": return ceil(x[0]);
      case "abs": return [abs(x[0][0]), x[0][1]];
      case "min": return x.reduce((a, b) => (cmp(b, a) < 0 ? b : a));
      case "max": return x.reduce((a, b) => (cmp(b, a) > 0 ? b : a));
      case "round_up": if (x[1][0] === 0n) throw new CalcError(`${f}() with a multiple of zero`); return mul(x[1], ceil(div(x[0], x[1])));
      case "round_down": if (x[1][0] === 0n) throw new CalcError(`${f}() with a multiple of zero`); return mul(x[1], floor(div(x[0], x[1])));
    }
    throw new CalcError(`unknown function ${f}`);
  }

  // Digits in groups of three, "-1234567" -> "-1,234,567": one pass over the text (a regular expression with a
  // lookahead for groups of three took seconds on a pasted 100,000-digit number: quadratic).
  function digits(s) {
    const sign = s.startsWith("-") ? "-" : "";
    const d = sign ? s.slice(1) : s;
    const parts = [];
    for (let end = d.length; end > 0; end -= 3) parts.push(d.slice(Math.max(0, end - 3), end));
    return sign + parts.reverse().join(",");
  }
  const show = (a) => (a[1] === 1n ? digits(a[0].toString()) : `${digits(a[0].toString())}/${digits(a[1].toString())}`);
  const showQ = (a) => (isInt(a) ? digits(a[0].toString()) : `${a[0]}/${a[1]}`);
  // What a message may echo of a typed text: the CLI's way (archcalc/cli/output.py) for long digits, else 40 characters.
  const echo = (text) => (text.length <= 40 ? text : `${text.slice(0, 39)}…`);
  const manyDigits = (d) => (d.length <= 24 ? d : `a number of ${digits(String(d.length))} digits`);

  // The command line's bounds, checked on the text before BigInt() reads it (so a pasted 100,000-digit number is
  // refused at once, in the CLI's words): a hyperparameter has at most max_digits digits (the expression parser's
  // bound, archcalc/spec/expr.py) and is at most max_value (--set: "is absurdly large"); the tokens field is
  // a whole number from 1 to max_int, as --seq-len (archcalc/cli/output.py's positive_int).
  function wholeNumber(data, hp, raw) {
    const text = raw.replace(/[\s,_]/g, "");
    if (!/^-?\d+$/.test(text)) throw new CalcError(`${hp.name} = ${echo(raw.trim())}: expected a whole number`);
    const d = text.replace(/^-/, "");
    if (d.length > data.max_digits) {
      throw new CalcError(`${hp.name} = ${manyDigits(d)}: number has more than ${data.max_digits} digits; expected at most 1e+18`);
    }
    return BigInt(text);
  }
  function tokens(data, input) {
    const d = input.value.replace(/[\s,_]/g, "");
    const label = input.dataset.label || input.name;  // a run's field: its option's name (--batch), as the CLI says it
    if (!/^\d+$/.test(d)) throw new CalcError(`${label} = ${echo(input.value.trim())}: expected a positive whole number`);
    const significant = d.replace(/^0+/, "");
    const max = data.max_int ?? data.max_value;  // a page written before the tokens field had its own bound: the same 10^18
    const v = significant.length > max.length ? null : BigInt(significant || "0");
    if (v === null || v < 1n || v > BigInt(max)) {
      throw new CalcError(`${label}: expected a positive integer of at most 10^18, got ${manyDigits(d)}`);
    }
    return v;
  }

  // Bind every hyperparameter: typed value, else the size's expression, else the default.
  function bindValues(data, form, size) {
    const exprs = {}, values = {}, trail = [];
    const given = data.sizes[size] || {};
    for (const hp of data.hyperparameters) {
      const input = form.elements[hp.name];
      if (hp.type === "bool") { exprs[hp.name] = ["bool", input.checked]; continue; }
      if (input.value.replace(/[\s,_]/g, "") !== "") {
        exprs[hp.name] = ["num", wholeNumber(data, hp, input.value).toString(), "1"];
      } else if (hp.name in given) exprs[hp.name] = given[hp.name];
      else if (hp.default) exprs[hp.name] = hp.default;
    }
    const max = [BigInt(data.max_value), 1n];
    const byName = Object.fromEntries(data.hyperparameters.map((h) => [h.name, h]));
    function valueOf(name) {
      if (name in values) return values[name];
      if (!(name in exprs)) throw new CalcError(`${name} has no value: type one`);
      if (trail.includes(name)) throw new CalcError(`cycle among values: ${trail.join(" -> ")} -> ${name}`);
      trail.push(name);
      const v = evaluate(exprs[name], valueOf);
      trail.pop();
      const hp = byName[name];
      if (hp.type === "int") {
        if (!isInt(v)) throw new CalcError(`${name} = ${showQ(v)} is not an integer; expected a whole number`);
        if (cmp(v, [BigInt(hp.min), 1n]) < 0) throw new CalcError(`${name} = ${show(v)}; expected at least ${hp.min}`);
        if (hp.max !== null && cmp(v, [BigInt(hp.max), 1n]) > 0) throw new CalcError(`${name} = ${show(v)}; expected at most ${hp.max}`);
        if (cmp(v, max) > 0) throw new CalcError(`${name} = ${show(v)} is absurdly large; expected at most 1e+18`);
        if (hp.multiple_of && v[0] % BigInt(hp.multiple_of) !== 0n) throw new CalcError(`${name} = ${show(v)}; expected a multiple of ${hp.multiple_of}`);
      }
      values[name] = v;
      return v;
    }
    for (const hp of data.hyperparameters) valueOf(hp.name);
    return values;
  }

  function compute(data, form) {
    const size = form.elements.size.value;
    const values = bindValues(data, form, size);
    const combo = data.combos.find((c) => Object.entries(c.when).every(([k, v]) => values[k] === v));
    if (!combo) throw new CalcError("this combination of switches does not build; see the spec's notes");
    const seqInput = form.querySelector("[data-archcalc-seq]");
    const S = [tokens(data, seqInput), 1n];
    const name = (n) => (n === seqInput.name || (n === "S" && !(n in values)) ? S : values[n]);
    const max = [BigInt(data.max_value), 1n];
    for (const [tree, text] of combo.widths) {
      const v = evaluate(tree, name);
      if (!isInt(v) || v[0] < 1n || cmp(v, max) > 0) throw new CalcError(`${text} = ${showQ(v)}; expected a positive integer`);
    }
    for (const [a, b, an, bn] of combo.divides) {
      const [x, y] = [evaluate(a, name), evaluate(b, name)];
      if (x[0] % y[0] !== 0n) throw new CalcError(`${an} = ${show(x)} is not a multiple of ${bn} = ${show(y)}`);
    }
    for (const [a, b, an, bn] of combo.at_most) {
      const [x, y] = [evaluate(a, name), evaluate(b, name)];
      if (cmp(x, y) > 0) throw new CalcError(`${an} = ${show(x)} exceeds ${bn} = ${show(y)}`);
    }
    const out = {};
    let total = [0n, 1n];
    for (const [role, tree] of Object.entries(combo.roles)) {
      const v = evaluate(tree, name);
      out[`role:${role}`] = v;
      total = add(total, v);
    }
    out.total = total;
    out.active = floor(evaluate(combo.active, name));
    out.train_flops_per_token = div(mul([3n, 1n], evaluate(combo.forward, name)), S);
    out.bf16_bytes = mul([2n, 1n], total);
    return { out, values };
  }

  // ---- Memory and inference: archcalc/site/calc_runtime.py exports, per size, what `archcalc memory` and `archcalc
  // infer` compose with a run's inputs; these are the same closed forms (archcalc/backends/memory.py, parallel_plan.py,
  // infer/__init__.py, infer/decode.py), exact. A RunNote is why a figure is not shown (not a published size; the
  // command line's refusal of this run).
  class RunNote extends Error {}
  const R = (pair) => Q(BigInt(pair[0]), BigInt(pair[1]));
  const Z = (s) => [BigInt(s), 1n];
  const minQ = (a, b) => (cmp(a, b) <= 0 ? a : b);
  const maxQ = (a, b) => (cmp(a, b) >= 0 ? a : b);
  const sumQ = (xs) => xs.reduce(add, [0n, 1n]);
  const chunk = (n, parts) => (n + parts - 1n) / parts;  // torch.chunk's first piece: the fullest rank's
  const bytesOf = (elements, width) => ceil(mul(elements, width));  // whole bytes (packed int4: 3 elements need 2)
  // Σ elements · min(tokens, window) of a cache's terms [elements, window, ...] (window null: every token)
  const cached = (terms, tokens, part = () => 1n) =>
    terms.reduce((s, t) => s + (BigInt(t[0]) / part(t)) * (t[1] === null || tokens < BigInt(t[1]) ? tokens : BigInt(t[1])), 0n);

  // `archcalc memory --seq-len S --batch B --dtype D --dp --zero --tp` (mixed precision, one pipeline stage).
  function memoryFigures(data, rt, run) {
    const width = R(data.runtime.dtypes[run.dtype]);
    for (const [what, v] of rt.tp) {
      if (BigInt(v) % run.tp !== 0n) {
        throw new RunNote(`--tp ${run.tp}: tensor parallelism splits attention heads, key/value heads and MLP widths evenly ` +
          `over the ranks, and ${run.tp} does not divide ${what} = ${digits(v)} (${data.spec} ${run.size})`);
      }
    }
    const [B, S, tp, dp, zero] = [run.batch, run.seq, run.tp, run.dp, run.zero];
    const out = {
      "mem:weights": bytesOf(Z(rt.params), width),
      "mem:kv": bytesOf(Z(cached(rt.kv, S) * B), width),
      "mem:state": bytesOf(Z(BigInt(rt.state) * B), width),
      "mem:gpu_kv": bytesOf(Z(cached(rt.kv, S, (t) => (t[2] ? tp : 1n)) * B), width),
    };
    const totals = [0n, 0n, 0n], per = [2n, 2n, 12n];  // bf16 weights and gradients, fp32 master and AdamW moments
    for (const [shape, copies, dim, vocab] of rt.leaves) {
      const full = shape.map(BigInt), local = full.slice();
      if (tp > 1n && dim >= 0) local[dim] = chunk(local[dim], tp);
      const grad = tp > 1n && vocab && !(zero >= 2n && dp > 1n) ? full : local;  // a vocab-split embedding's gradient: whole
      [[local, 3n], [grad, 2n], [local, 1n]].forEach(([held, stage], j) => {
        let rows = held.length ? held[0] : 1n;
        if (dp > 1n && zero >= stage && held.length) rows = chunk(rows, dp);
        totals[j] += BigInt(copies) * rows * held.slice(1).reduce((a, b) => a * b, 1n) * per[j];
      });
    }
    [out["mem:gpu_weights"], out["mem:gpu_gradients"], out["mem:gpu_optimizer"]] = totals.map((t) => [t, 1n]);
    out["mem:gpu_train"] = [totals[0] + totals[1] + totals[2], 1n];
    return out;
  }

  // A line x -> const + Σ c · min(x, w) (archcalc/backends/infer/decode.py's Line), and its closed-form sums.
  function lineOn(line, lo, hi) {
    let a = line.c, b = [0n, 1n];
    for (const [c, w] of line.terms) {
      if (w === null || hi <= w) b = add(b, c);
      else a = add(a, mul(c, [w, 1n]));
    }
    return [a, b];
  }
  function pieces(lo, hi, windows) {
    const out = [];
    let start = lo;
    for (const w of [...windows].filter((w) => lo <= w && w < hi).sort((x, y) => (x < y ? -1 : x > y ? 1 : 0))) {
      out.push([start, w]);
      start = w + 1n;
    }
    if (start <= hi) out.push([start, hi]);
    return out;
  }
  function series(a, b, lo, hi) {
    const n = hi - lo + 1n;
    return n <= 0n ? [0n, 1n] : add(mul(a, [n, 1n]), mul(b, [((lo + hi) * n) / 2n, 1n]));
  }
  function decodeSums(flops, bytes, first, last, peak, bandwidth) {
    const windows = new Set([...flops.terms, ...bytes.terms].map((t) => t[1]).filter((w) => w !== null));
    let compute = [0n, 1n], memory = [0n, 1n];
    for (const [lo, hi] of pieces(first, last, windows)) {
      const [fa, fb] = lineOn(flops, lo, hi), [ba, bb] = lineOn(bytes, lo, hi);
      const start = sub(mul(fa, bandwidth), mul(ba, peak)), slope = sub(mul(fb, bandwidth), mul(bb, peak));
      let split;  // [compute-bound lo, hi, memory-bound lo, hi]: compute-bound where start + slope·x >= 0
      if (slope[0] === 0n) split = start[0] >= 0n ? [lo, hi, hi + 1n, hi] : [lo, lo - 1n, lo, hi];
      else if (slope[0] > 0n) {
        const t = minQ(maxQ(ceil(div([-start[0], start[1]], slope)), [lo, 1n]), [hi + 1n, 1n])[0];
        split = [t, hi, lo, t - 1n];
      } else {
        const t = maxQ(minQ(floor(div([-start[0], start[1]], slope)), [hi, 1n]), [lo - 1n, 1n])[0];
        split = [lo, t, t + 1n, hi];
      }
      compute = add(compute, series(fa, fb, split[0], split[1]));
      memory = add(memory, series(ba, bb, split[2], split[3]));
    }
    return { compute, memory };
  }

  // `archcalc infer --hardware H --batch B --prompt P --new-tokens N --dtype D --tp T`: the roofline's time to first
  // token and decode throughput, refused as the command line refuses a run whose weights and cache do not fit.
  function inferFigures(data, rt, run) {
    if (rt.infer_error) throw new RunNote(rt.infer_error);
    const c = rt.infer, rtData = data.runtime;
    const [B, P, N, tp] = [run.batch, run.prompt, run.new_tokens, run.tp];
    if (P + N > BigInt(data.max_int)) {
      throw new RunNote(`--prompt + --new-tokens = ${digits(String(P + N))}: expected at most 10^18 (no run comes near; the arithmetic stays cheap)`);
    }
    const hw = rtData.hardware.find((h) => h[0] === run.hardware);
    const dtype = rtData.aliases[run.dtype] || run.dtype;
    if (!(dtype in hw[4])) {
      throw new RunNote(`${hw[0]} has no published dense ${dtype} peak in archcalc's table (it lists ${Object.keys(hw[4]).join(", ")}); give one with --peak`);
    }
    for (const [what, v] of c.heads) {
      if (BigInt(v) % tp !== 0n) throw new RunNote(`--tp ${tp} does not divide the ${v} ${what} of the attention layers; tensor parallelism splits heads`);
    }
    const act = R(rtData.dtypes[run.dtype]), peak = [BigInt(hw[4][dtype]), 1n], bandwidth = [BigInt(hw[3]), 1n];
    const capacity = [BigInt(hw[2]), 1n], perGpu = [1n, tp];
    const [total, embeddings, row, experts] = c.w.slice(0, 4).map((x) => mul(R(x), act));
    const [share, tied] = [R(c.w[4]), c.w[5]];
    const read = (tokens) => {  // WeightBytes.read: every weight, embedding rows looked up, the experts reached
      const reached = experts[0] ? mul(experts, minQ([1n, 1n], mul([tokens, 1n], share))) : [0n, 1n];
      const lookups = tied ? embeddings : minQ(embeddings, mul([tokens, 1n], row));
      return sumQ([total, [-experts[0], experts[1]], [-embeddings[0], embeddings[1]], reached, lookups]);
    };
    const kv = (tokens, seqs = B) => mul([seqs * cached(rt.kv, tokens), 1n], act);
    const perSequenceState = mul(Z(rt.state), act);
    const state = mul([B, 1n], perSequenceState);
    const perSequence = add(kv(P + N, 1n), perSequenceState);
    const largest = perSequence[0] ? maxQ([0n, 1n], floor(div(sub(mul(capacity, [tp, 1n]), total), perSequence)))[0] : 0n;
    const needed = div(sumQ([total, kv(P + N), state]), [tp, 1n]);
    if (cmp(needed, capacity) > 0) {
      throw new RunNote(`${data.spec} ${run.size}: weights + KV cache${rt.state !== "0" ? " + recurrent state" : ""} need ` +
        `${pyFixed(toDouble(needed) / 1e9, 1)} GB per GPU, ${hw[0]} has ${pyFixed(Number(hw[2]) / 1e9, 0)} GB; the largest ` +
        `batch that fits is ${largest} (or raise --tp, or quantize with --weights-dtype / --kv-dtype)`);
    }
    const [body, head] = c.io.map(BigInt);
    const prefillFlops = mul(evaluate(c.prefill, (n) => (n === "B" ? [B, 1n] : [P, 1n])), perGpu);
    const prefillBytes = mul(sumQ([read(B * P), kv(P), state, mul([B * (P * body + head), 1n], act)]), perGpu);
    const [tCompute, tMemory] = [div(prefillFlops, peak), div(prefillBytes, bandwidth)];
    const out = { "inf:ttft": `${pySeconds(maxQ(tCompute, tMemory))}   ${cmp(tCompute, tMemory) >= 0 ? "compute" : "memory"}-bound` };
    const steps = N - 1n;
    const ioBytes = mul([B * (body + head), 1n], act);
    const flopsLine = { c: [B * BigInt(c.step[0]), 1n], terms: c.step[1].map(([k, w]) => [[B * BigInt(k), 1n], w === null ? null : BigInt(w)]) };
    const kvTerms = rt.kv.map(([e, w]) => [mul([B * BigInt(e), 1n], act), w === null ? null : BigInt(w)]);
    const bytesLine = { c: sumQ([read(B), ioBytes, mul([2n, 1n], state)]), terms: kvTerms };
    const sums = decodeSums(flopsLine, bytesLine, P + 1n, P + N - 1n, peak, bandwidth);
    const seconds = mul(add(div(sums.compute, peak), div(sums.memory, bandwidth)), perGpu);
    if (steps > 0n) {
      const bound = sums.compute[0] && !sums.memory[0] ? "compute" : sums.memory[0] && !sums.compute[0] ? "memory" : "mixed";
      out["inf:tps"] = `${pyFixed(toDouble(div([B * steps, 1n], seconds)), 1)} tokens/s   ${bound}-bound`;
      out["inf:step"] = pySeconds(div(seconds, [steps, 1n]));
    }
    out["inf:fits"] = `${pyFixed(toDouble(needed) / 1e9, 2)} GB of ${pyFixed(Number(hw[2]) / 1e9, 2)} GB; largest batch ${digits(String(largest))}`;
    return out;
  }

  // Python's float formatting, digit for digit: float(Fraction) rounds a rational to the nearest double (ties to
  // even), and format() rounds the double's exact value to the digits shown (ties to even). The CLI prints these.
  function toDouble(a) {
    let [p, d] = a;
    if (p === 0n) return 0;
    const neg = p < 0n;
    if (neg) p = -p;
    let e = p.toString(2).length - d.toString(2).length - 53;  // p / d / 2^e in [2^52, 2^53), within one step
    let qt, r, den;
    for (;;) {
      const num = e >= 0 ? p : p << BigInt(-e);
      den = e >= 0 ? d << BigInt(e) : d;
      qt = num / den;
      r = num - qt * den;
      if (qt >= 1n << 53n) e += 1;
      else if (qt < 1n << 52n) e -= 1;
      else break;
    }
    if (2n * r > den || (2n * r === den && qt % 2n === 1n)) qt += 1n;
    const x = Number(qt) * 2 ** e;
    return neg ? -x : x;
  }
  function exactOf(x) {  // a finite double's exact value, [num, den]
    const view = new DataView(new ArrayBuffer(8));
    view.setFloat64(0, x);
    const hi = view.getUint32(0), lo = view.getUint32(4), biased = (hi >>> 20) & 0x7ff;
    let m = (BigInt(hi & 0xfffff) << 32n) | BigInt(lo);
    if (biased) m |= 1n << 52n;
    const e = (biased || 1) - 1075;
    if (hi >>> 31) m = -m;
    return e >= 0 ? [m << BigInt(e), 1n] : Q(m, 1n << BigInt(-e));
  }
  const roundEven = (a) => {  // a rational to the nearest integer, ties to even
    const f = floor(a)[0], twice = 2n * (a[0] - f * a[1]);
    return twice > a[1] || (twice === a[1] && f % 2n !== 0n) ? f + 1n : f;
  };
  function pyFixed(x, places) {  // f"{x:,.{places}f}"
    const scaled = roundEven(mul(exactOf(Math.abs(x)), [10n ** BigInt(places), 1n])).toString().padStart(places + 1, "0");
    const whole = digits(scaled.slice(0, scaled.length - places));
    return (x < 0 && /[1-9]/.test(scaled) ? "-" : "") + whole + (places ? `.${scaled.slice(-places)}` : "");
  }
  function pyG3(x) {  // f"{x:,.3g}" for x > 0
    const a = exactOf(x);
    let exp = a[0].toString().length - a[1].toString().length;  // 10^exp <= a < 10^(exp + 1), within one step
    while (cmp(a, [10n ** BigInt(Math.max(exp, 0)), 10n ** BigInt(Math.max(-exp, 0))]) < 0) exp -= 1;
    while (cmp(a, [10n ** BigInt(Math.max(exp + 1, 0)), 10n ** BigInt(Math.max(-exp - 1, 0))]) >= 0) exp += 1;
    const shift = 2 - exp;
    let n = roundEven(mul(a, shift >= 0 ? [10n ** BigInt(shift), 1n] : [1n, 10n ** BigInt(-shift)]));
    if (n === 1000n) { n = 100n; exp += 1; }
    const s = n.toString(), trim = (t) => (t.includes(".") ? t.replace(/0+$/, "").replace(/\.$/, "") : t);
    if (exp < -4 || exp >= 3) return `${trim(`${s[0]}.${s.slice(1)}`)}e${exp < 0 ? "-" : "+"}${String(Math.abs(exp)).padStart(2, "0")}`;
    if (exp >= 2) return s;
    return trim(exp >= 0 ? `${s.slice(0, exp + 1)}.${s.slice(exp + 1)}` : `0.${"0".repeat(-exp - 1)}${s}`);
  }
  const pySeconds = (q) => {  // archcalc/cli/infer_show.py's _seconds()
    const s = toDouble(q);
    return s < 1 ? `${pyG3(s * 1e3)} ms` : `${pyG3(s)} s`;
  };
  const gib = (q) => `${pyFixed(toDouble(div(q, [2n ** 30n, 1n])), 2)} GiB`;  // archcalc/cli/memory_cmd.py's gib()

  // The run's inputs, each checked as the command line's option is (a whole number from 1 to 10^18; --zero 0 to 3).
  function runInputs(data, form, size) {
    const run = { size, dtype: form.elements["run-dtype"].value, hardware: form.elements["run-hardware"].value };
    if (!(run.dtype in data.runtime.dtypes)) throw new CalcError(`--dtype ${echo(run.dtype)}: expected one of ${Object.keys(data.runtime.dtypes).join(", ")}`);
    if (!data.runtime.hardware.some((h) => h[0] === run.hardware)) throw new CalcError(`--hardware ${echo(run.hardware)}: not in archcalc's table`);
    for (const name of ["batch", "dp", "tp", "prompt", "new_tokens"]) run[name] = tokens(data, form.elements[`run-${name}`]);
    run.zero = BigInt(form.elements["run-zero"].value);
    run.seq = tokens(data, form.querySelector("[data-archcalc-seq]"));
    return run;
  }

  // The figures of the run, or why not: {out, notes: {memory, inference}}.
  function runFigures(data, form, values, size) {
    const run = runInputs(data, form, size);
    const rt = data.runtime.sizes[size];
    const same = rt && Object.entries(rt.values).every(([k, v]) => (typeof v === "boolean" ? values[k] === v : cmp(values[k], Z(v)) === 0));
    const notes = {}, out = {};
    if (!same) {
      const text = `memory and inference are worked out for the sizes as published; for these values run ` +
        `archcalc memory ${data.spec} --size ${size} --set NAME=VALUE (and archcalc infer)`;
      return { out, notes: { memory: text, inference: text } };
    }
    for (const [part, figures] of [["memory", memoryFigures], ["inference", inferFigures]]) {
      try {
        if (part === "memory" && rt.error) throw new RunNote(rt.error);
        Object.assign(out, figures(data, rt, run));
      } catch (e) {
        if (!(e instanceof RunNote)) throw e;
        notes[part] = e.message;
      }
    }
    return { out, notes };
  }

  // A memory figure: exact bytes, and beside them the GiB `archcalc memory` prints; an inference figure: its text.
  function showRun(dd, v) {
    const near = dd.parentElement.querySelector("dd[data-approx]");
    dd.textContent = v === undefined ? "—" : typeof v === "string" ? v : show(v);
    if (near) near.textContent = v === undefined || typeof v === "string" ? "" : gib(v);
    if (dd.dataset.archcalc === "mem:state" && v !== undefined) dd.parentElement.hidden = v[0] === 0n;
  }

  function update(root, data) {
    const form = root.querySelector("form");
    const error = root.querySelector("[data-archcalc=error]");
    try {
      const { out, values } = compute(data, form);
      const run = data.runtime ? runFigures(data, form, values, form.elements.size.value) : { out: {}, notes: {} };
      for (const dd of root.querySelectorAll("dd[data-archcalc]")) {
        const key = dd.dataset.archcalc;
        if (/^(mem|inf):/.test(key)) { showRun(dd, run.out[key]); continue; }
        dd.textContent = key in out ? show(out[key]) : "0";
        dd.parentElement.hidden = !(key in out) || (key.startsWith("role:") && out[key][0] === 0n);
        const near = dd.parentElement.querySelector("dd[data-approx]");
        if (near) near.textContent = key in out ? readable(key, out[key]) : "";
      }
      share(form, data);
      for (const hp of data.hyperparameters) {
        const input = form.elements[hp.name];
        if (hp.type === "int" && input.value.trim() === "") input.placeholder = show(values[hp.name]);
      }
      for (const note of root.querySelectorAll("[data-archcalc-note]")) {
        note.textContent = run.notes[note.dataset.archcalcNote] || "";
        note.hidden = !note.textContent;
      }
      error.hidden = true;
      error.textContent = "";
      root.dataset.state = "ok";
    } catch (e) {
      if (!(e instanceof CalcError)) throw e;
      for (const dd of root.querySelectorAll("dd[data-archcalc], dd[data-approx]")) dd.textContent = "—";
      for (const note of root.querySelectorAll("[data-archcalc-note]")) note.hidden = true;
      error.textContent = e.message;
      error.hidden = false;
      root.dataset.state = "error";
    }
  }

  // An exact figure in readable units (archcalc/site/calculator.py's readable() writes the same): bytes in KiB to
  // PiB, other figures in K, M, B, T; three significant digits; nothing under 1,000.
  function readable(key, q) {
    let x = Number(q[0]) / Number(q[1]);
    if (!Number.isFinite(x) || Math.abs(x) < 1000) return "";
    const [base, units] = key.endsWith("bytes") ? [1024, ["KiB", "MiB", "GiB", "TiB", "PiB"]] : [1000, ["K", "M", "B", "T"]];
    for (const unit of units) {
      x /= base;
      if (Math.abs(x) < 1000 || unit === units[units.length - 1]) return `${x.toPrecision(3)} ${unit}`;
    }
    return "";
  }

  // What fillSize puts in a hyperparameter's field for a size: its value there, else empty (bool: checked or not).
  function preset(data, size, hp) {
    const tree = (data.sizes[size] || {})[hp.name];
    if (hp.type === "bool") return Boolean(tree ? tree[1] : hp.default ? hp.default[1] : false);
    return tree && tree[0] === "num" && tree[2] === "1" ? tree[1] : "";
  }

  // The size and the values typed over it in the page's address (?size=7b&L=40), so that a result can be shared; a
  // page opened with them fills the form from there (the form checks them as it checks typing).
  function share(form, data) {
    const size = form.elements.size.value;
    const params = new URLSearchParams({ size });
    for (const hp of data.hyperparameters) {
      const input = form.elements[hp.name];
      const value = hp.type === "bool" ? input.checked : input.value.trim();
      if (value !== preset(data, size, hp)) params.set(hp.name, String(value).slice(0, 200));
    }
    const seq = form.querySelector("[data-archcalc-seq]");
    if (seq && seq.value !== seq.defaultValue) params.set(seq.name, seq.value.slice(0, 200));
    for (const input of form.querySelectorAll("[name^='run-']")) {  // the run's inputs, where changed
      const initial = input.tagName === "SELECT" ? input.querySelector("option[selected]")?.value : input.defaultValue;
      if (input.value !== initial) params.set(input.name, input.value.slice(0, 200));
    }
    try {
      history.replaceState(null, "", `?${params}${location.hash}`);
    } catch (e) {  // a page opened from disk may not rewrite its address: the calculator works the same
    }
  }

  function restore(form, data) {
    const params = new URLSearchParams(location.search);
    if (!params.has("size") || !(params.get("size") in data.sizes)) return;
    form.elements.size.value = params.get("size");
    fillSize(form, data);
    for (const [name, value] of params) {
      const input = form.elements[name];
      if (name === "size" || !input || !input.tagName) continue;
      if (input.type === "checkbox") input.checked = value === "true";
      else input.value = value.slice(0, 200);
    }
  }

  function fillSize(form, data) {
    const size = form.elements.size.value;
    for (const hp of data.hyperparameters) {
      const input = form.elements[hp.name];
      if (hp.type === "bool") input.checked = preset(data, size, hp);
      else input.value = preset(data, size, hp);
    }
  }

  function start(root) {
    const data = JSON.parse(root.querySelector("script.archcalc-calc__data").textContent);
    const form = root.querySelector("form");
    form.addEventListener("submit", (e) => { e.preventDefault(); update(root, data); });  // Enter, or the button
    restore(form, data);
    form.addEventListener("input", (e) => {
      if (e.target.name === "size") fillSize(form, data);
      update(root, data);
    });
    form.addEventListener("change", (e) => {
      if (e.target.name === "size") fillSize(form, data);
      update(root, data);
    });
    update(root, data);
    root.dataset.ready = "true";
  }

  // Inline code breaks only between words, or after a "." or "/" of a long dotted name or path: never inside a
  // word, nor after the hyphens of an option such as --dtype (browsers break there). Copied text is unchanged.
  function breakable(code) {
    if (code.children.length || code.closest("pre")) return;
    const text = code.textContent;
    code.textContent = "";
    for (const piece of text.split(/(\s+)/)) {
      if (!piece) continue;
      if (/^\s+$/.test(piece)) { code.appendChild(document.createTextNode(piece)); continue; }
      const parts = piece.length >= 24 ? piece.split(/(?<=[./])/) : [piece];
      parts.forEach((part, i) => {
        if (i) code.appendChild(document.createElement("wbr"));
        const span = document.createElement("span");
        span.className = "archcalc-nobr";
        span.textContent = part;
        code.appendChild(span);
      });
    }
  }

  // A table in a div of class archcalc-sortable sorts by a column when its header's button is pressed (again: the other way).
  // Each cell's data-sort holds the value to sort by (a number, or text); cells without one sort last.
  function sortable(table) {
    const body = table.tBodies[0];
    table.querySelectorAll("thead th").forEach((th, column) => {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "archcalc-sort";
      button.append(...th.childNodes);
      th.appendChild(button);
      button.addEventListener("click", () => {
        const down = th.getAttribute("aria-sort") !== "descending";
        table.querySelectorAll("thead th").forEach((other) => other.removeAttribute("aria-sort"));
        th.setAttribute("aria-sort", down ? "descending" : "ascending");
        const key = (row) => row.cells[column].dataset.sort;
        const rows = [...body.rows];
        rows.sort((a, b) => {
          const x = key(a), y = key(b);
          if (x === undefined || y === undefined) return (x === undefined) - (y === undefined);
          const nx = Number(x), ny = Number(y);
          const order = Number.isNaN(nx) || Number.isNaN(ny) ? x.localeCompare(y) : (nx > ny) - (nx < ny);
          return down ? -order : order;
        });
        body.append(...rows);
      });
    });
  }

  window.__archcalc = { toDouble, pyFixed, pyG3 };  // for the tests (tests/site/test_calculator_runtime.py) and the console
  document.querySelectorAll("article code").forEach(breakable);
  document.querySelectorAll(".archcalc-calc").forEach(start);
  document.querySelectorAll(".archcalc-sortable table").forEach(sortable);
})();
