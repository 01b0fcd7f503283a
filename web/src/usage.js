// The quality view's usage per day as a small chart (Chart.js): questions as a line, answered and
// "not found" as one stacked bar, thumbs up and down as another; its numbers stay readable as a table
// behind a "show table" toggle, and the canvas carries a summary as its accessible name.
import { BarController, BarElement, CategoryScale, Chart, LinearScale, LineController, LineElement, PointElement, Tooltip } from "chart.js";
import { formatDay, formatNumber, formatShortDay } from "./format.js";
import { t } from "./i18n.js";
import { el } from "./render.js";
import { table } from "./tables.js";

Chart.register(BarController, BarElement, CategoryScale, LinearScale, LineController, LineElement, PointElement, Tooltip);

// Okabe-Ito colours: told apart with the common colour-vision deficiencies. The tests look for them.
export const SERIES = [
  { key: "questions", label: "quality.questions", color: "#0072b2", type: "line" },
  { key: "answered", label: "quality.answered", color: "#009e73", stack: "answers" },
  { key: "not_found", label: "quality.notFound", color: "#e69f00", stack: "answers" },
  { key: "thumbs_up", label: "quality.up", color: "#56b4e9", stack: "ratings" },
  { key: "thumbs_down", label: "quality.down", color: "#d55e00", stack: "ratings" },
];

// The one chart on the page: destroyed before the view is drawn again (a tab switch, a new language).
let shown = null;

function legend() {
  const list = el("ul", "chart-legend");
  for (const s of SERIES) {
    const item = el("li");
    const swatch = el("span", `swatch${s.type === "line" ? " line" : ""}`);
    swatch.style.background = s.color;
    swatch.setAttribute("aria-hidden", "true");
    item.append(swatch, t(s.label));
    list.append(item);
  }
  return list;
}

function summary(report, days) {
  return t("quality.chartSummary", {
    days: formatNumber(days.length), questions: formatNumber(report.questions), answered: formatNumber(report.answered),
    notFound: formatNumber(report.not_found), up: formatNumber(report.thumbs_up), down: formatNumber(report.thumbs_down),
  });
}

/** The usage per day of `report` (the /api/admin/quality answer: `days`, one entry per UTC day, oldest
 * first, each with questions, answered, not_found, thumbs_up, thumbs_down; and their totals) as a
 * figure: a caption, the chart (a canvas), its legend, and the days with any question as a table behind a
 * toggle button (`data-testid` "days-table"). */
export function usageFigure(report) {
  if (shown) shown.destroy();
  const days = report.days;
  const figure = el("figure", "usage");
  figure.setAttribute("data-testid", "usage-chart");
  const caption = el("figcaption", "usage-caption", t("quality.chartCaption"));
  caption.id = "usage-caption";
  const box = el("div", "usage-box");
  const canvas = el("canvas");
  canvas.setAttribute("role", "img");
  canvas.setAttribute("aria-label", summary(report, days));
  canvas.setAttribute("aria-describedby", "usage-caption");
  box.append(canvas);

  const active = days.filter((d) => d.questions || d.answered || d.not_found || d.thumbs_up || d.thumbs_down);
  const numbers = el("div", "usage-table");
  numbers.id = "usage-table";
  numbers.hidden = true;
  numbers.append(table([t("quality.day"), t("quality.questions"), t("quality.answered"), t("quality.notFound"), t("quality.up"), t("quality.down")],
    active.map((d) => [formatDay(d.day), formatNumber(d.questions), formatNumber(d.answered), formatNumber(d.not_found),
      formatNumber(d.thumbs_up), formatNumber(d.thumbs_down)]), "days-table"));
  numbers.querySelector("table").classList.add("numbers");
  const toggle = el("button", "action usage-toggle", t("quality.showTable"));
  toggle.type = "button";
  toggle.setAttribute("aria-expanded", "false");
  toggle.setAttribute("aria-controls", numbers.id);
  toggle.addEventListener("click", () => {
    numbers.hidden = !numbers.hidden;
    toggle.setAttribute("aria-expanded", String(!numbers.hidden));
    toggle.textContent = t(numbers.hidden ? "quality.showTable" : "quality.hideTable");
  });

  figure.append(caption, legend(), box, toggle, numbers);
  shown = new Chart(canvas, {
    data: {
      labels: days.map((d) => formatShortDay(d.day)),
      datasets: SERIES.map((s) => ({
        type: s.type || "bar", label: t(s.label), data: days.map((d) => d[s.key]), stack: s.stack,
        backgroundColor: s.color, borderColor: s.color, borderWidth: s.type === "line" ? 2 : 0,
        // A point only on the days with questions: thirty dots on the zero line would read as data.
        pointRadius: s.type === "line" ? (ctx) => (ctx.raw ? 3 : 0) : undefined, order: s.type === "line" ? 0 : 1,
      })),
    },
    options: {
      responsive: true, maintainAspectRatio: false, animation: false,
      interaction: { mode: "index", intersect: false },
      plugins: { legend: { display: false }, tooltip: { enabled: true } },
      scales: {
        x: { stacked: true, grid: { display: false }, ticks: { autoSkip: true, maxRotation: 0 } },
        y: { stacked: true, beginAtZero: true, ticks: { precision: 0 } },
      },
    },
  });
  return figure;
}
