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
    if (!/^\d+$/.test(d)) throw new CalcError(`${input.name} = ${echo(input.value.trim())}: expected a positive whole number`);
    const significant = d.replace(/^0+/, "");
    const max = data.max_int ?? data.max_value;  // a page written before the tokens field had its own bound: the same 10^18
    const v = significant.length > max.length ? null : BigInt(significant || "0");
    if (v === null || v < 1n || v > BigInt(max)) {
      throw new CalcError(`${input.name}: expected a positive integer of at most 10^18, got ${manyDigits(d)}`);
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

  function update(root, data) {
    const form = root.querySelector("form");
    const error = root.querySelector("[data-archcalc=error]");
    try {
      const { out, values } = compute(data, form);
      for (const dd of root.querySelectorAll("dd[data-archcalc]")) {
        const key = dd.dataset.archcalc;
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
      error.hidden = true;
      error.textContent = "";
      root.dataset.state = "ok";
    } catch (e) {
      if (!(e instanceof CalcError)) throw e;
      for (const dd of root.querySelectorAll("dd[data-archcalc], dd[data-approx]")) dd.textContent = "—";
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
    form.addEventListener("submit", (e) => e.preventDefault());
    restore(form, data);
    form.addEventListener("input", (e) => {
      if (e.target.name === "size") fillSize(form, data);
      update(root, data);
    });
    form.addEventListener("change", (e) => {
      if (e.target.name === "size") { fillSize(form, data); update(root, data); }
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

  document.querySelectorAll("article code").forEach(breakable);
  document.querySelectorAll(".archcalc-calc").forEach(start);
  document.querySelectorAll(".archcalc-sortable table").forEach(sortable);
})();
