// The usage and quality view: questions per day, answered against "not found", the ratings (a chart,
// usage.js), the slowest answers, the knowledge gaps (documents to write), recent ratings, and the helpdesk's figures.
import { api } from "./api.js";
import { formatDay, formatNumber, formatPercent } from "./format.js";
import { t } from "./i18n.js";
import { el } from "./render.js";
import { heading, table } from "./tables.js";
import { usageFigure } from "./usage.js";

const DAYS = 30;

function tile(label, value, testid) {
  const node = el("div", "tile");
  node.setAttribute("data-testid", testid);
  node.append(el("div", "tile-value", value), el("div", "tile-label", label));
  return node;
}

function gapList(gaps) {
  if (!gaps.length) return el("p", "muted", t("quality.gapsEmpty"));
  const list = el("ol", "gaps");
  list.setAttribute("data-testid", "gaps");
  for (const gap of gaps) {
    const item = el("li");
    item.append(el("strong", "", gap.topic),
      el("div", "muted", t("quality.asked", { count: formatNumber(gap.questions.length), notFound: formatNumber(gap.not_found), down: formatNumber(gap.rated_down) })));
    const others = gap.questions.filter((q) => q !== gap.topic);
    if (others.length) {
      const more = el("ul", "gap-questions");
      for (const q of others) more.append(el("li", "", q));
      item.append(more);
    }
    list.append(item);
  }
  return list;
}

/** A cell for text the server withheld: its answer cited documents the admin may not read. */
function withheld() {
  return el("span", "muted withheld", t("admin.withheld"));
}

function helpdeskTable(rows) {
  if (!rows.length) return el("p", "muted", t("quality.noHelpdesk"));
  return table([t("quality.day"), t("quality.category"), t("quality.received"), t("quality.autoReplied"), t("quality.escalated")],
    rows.map((r) => [formatDay(r.day), r.category || "–", formatNumber(r.received), formatNumber(r.auto_replied), formatNumber(r.escalated)]),
    "helpdesk-table");
}

/** Draw the quality view into `panel`. */
export async function showQuality(panel) {
  const [report, ratings, helpdesk] = await Promise.all([
    api(`/api/admin/quality?days=${DAYS}`),
    api("/api/admin/feedback?limit=20"),
    api("/api/helpdesk/metrics").catch(() => []),
  ]);
  const tiles = el("div", "tiles");
  tiles.append(
    tile(t("quality.questions"), formatNumber(report.questions), "q-questions"),
    tile(t("quality.answered"), formatNumber(report.answered), "q-answered"),
    tile(t("quality.notFound"), formatNumber(report.not_found), "q-not-found"),
    tile(t("quality.positive"), formatPercent(report.positive_ratio), "q-positive"),
    tile(`${t("quality.up")} / ${t("quality.down")}`, `${formatNumber(report.thumbs_up)} / ${formatNumber(report.thumbs_down)}`, "q-ratings"),
  );
  panel.append(
    el("p", "muted", t("quality.days", { days: DAYS })), tiles,
    heading(t("quality.gaps")), gapList(report.gaps),
    ...(report.gaps_withheld ? [el("p", "muted", t("quality.gapsWithheld", { count: formatNumber(report.gaps_withheld) }))] : []),
    heading(t("quality.perDay")), usageFigure(report),
    heading(t("quality.slowest")),
    table([t("quality.question"), t("quality.seconds")], report.slowest.map((s) => [s.withheld ? withheld() : s.question, formatNumber(s.seconds, 1)]), "slowest-table"),
    heading(t("quality.ratings")),
    table([t("quality.question"), t("quality.rating"), t("quality.comment"), t("quality.by")],
      ratings.map((r) => [r.withheld ? withheld() : r.question, r.rating > 0 ? "👍" : "👎", r.withheld ? "" : r.comment, r.principal]), "ratings-table"),
    heading(t("quality.helpdesk")), helpdeskTable(helpdesk),
  );
}
