// @ts-check
// Small SVG charts drawn from numbers (volume over time, a breakdown by method). Labels are text nodes.

const NS = 'http://www.w3.org/2000/svg';

function svg(tag, attrs, text) {
  const el = document.createElementNS(NS, tag);
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, String(value));
  if (text !== undefined) el.textContent = text;
  return el;
}

/** Bars of `points` ([{t, count}]) with the largest count as the scale. */
export function volume(points, label) {
  const width = 600;
  const height = 120;
  const max = Math.max(1, ...points.map((p) => p.count));
  const step = width / Math.max(1, points.length);
  const chart = svg('svg', {
    viewBox: `0 0 ${width} ${height + 16}`,
    role: 'img',
    'aria-label': label,
    class: 'chart',
  });
  points.forEach((p, i) => {
    const barHeight = (p.count / max) * height;
    const bar = svg('rect', {
      x: i * step + 1,
      y: height - barHeight,
      width: Math.max(1, step - 2),
      height: barHeight,
      class: 'bar',
    });
    bar.append(svg('title', {}, `${new Date(p.t).toLocaleString()}: ${p.count}`));
    chart.append(bar);
  });
  chart.append(
    svg('text', { x: 0, y: height + 14, class: 'axis' }, points.length ? new Date(points[0].t).toLocaleString() : ''),
  );
  chart.append(svg('text', { x: width, y: height + 14, class: 'axis', 'text-anchor': 'end' }, `max ${max}`));
  return chart;
}

/** Horizontal bars of shares ([{method, count, share}]). */
export function breakdown(rows, label) {
  const width = 300;
  const chart = svg('svg', {
    viewBox: `0 0 ${width} ${Math.max(1, rows.length) * 22}`,
    role: 'img',
    'aria-label': label,
    class: 'chart',
  });
  rows.forEach((row, i) => {
    chart.append(
      svg('rect', { x: 70, y: i * 22 + 3, width: Math.max(1, row.share * (width - 120)), height: 16, class: 'bar' }),
    );
    chart.append(svg('text', { x: 0, y: i * 22 + 16, class: 'label' }, row.method));
    chart.append(svg('text', { x: width, y: i * 22 + 16, class: 'label', 'text-anchor': 'end' }, String(row.count)));
  });
  return chart;
}
