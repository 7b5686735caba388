// The one front end of the book's explorers: an anywidget ES module (llmmath/widgets.py).
//
// It draws the view that `llmmath.explorers.explore(kind, state)` returns: the controls, then
// notes, tables, bars and SVG plots. When the reader changes a control it asks for a new view:
//  - in a Jupyter kernel (JupyterLab, Notebook 7, VS Code, Colab), by sending the new state to
//    the kernel, which calls the same function and sends the view back;
//  - on the published site, where `globalThis.llmmathRuntime` exists (_static/runtime/), by
//    calling that function in the reader's browser on Pyodide, loaded on first use.
// Nothing here computes a number: every figure shown comes from the view.

const SVG = "http://www.w3.org/2000/svg";

function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v);
  }
  node.append(...children);
  return node;
}

function s(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

const round = (x) => Math.round(x * 10) / 10;

// `message` (English, a msgid of llmmath's catalogue: llmmath.explorers.RUNTIME_MESSAGES)
// with its {fields} filled in: in the page's language on the site (the runtime's `t`),
// in English in Jupyter.
function words(message, fields = {}) {
  const runtime = globalThis.llmmathRuntime;
  if (runtime && runtime.t) return runtime.t(message, fields);
  return message.replace(/\{(\w+)\}/g, (all, name) => (name in fields ? String(fields[name]) : all));
}

// A view names colours of the palette (c0 … c5, grey, ink: llmmath.explorers.PALETTE);
// explorer.css sets them for the light and the dark theme. Anything else is used as given.
const colour = (c) => (/^[a-z][a-z0-9]*$/.test(c) ? `var(--llmmath-${c})` : c);
const fill = (c) => ({ style: `fill:${colour(c)}` });
const stroke = (c) => ({ style: `fill:none;stroke:${colour(c)}` });

// Every figure scales down to its box (viewBox; width:100% up to its own width, in
// explorer.css) and is named for assistive technology.
function figure(width, height, name) {
  return s("svg", { width, height, viewBox: `0 0 ${width} ${height}`,
    class: "llmmath-figure", role: "img", "aria-label": name });
}

// --- blocks ---------------------------------------------------------------------------------

function drawNote(block) {
  return h("div", { class: `llmmath-note llmmath-${block.tone}`, text: block.text });
}

function drawTable(block) {
  // A wide table scrolls inside its own box on a narrow screen, never the page.
  return h("div", { class: "llmmath-scroll" }, drawTableOnly(block));
}

function drawTableOnly(block) {
  const align = (i) => (block.align[i] === "r" ? "llmmath-r" : "llmmath-l");
  const table = h("table", { class: "llmmath-table" });
  if (block.headers) {
    const row = h("tr");
    block.headers.forEach((text, i) => row.append(h("th", { class: align(i), text })));
    table.append(h("thead", {}, row));
  }
  const body = h("tbody");
  for (const cells of block.rows) {
    const row = h("tr");
    cells.forEach((text, i) => row.append(h("td", { class: align(i), text })));
    body.append(row);
  }
  table.append(body);
  return table;
}

function drawBars(block) {
  const width = 400, rowH = 18, labelW = 80, barW = 190;
  const largest = Math.max(...block.items.map((it) => it.value), 1);
  const name = `${block.title}: ` + block.items.map((it) => `${it.label} ${it.text}`).join(", ");
  const svg = figure(width, 20 + rowH * block.items.length, name);
  svg.append(s("text", { x: 0, y: 12, "font-weight": "bold" }, block.title));
  block.items.forEach((it, i) => {
    const y = 20 + i * rowH;
    const w = round((barW * it.value) / largest);
    svg.append(
      s("text", { x: 0, y: y + 12 }, it.label),
      s("rect", { x: labelW, y: y + 2, width: w, height: 13, ...fill(it.color) }),
      s("text", { x: labelW + w + 4, y: y + 12, "font-size": 11 }, it.text),
    );
  });
  return svg;
}

function drawStack(block) {
  const width = 430;
  const total = block.items.reduce((a, it) => a + it.value, 0);
  const scale = (width - 10) / Math.max(total, block.limit, 1);
  const svg = figure(width, 26, words("{a} against {b}", {
    a: block.items.map((it) => it.label).join(" + "),
    b: block.limit_label,
  }));
  let x = 0;
  for (const it of block.items) {
    const w = it.value * scale;
    const rect = s("rect", { x: round(x), y: 4, width: round(w), height: 16,
      ...fill(it.color) });
    rect.append(s("title", {}, it.label));
    svg.append(rect);
    x += w;
  }
  const gx = round(block.limit * scale);
  svg.append(s("line", { x1: gx, y1: 0, x2: gx, y2: 24, ...stroke("ink"),
    "stroke-width": 2, "stroke-dasharray": "4 3" }));
  const legend = h("div", { class: "llmmath-legend" });
  for (const it of block.items) {
    legend.append(h("span", {},
      h("span", { class: "llmmath-swatch", style: `background:${colour(it.color)}` }),
      it.label));
  }
  // A translated view says it in its own words (`legend`, for Jupyter); so does the site.
  const dashed = block.legend || words("dashed line: {limit}", { limit: block.limit_label });
  legend.append(h("span", { text: dashed }));
  return h("div", { class: "llmmath-stack" }, svg, legend);
}

function axis(spec, from, to) {
  const f = spec.log ? Math.log10 : (v) => v;
  const lo = f(spec.min), hi = f(spec.max);
  return (v) => {
    const t = (Math.min(Math.max(f(Math.max(v, spec.log ? 1e-300 : -Infinity)), lo), hi) - lo) / (hi - lo);
    return round(from + (to - from) * t);
  };
}

function ticks(spec) {
  if (spec.log) {
    const out = [];
    for (let k = Math.ceil(Math.log10(spec.min)); k <= Math.floor(Math.log10(spec.max)); k++) {
      out.push([10 ** k, k]);
    }
    return out;
  }
  return [];
}

// A tick label 10^k, the exponent raised.
function power(k, attrs) {
  const label = s("text", { "font-size": 9, ...attrs }, "10");
  label.append(s("tspan", { dy: -4, "font-size": 7 }, String(k)));
  return label;
}

function drawPlot(block) {
  const { width, height } = block;
  const framed = Boolean(block.x.label || block.y.label);
  const left = framed ? 46 : 2, bottom = height - (framed ? 30 : 2), top = 8;
  const right = width - (framed ? 16 : 2);
  const px = axis(block.x, left, right), py = axis(block.y, bottom, top);
  const axes = block.x.label && block.y.label
    ? words("{a} against {b}", { a: block.y.label, b: block.x.label })
    : "";
  const named = block.series.filter((series) => series.label).map((series) => series.label);
  const svg = figure(width, height, [block.title, axes, ...named].filter(Boolean).join("; "));
  if (framed) {
    svg.append(s("rect", { x: left, y: top, width: right - left, height: bottom - top,
      ...stroke("frame") }));
    for (const [v, k] of ticks(block.x)) {
      svg.append(power(k, { x: px(v), y: bottom + 14, "text-anchor": "middle" }));
    }
    for (const [v, k] of ticks(block.y)) {
      svg.append(power(k, { x: left - 4, y: py(v) + 3, "text-anchor": "end" }));
    }
    if (block.x.label) {
      svg.append(s("text", { x: (left + right) / 2, y: height - 3, "font-size": 10,
        "text-anchor": "middle" }, block.x.label));
    }
    if (block.y.label) {
      const cy = (top + bottom) / 2;
      svg.append(s("text", { x: 10, y: cy, "font-size": 10, "text-anchor": "middle",
        transform: `rotate(-90 10 ${cy})` }, block.y.label));
    }
  }
  const legend = [];
  for (const series of block.series) {
    const pts = series.points;
    if (series.mode === "bars") {
      const step = pts.length > 1 ? Math.abs(px(pts[1][0]) - px(pts[0][0])) : 6;
      const w = Math.max(Math.min(step, (right - left) / 32) - 1, 1);
      for (const [x, y] of pts) {
        const y0 = py(y);
        svg.append(s("rect", { x: round(px(x) - w / 2), y: y0, width: round(w),
          height: round(bottom - y0), ...fill(series.color) }));
      }
    } else if (series.mode === "dots") {
      for (const [x, y] of pts) {
        svg.append(s("circle", { cx: px(x), cy: py(y), r: series.radius || 2.5,
          style: `fill:${colour(series.color)};stroke:${series.radius ? colour("ink") : "none"}` }));
      }
    } else {
      const line = s("polyline", {
        points: pts.map(([x, y]) => `${px(x)},${py(y)}`).join(" "),
        ...stroke(series.color), "stroke-width": series.mode === "line" ? 2 : 1.2,
      });
      if (series.mode === "dashed") line.setAttribute("stroke-dasharray", "5 3");
      svg.append(line);
    }
    if (series.label) legend.push(series);
  }
  legend.forEach((series, i) => {
    const y = top + 12 + 13 * i;
    svg.append(
      s("circle", { cx: left + 10, cy: y, r: 4, ...fill(series.color) }),
      s("text", { x: left + 18, y: y + 3, "font-size": 9 }, series.label),
    );
  });
  return svg;
}

const DRAW = { note: drawNote, table: drawTable, bars: drawBars, stack: drawStack,
  plot: drawPlot };

// --- controls -------------------------------------------------------------------------------

function makeControl(spec, onChange) {
  const label = h("label", { class: `llmmath-control llmmath-${spec.type}` },
    h("span", { class: "llmmath-label", text: spec.label }));
  let input, read, write;
  if (spec.type === "select") {
    input = h("select", { name: spec.name });
    spec.options.forEach(([, text], i) => input.append(h("option", { value: i, text })));
    read = () => spec.options[Number(input.value)][0];
    write = (v) => {
      const i = spec.options.findIndex(([value]) => value === v);
      if (i >= 0) input.value = String(i);
    };
  } else if (spec.type === "check") {
    input = h("input", { type: "checkbox", name: spec.name });
    read = () => input.checked;
    write = (v) => { input.checked = Boolean(v); };
  } else if (spec.type === "text") {
    input = h("textarea", { name: spec.name, rows: 12, cols: 60, spellcheck: "false" });
    read = () => input.value;
    write = (v) => { if (input.value !== v) input.value = v; };
  } else {
    const type = spec.type === "range" ? "range" : "number";
    input = h("input", { type, name: spec.name, min: spec.min, max: spec.max,
      step: spec.step ?? (spec.type === "float" ? "any" : 1) });
    const shown = spec.type === "range" ? h("span", { class: "llmmath-value" }) : null;
    read = () => (input.value.trim() === "" ? input.value : Number(input.value));
    write = (v) => {
      input.value = String(v);
      if (shown) shown.textContent = Number(v).toLocaleString("en-US");
    };
    if (shown) label.append(input, shown);
  }
  if (!label.contains(input)) label.append(input);
  // a control labelled by a bare symbol ("H") is named for screen readers by what it is
  if (spec.description) input.setAttribute("aria-label", `${spec.description} (${spec.label})`);
  let timer = null;
  const control = { node: label, input, read, shown: undefined };
  // `shown`: the value this control last showed (drawn or sent). A control whose value
  // differs from it is being edited (typed, not yet committed): draw() leaves it alone.
  control.write = (v) => { write(v); control.shown = read(); };
  control.editing = () => JSON.stringify(read()) !== JSON.stringify(control.shown);
  const fire = () => { control.shown = read(); onChange(spec.name, control.shown); };
  if (spec.type === "range") input.addEventListener("input", fire);
  else if (spec.type === "text") {
    input.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(fire, 400); });
    input.addEventListener("change", () => { clearTimeout(timer); fire(); });
  } else input.addEventListener("change", fire);
  return control;
}

