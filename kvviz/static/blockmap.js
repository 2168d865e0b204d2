// kvviz live block map: draws BlockMapData.to_dict() (kvviz/views/blockmap_data.py) as an SVG.
// Every number comes from Python; this module only places it. No network, no dependencies.

const W = 960;          // viewBox width (px); the SVG scales to its container
const LEFT = 200;       // lane labels
const RIGHT = 24;
const TOP = 52;         // overlay bracket and stride label
const LANE_H = 26;
const GAP = 6;
const AXIS_H = 26;
// A kind whose widest run of pages is narrower gets a line in the note, not a legend entry (the
// rule of kvviz/plot.py, whose figure is 975 px across where this map's lanes are 736 px).
const MIN_VISIBLE_PX = 2.5;

function esc(s) {
  return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

function fmt(n) {
  return Number(n).toLocaleString("en-US");
}

// The same lines as MapRange.tooltip() in kvviz/views/blockmap_data.py.
function rangeTip(r, d) {
  const k = d.kinds.find((q) => q.kind === r.kind);
  return `${r.layer}\ngroup ${r.group} \u00b7 ${k.label}\n` +
    `offset ${fmt(r.offset)} B \u00b7 page ${r.page_text} \u00b7 end ${fmt(r.end)} B`;
}

function svgFor(d) {
  const PW = W - LEFT - RIGHT;
  const sx = PW / d.stride;
  const x = (b) => LEFT + b * sx;
  const laneY = (i) => TOP + i * (LANE_H + GAP);
  const n = d.lanes.length;
  const H = laneY(n) + AXIS_H;
  const out = [];
  out.push(`<svg class="kvviz-map-svg" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" ` +
    `width="100%" data-stride="${d.stride}" data-planner="${esc(d.planner)}" ` +
    `data-binding="${esc(d.binding_group ?? "")}" data-caption="${esc(d.caption)}">`);
  out.push(`<defs><pattern id="kvviz-hatch" width="6" height="6" patternUnits="userSpaceOnUse" ` +
    `patternTransform="rotate(45)"><rect width="6" height="6" fill="white"/>` +
    `<line x1="0" y1="0" x2="0" y2="6" stroke="${d.colors.unused}" stroke-width="1.5"/></pattern></defs>`);
  // The overlay bracket: every lane is the same bytes [0, stride) of one block.
  const by = TOP - 12;
  out.push(`<path class="kvviz-bracket" d="M${x(0)},${by + 6} V${by} H${x(d.stride)} V${by + 6}" ` +
    `fill="none" stroke="#444" stroke-width="1"/>`);
  out.push(`<text class="kvviz-overlay-note" x="${x(0) + 4}" y="${by - 5}" font-size="11" fill="#333">` +
    `${esc(d.overlay_note)}</text>`);
  out.push(`<text class="kvviz-stride-mark" x="${x(d.stride)}" y="${by - 5}" font-size="11" ` +
    `text-anchor="end" font-weight="bold">stride ${esc(d.stride_text)}</text>`);
  const kinds = Object.fromEntries(d.kinds.map((k) => [k.kind, k]));
  // Widest run of adjacent pages of one kind in one lane, in px (as kvviz/plot.py's legend rule).
  const widest = {};
  const byLane = d.lanes.map(() => []);
  for (const r of d.ranges) byLane[r.lane].push(r);
  for (const rs of byLane) {
    rs.sort((a, b) => a.offset - b.offset);
    let kind = null, start = 0, end = 0;
    for (const r of rs) {
      if (r.kind === kind && r.offset === end) {
        end = r.end;
      } else {
        kind = r.kind;
        start = r.offset;
        end = r.end;
      }
      widest[kind] = Math.max(widest[kind] ?? 0, (end - start) * sx);
    }
  }
  const widths = d.ranges.map((r) => r.page_bytes * sx).sort((a, b) => a - b);
  const edge = widths.length && widths[widths.length >> 1] >= 4 ? 0.4 : 0;
  d.lanes.forEach((lane, i) => {
    const y = laneY(i);
    out.push(`<g class="kvviz-lane" data-group="${esc(lane.name)}" data-lane="${i}" data-total="${lane.total}" ` +
      `data-unused-bytes="${lane.unused_bytes}" data-binds="${lane.binds}"` +
      `${lane.block_end != null ? ` data-block-end="${lane.block_end}"` : ""}>`);
    out.push(`<rect class="kvviz-lane-bg" data-tip="${esc(lane.tooltip)}" x="${x(0)}" y="${y}" width="${PW}" ` +
      `height="${LANE_H}" fill="#f4f4f4"/>`);
    out.push(`<text class="kvviz-lane-label" data-tip="${esc(lane.tooltip)}" x="${LEFT - 8}" y="${y + 11}" ` +
      `font-size="11" text-anchor="end"${lane.binds ? ' font-weight="bold"' : ""}>` +
      `${esc(lane.name)}${lane.binds ? " \u25c0 binds" : ""}</text>`);
    out.push(`<text class="kvviz-lane-sub" x="${LEFT - 8}" y="${y + 23}" font-size="9.5" fill="#555" ` +
      `text-anchor="end">${lane.num_layers} layers \u00b7 ${fmt(lane.total)} B</text>`);
    // Separate pools (kvviz.livemap.separate_pools_map_data): past its own pool's block a lane
    // has no bytes at all; it is drawn blank with a solid end line, never as unused bytes.
    if (lane.block_end != null && lane.block_end < d.stride) {
      const be = lane.block_end;
      out.push(`<rect class="kvviz-beyond" data-group="${esc(lane.name)}" data-start="${be}" ` +
        `data-tip="${esc(`${lane.name}: its pool's block ends at ${fmt(be)} B\n${lane.tooltip}`)}" ` +
        `x="${x(be)}" y="${y}" width="${(d.stride - be) * sx}" height="${LANE_H}" fill="white"/>`);
      out.push(`<line class="kvviz-block-end" x1="${x(be)}" x2="${x(be)}" y1="${y}" y2="${y + LANE_H}" ` +
        `stroke="#333" stroke-width="1.5"/>`);
      const note = `its block ends: ${fmt(be)} B`;
      if ((d.stride - be) * sx > 6.2 * note.length + 10) {
        out.push(`<text class="kvviz-size" x="${x(be) + 6}" y="${y + 17}" font-size="10" fill="#555" ` +
          `pointer-events="none">${esc(note)}</text>`);
      }
    }
    lane.unused.forEach(([lo, hi], k) => {
      out.push(`<rect class="kvviz-unused" data-group="${esc(lane.name)}" data-start="${lo}" data-end="${hi}" ` +
        `data-tip="${esc(`${lane.name}: unused [${fmt(lo)}, ${fmt(hi)}) = ${fmt(hi - lo)} B\n${lane.tooltip}`)}" ` +
        `x="${x(lo)}" y="${y}" width="${(hi - lo) * sx}" height="${LANE_H}" fill="url(#kvviz-hatch)"/>`);
      const text = lane.unused_text[k];
      if ((hi - lo) * sx > 6.2 * text.length + 10) {
        out.push(`<text class="kvviz-size" x="${x((lo + hi) / 2)}" y="${y + 17}" font-size="10" text-anchor="middle" ` +
          `fill="#333" stroke="white" stroke-width="3" paint-order="stroke" pointer-events="none">${esc(text)}</text>`);
      }
    });
    out.push(`</g>`);
  });
  d.ranges.forEach((r, idx) => {
    const y = laneY(r.lane);
    const w = r.page_bytes * sx;
    out.push(`<rect class="kvviz-range" data-index="${idx}" data-layer="${esc(r.layer)}" data-group="${esc(r.group)}" ` +
      `data-kind="${r.kind}" data-offset="${r.offset}" data-page-bytes="${r.page_bytes}" data-end="${r.end}" ` +
      `x="${x(r.offset)}" y="${y}" width="${w}" height="${LANE_H}" ` +
      `fill="${kinds[r.kind].color}" stroke="white" stroke-width="${edge}"/>`);
    if (r.padding_bytes > 0) {
      const pw = r.padding_bytes * sx;
      out.push(`<rect class="kvviz-pad" data-layer="${esc(r.layer)}" x="${x(r.end) - pw}" y="${y + LANE_H * 0.6}" ` +
        `width="${pw}" height="${LANE_H * 0.4}" fill="${d.colors.pad}" pointer-events="none"/>`);
    }
    if (w > 6.2 * r.size_text.length + 6) {
      out.push(`<text class="kvviz-size" x="${x(r.offset) + w / 2}" y="${y + 15}" font-size="10" fill="white" ` +
        `text-anchor="middle" pointer-events="none">${esc(r.size_text)}</text>`);
    }
  });
  const bi = d.lanes.findIndex((l) => l.binds);
  if (bi >= 0) {
    out.push(`<rect class="kvviz-binding" data-group="${esc(d.lanes[bi].name)}" x="${x(0)}" y="${laneY(bi) - 1}" ` +
      `width="${PW}" height="${LANE_H + 2}" fill="none" stroke="black" stroke-width="1.6" pointer-events="none"/>`);
  }
  // stride marker and axis
  out.push(`<line class="kvviz-stride-line" x1="${x(d.stride)}" x2="${x(d.stride)}" y1="${by}" y2="${laneY(n)}" ` +
    `stroke="black" stroke-dasharray="4,3"/>`);
  const ay = laneY(n) + 2;
  out.push(`<line x1="${x(0)}" x2="${x(d.stride)}" y1="${ay}" y2="${ay}" stroke="#888"/>`);
  for (const t of d.ticks) {
    const tx = x(t.at);
    const anchor = tx > W - RIGHT - 30 ? "end" : (t.at === 0 ? "start" : "middle");
    out.push(`<line x1="${tx}" x2="${tx}" y1="${ay}" y2="${ay + 4}" stroke="#888"/>` +
      `<text class="kvviz-tick" x="${tx}" y="${ay + 15}" font-size="10" text-anchor="${anchor}" ` +
      `fill="#444">${esc(t.text)}</text>`);
  }
  out.push(`</svg>`);
  const visible = d.kinds.filter((k) => widest[k.kind] >= MIN_VISIBLE_PX);
  const slivers = d.kinds.filter((k) => widest[k.kind] < MIN_VISIBLE_PX);
  const legend = visible.map((k) => `<span class="kvviz-key" data-kind="${k.kind}"><i style="background:${k.color}">` +
    `</i>${esc(k.label)}</span>`);
  const maxPad = Math.max(0, ...d.ranges.map((r) => r.padding_bytes));
  const padVisible = maxPad * sx >= MIN_VISIBLE_PX;
  if (padVisible) {
    legend.push(`<span class="kvviz-key" data-kind="padding"><i style="background:${d.colors.pad}"></i>alignment padding</span>`);
  }
  if (d.lanes.some((l) => l.unused.length)) {
    legend.push(`<span class="kvviz-key" data-kind="unused"><i class="kvviz-hatch-swatch"></i>unused by the group</span>`);
  }
  const thin = slivers.map((k) => {
    const rs = d.ranges.filter((r) => r.kind === k.kind);
    const groups = [...new Set(rs.map((r) => r.group))].join(", ");
    return `${esc(k.label)}: ${rs.length} pages of ${esc(rs[0].size_text)} in ${esc(groups)}`;
  });
  if (maxPad > 0 && !padVisible) thin.push(`alignment padding: at most ${fmt(maxPad)} B a page`);
  const note = thin.length ? `<div class="kvviz-sliver-note">too thin to see at this scale (hover them): ` +
    `${thin.join("; ")}</div>` : "";
  return out.join("") + `<div class="kvviz-legend">${legend.join("")}</div>${note}`;
}

function anatomyFor(r, d) {
  const a = d.anatomies[r.anatomy];
  const kind = d.kinds.find((q) => q.kind === r.kind);
  const bar = a.regions.map((g) => `<div class="kvviz-region" data-region="${g.name}" data-start="${g.start}" ` +
    `data-size="${g.size}" style="flex:${g.size} 0 0;background:${d.colors.regions[g.name]}" ` +
    `title="${esc(`${g.label} [${fmt(g.start)}, ${fmt(g.end)})`)}"></div>`).join("");
  const text = {
    payload: `${a.rows} rows \u00d7 ${fmt(a.payload_bytes)} B`,
    footer: `${a.rows} rows \u00d7 ${fmt(a.footer_bytes)} B`,
    padding: `to the page size`,
  };
  const rows = a.regions.map((g) => `<tr data-region="${g.name}"><td><i style="background:${d.colors.regions[g.name]}">` +
    `</i>${esc(g.label)}</td><td>${text[g.name]}</td><td>${fmt(g.size)} B</td>` +
    `<td>[${fmt(r.offset + g.start)}, ${fmt(r.offset + g.end)}) of the block</td></tr>`).join("");
  return `<div class="kvviz-anatomy-head" data-layer="${esc(r.layer)}"><b>${esc(r.layer)}</b> \u00b7 ` +
    `${esc(r.group)} \u00b7 ${esc(kind.label)} \u00b7 ${esc(a.row_format)}: page ${fmt(r.page_bytes)} B = ` +
    `${a.rows} rows \u00d7 ${fmt(a.row_bytes)} B (${fmt(a.content_bytes)} B) + ${fmt(a.padding_bytes)} B padding ` +
    `<button class="kvviz-anatomy-close" title="close">\u00d7</button></div>` +
    `<div class="kvviz-anatomy-bar">${bar}</div><table class="kvviz-anatomy-table">${rows}</table>` +
    `<div class="kvviz-anatomy-row">row: ${esc(a.row_describe)}</div>`;
}

function render({ model, el }) {
  let parsed = null, parsedFrom = null;
  const data = () => {  // the map's data, parsed once per change
    const text = model.get("_data_json");
    if (text !== parsedFrom) {
      parsedFrom = text;
      parsed = text ? JSON.parse(text) : null;
    }
    return parsed;
  };
  const root = document.createElement("div");
  root.className = "kvviz-livemap";
  const status = document.createElement("div");
  status.className = "kvviz-map-status";
  const map = document.createElement("div");
  map.className = "kvviz-map";
  const tip = document.createElement("div");
  tip.className = "kvviz-tip";
  const anatomy = document.createElement("div");
  anatomy.className = "kvviz-anatomy";
  root.append(status, map, tip, anatomy);
  el.appendChild(root);
  let draws = 0;

  function showAnatomy(layer) {
    const d = data();
    const r = d && d.ranges ? d.ranges.find((q) => q.layer === layer) : null;
    anatomy.innerHTML = r ? anatomyFor(r, d) : "";
    anatomy.style.display = r ? "block" : "none";
  }

  function draw() {
    const d = data();
    tip.style.display = "none";  // a tooltip of the ranges being replaced never stays over the new map
    if (!d || !d.ranges) {
      map.innerHTML = "";
      return;
    }
    const t0 = performance.now();
    map.innerHTML = svgFor(d);
    showAnatomy(model.get("selected"));
    draws += 1;
    const t1 = performance.now();
    root.dataset.draws = String(draws);
    root.dataset.drawnAt = String(t1);
    root.dataset.drawMs = (t1 - t0).toFixed(2);  // building the SVG (the browser's layout and paint follow)
  }

  function drawStatus() {
    const s = model.get("status");
    status.textContent = s;
    status.style.display = s ? "block" : "none";
    root.classList.toggle("kvviz-stale", !!s);  // a refused change: the map drawn is not the current selection
    if (s) tip.style.display = "none";
  }

  map.addEventListener("mousemove", (ev) => {
    // A range's tooltip is written when hovered (not for all 250 ranges at every redraw).
    const r = ev.target.closest(".kvviz-range");
    const t = r || ev.target.closest("[data-tip]");
    if (!t) {
      tip.style.display = "none";
      return;
    }
    const d = data();
    tip.textContent = r ? rangeTip(d.ranges[+r.dataset.index], d) : t.getAttribute("data-tip");
    tip.style.display = "block";
    const box = root.getBoundingClientRect();
    const left = Math.min(ev.clientX - box.left + 14, Math.max(0, box.width - 340));
    tip.style.left = `${left}px`;
    tip.style.top = `${ev.clientY - box.top + 14}px`;
  });
  map.addEventListener("mouseleave", () => { tip.style.display = "none"; });
  map.addEventListener("click", (ev) => {
    const t = ev.target.closest(".kvviz-range");
    if (!t) return;
    const layer = t.getAttribute("data-layer");
    model.set("selected", layer);
    model.save_changes();
    showAnatomy(layer);
  });
  anatomy.addEventListener("click", (ev) => {
    if (!ev.target.closest(".kvviz-anatomy-close")) return;
    model.set("selected", "");
    model.save_changes();
    showAnatomy("");
  });

  model.on("change:_data_json", draw);
  model.on("change:selected", () => showAnatomy(model.get("selected")));
  model.on("change:status", drawStatus);
  draw();
  drawStatus();
  return () => {
    model.off("change:_data_json", draw);
    model.off("change:status", drawStatus);
  };
}

export default { render };