// On the site, a link beside the theme's "Skip to main content" (the page's first tab stop)
// takes the keyboard to the page's first control, past the formulas, code cells and copy
// buttons before it.
function addSkipLink() {
  const box = document.getElementById("pst-skip-link");
  if (!box || box.querySelector(".llmmath-skip")) return;
  const link = h("a", { class: "llmmath-skip", href: "#main-content",
    text: words("Skip to the first explorer's controls") });
  link.addEventListener("click", (event) => {
    const first = document.querySelector(
      ".llmmath-controls input, .llmmath-controls select, .llmmath-controls textarea");
    if (!first) return;
    event.preventDefault();
    first.scrollIntoView({ block: "center" });
    first.focus();
  });
  box.append(link);
}

// --- the widget -----------------------------------------------------------------------------

function render({ model, el }) {
  const runtime = globalThis.llmmathRuntime; // only on the published site
  const kind = model.get("kind");
  const root = h("div", { class: "llmmath-explorer", "data-kind": kind });
  const controlsBox = h("div", { class: "llmmath-controls" });
  const status = h("div", { class: "llmmath-status" });
  // What a screen reader hears (a live region, not shown): the status line's milestones
  // and the errors of a new answer, not every step of a download's progress.
  const heard = h("div", { class: "llmmath-heard", role: "status" });
  const output = h("div", { class: "llmmath-output" });
  root.append(controlsBox, status, heard, output);
  el.append(root);
  if (runtime) addSkipLink();
  let view = model.get("view");
  let controlsKey = null;
  let controls = {};
  // The reader's changes that no drawn view answers yet: name → {value, n, at}, n the
  // number of the first state asked for with it. The next state asked for is the view's
  // state with all of them laid over it, so that no change is lost however fast they
  // come, and the controls show them, not an older answer, until their own answer comes.
  const edits = new Map();
  let asked = 0; // the number of the newest state asked for
  let dropped = 0; // answers to states numbered up to this are thrown away (a new link)
  let pending = null; // {state, n}: the newest state not yet sent to Python
  let busy = false;
  let links = 0; // links opened in this tab: only the newest is applied

  let progressHeard = false;
  // Show `text` in the status line. A screen reader hears it, with `also` (the new
  // answer's errors), unless it is a step of progress after the first one.
  function say(text, { progress = false, also = "" } = {}) {
    status.textContent = text;
    if (progress && progressHeard) return;
    progressHeard = progress;
    const line = [text, also].filter(Boolean).join(" ");
    if (heard.textContent !== line) heard.textContent = line;
  }

  // The error notes of the answer drawn, as one line.
  const errorsShown = () => [...output.querySelectorAll(".llmmath-note.llmmath-error")]
    .map((note) => note.textContent).join(" ");

  function wanted() {
    const state = { ...view.state };
    for (const [name, edit] of edits) state[name] = edit.value;
    return state;
  }

  // Draw `next`, the answer to the state numbered `answered` (Infinity: unknown, in a
  // kernel, where an edit is settled once the view shows it, or after 2 s).
  function draw(next, answered = Infinity) {
    view = next;
    const now = performance.now();
    for (const [name, edit] of edits) {
      const settled = answered === Infinity
        ? JSON.stringify(next.state[name]) === JSON.stringify(edit.value) || now - edit.at > 2000
        : edit.n <= answered;
      if (settled) edits.delete(name);
    }
    const shown = wanted();
    // Only controls whose spec changed are rebuilt, in place, so the one the reader is
    // using keeps its focus; if it was rebuilt after all, focus returns to it by name.
    const active = document.activeElement;
    const focused = active && controlsBox.contains(active) ? active.name : null;
    const specKey = (c) => JSON.stringify([c.type, c.label, c.options, c.min, c.max, c.step]);
    const key = JSON.stringify(view.controls.map((c) => c.name));
    if (key !== controlsKey) {
      controlsKey = key;
      controls = {};
      controlsBox.replaceChildren();
    }
    for (const spec of view.controls) {
      const old = controls[spec.name];
      if (old && old.key === specKey(spec)) continue;
      const control = makeControl(spec, change);
      control.key = specKey(spec);
      controls[spec.name] = control;
      if (old) old.node.replaceWith(control.node);
      else controlsBox.append(control.node);
    }
    for (const spec of view.controls) {
      const control = controls[spec.name];
      // a control the reader is typing in keeps what they typed
      if (control.shown === undefined || !control.editing()) control.write(shown[spec.name]);
      control.input.disabled = Boolean(spec.disabled);
    }
    output.replaceChildren(...view.blocks.map((block) => DRAW[block.type](block)));
    root.dataset.state = JSON.stringify(view.state);
    root.dataset.draws = String(Number(root.dataset.draws || 0) + 1);
    const again = focused && controls[focused];
    if (again && document.activeElement !== again.input) again.input.focus();
  }

  // On the site: run llmmath.explorers in this page (Pyodide, in the runtime's worker),
  // newest state only: an answer that a newer state has overtaken is not drawn. Until
  // the newest answer is drawn, the numbers shown are greyed out as stale; a failure of
  // the runtime is final: its message stays and so does the grey.
  function compute(state, n) {
    pending = { state, n };
    asked = n;
    output.classList.add("llmmath-stale");
    if (!busy) run();
  }

  async function run() {
    busy = true;
    try {
      const call = await runtime.load((text, progress) => {
        if (asked <= dropped) return; // nothing asked since a link failed: its line stays
        say(linking ? `${runtime.linkText} ${text}` : text, { progress });
      });
      let drawn = false;
      while (pending) {
        const question = pending;
        pending = null;
        const text = await call(kind, JSON.stringify(question.state));
        if (pending || question.n <= dropped) continue; // overtaken, or a link replaced it
        const next = JSON.parse(text);
        draw(next, question.n);
        model.set("view", next); // drawn already: its change event draws nothing
        drawn = true;
      }
      busy = false;
      if (!drawn || asked <= dropped) return; // a link that could not be read says so
      output.classList.remove("llmmath-stale");
      status.classList.remove("llmmath-error");
      say(runtime.liveText, { also: errorsShown() });
      root.dataset.live = "true";
      if (linking) root.dataset.link = "applied";
      linking = false;
      const shown = view;
      runtime.remember(kind, view.state, first.state).then((note) => {
        // the link cannot hold this answer: say so, unless a newer answer is on its way
        if (note && view === shown && !busy) say(`${runtime.liveText} ${note}`);
      });
    } catch (error) {
      if (asked <= dropped) return; // said on the next change: load() fails at once
      say(runtime.failureText(error));
      status.classList.add("llmmath-error");
      if (linking) root.dataset.link = "failed";
    } finally {
      busy = false;
    }
  }

  function change(name, value) {
    if (blocked) { // on the site, without its runtime: nothing can compute this
      output.classList.add("llmmath-stale");
      return;
    }
    const n = ++asked;
    edits.set(name, { value, n, at: performance.now() });
    const state = wanted();
    if (runtime) compute(state, n);
    else {
      model.set("inputs", state);
      model.save_changes();
    }
  }

  // A link with an answer in it (the calculator's #state=…): until Python has computed it,
  // the page shows none of its own numbers, only that the linked answer is loading. A link
  // that cannot be read is answered with one line, beside the page's own state; whatever
  // was asked before it is dropped, so that no older answer replaces that line.
  async function applyLink() {
    if (!runtime.hasLink(kind)) return;
    const n = ++asked;
    const mine = ++links;
    linking = true;
    root.dataset.link = "loading";
    output.replaceChildren();
    output.classList.add("llmmath-stale");
    status.classList.remove("llmmath-error");
    say(`${runtime.linkText} ${words("reading it…")}`);
    const shared = await runtime.shared(kind);
    if (mine !== links) return; // a newer link came while this one was read
    for (const [name, edit] of edits) if (edit.n < n) edits.delete(name); // the link's
    if (shared && shared.error) {
      linking = false;
      dropped = n;
      pending = null;
      root.dataset.link = "failed";
      delete root.dataset.live;
      draw(first);
      output.classList.remove("llmmath-stale");
      say(shared.error);
      status.classList.add("llmmath-error");
    } else if (shared) {
      // with the changes the reader made while it was read
      // only the page's own keys: no other (__proto__, markup…) is kept or linked again
      const state = { ...first.state };
      for (const [name, value] of Object.entries(shared.state)) {
        if (Object.hasOwn(first.state, name)) state[name] = value;
      }
      for (const [name, edit] of edits) state[name] = edit.value;
      compute(state, ++asked);
    }
  }

  model.on("change:view", () => {
    const next = model.get("view");
    if (next === view) return;
    draw(next);
    if (!runtime) say("", { also: errorsShown() }); // a kernel's answer
  });
  draw(view);
  const first = view; // the page's own view: links hold the state that differs from it
  let linking = false;
  // The site's page names its runtime script, which did not run: the browser refused it
  // (its bytes do not match the tag's integrity) or it did not load.
  const tag = runtime ? null : document.querySelector('script[src*="/llmmath-runtime.js"]');
  const blocked = tag !== null;
  if (blocked) {
    say(words("Nothing was run: {error}. This site's files were changed or " +
      "damaged on the way to this page; reloading will not help until the site is fixed.", {
      error: `${new URL(tag.src).pathname} did not load or does not match its SHA-384 digest`,
    }));
    status.classList.add("llmmath-error");
  }
  if (runtime) {
    status.textContent = runtime.idleText;
    runtime.warm(root); // Python started when the explorer is near, if already cached
    applyLink();
    addEventListener("hashchange", applyLink); // a new link in the same tab
  }
  return () => {
    model.off("change:view");
    if (runtime) removeEventListener("hashchange", applyLink);
  };
}

export default { render };
