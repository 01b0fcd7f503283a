// The monthly refresh's adapters (admins only): canary against live feedback per audience, every adapter
// with its gate scores, promote and roll back in one step, and a refresh started by hand. Every action
// is a call of the documented /api/admin/finetune routes.
import { api } from "./api.js";
import { formatDate, formatNumber, formatPercent } from "./format.js";
import { t } from "./i18n.js";
import { el } from "./render.js";
import { button, heading, table } from "./tables.js";

const SERVING = ["live", "canary"];
const VARIANT = { live: "success", canary: "warning", candidate: "primary", failed: "danger", retired: "neutral" };

function badge(status) {
  const node = document.createElement("sl-badge");
  node.variant = VARIANT[status] || "neutral";
  node.textContent = t(`adapters.status.${status}`);
  return node;
}

function ratings(counts) {
  const up = counts?.up || 0;
  const down = counts?.down || 0;
  return { up, down, positive: up + down ? up / (up + down) : null };
}

function loss(value) {
  return value === null || value === undefined ? "–" : formatNumber(value, 3);
}

/** The gate's scores of an adapter: held-out loss and answers right, candidate against what it was compared with. */
function gate(metrics) {
  if (!metrics || metrics.gate_passed === undefined) return "–";
  const lines = el("div", "gate");
  lines.append(el("div", "", t("adapters.gateHeldout", { candidate: loss(metrics.heldout_candidate), live: loss(metrics.heldout_live) })));
  if (metrics.answer_candidate !== undefined) {
    lines.append(el("div", "", t("adapters.gateAnswers", { candidate: formatPercent(metrics.answer_candidate),
      live: formatPercent(metrics.answer_live), count: formatNumber(metrics.answer_questions) })));
  }
  lines.append(el("div", "muted", t("adapters.against", { against: metrics.against || "base" })));
  return lines;
}

function comparison(adapters, feedback) {
  const rows = [];
  const audiences = [...new Set(adapters.filter((a) => SERVING.includes(a.status)).map((a) => a.audience))].sort();
  for (const audience of audiences) {
    for (const status of SERVING) {
      for (const a of adapters.filter((x) => x.audience === audience && x.status === status)) {
        const r = ratings(feedback[a.name]);
        rows.push([audience, badge(status), a.name, formatNumber(r.up), formatNumber(r.down), formatPercent(r.positive)]);
      }
    }
  }
  if (feedback.base) {
    const r = ratings(feedback.base);
    rows.push(["–", t("adapters.base"), t("adapters.baseModel"), formatNumber(r.up), formatNumber(r.down), formatPercent(r.positive)]);
  }
  if (!rows.length) return el("p", "muted", t("adapters.noFeedback"));
  return table([t("adapters.audience"), t("adapters.serves"), t("adapters.adapter"), t("quality.up"), t("quality.down"),
    t("quality.positive")], rows, "adapter-feedback");
}

function refreshForm(act) {
  const form = el("form", "admin-form");
  form.id = "finetune-run";
  const audience = el("input");
  audience.name = "audience";
  audience.value = "everyone";
  audience.required = true;
  const dry = el("input");
  dry.type = "checkbox";
  dry.name = "dry_run";
  const submit = el("button", "primary", t("adapters.run"));
  submit.type = "submit";
  const field = (label, input) => {
    const wrap = el("label", "field");
    wrap.append(el("span", "", label), input);
    return wrap;
  };
  form.append(field(t("adapters.audience"), audience), field(t("adapters.dryRun"), dry), submit);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    act(() => api("/api/admin/finetune/runs", { method: "POST", body: { audience: audience.value.trim(), dry_run: dry.checked } }),
      (queued) => t("adapters.queued", { audience: queued.audience }));
  });
  return form;
}

/** Draw the adapters view into `panel`; `act(call, done)` runs an action and redraws the tab. */
export async function showAdapters(panel, act) {
  const [adapters, feedback] = await Promise.all([api("/api/admin/finetune/adapters"), api("/api/admin/finetune/feedback")]);
  const moved = (release) => t("adapters.released", { loaded: release.loaded.join(", ") || "–", unloaded: release.unloaded.join(", ") || "–" });
  const rows = adapters.map((a) => {
    const actions = el("div", "row-actions");
    if (a.status === "candidate" || a.status === "canary") {
      const to = a.status === "candidate" ? "canary" : "live";
      actions.append(button(t(`adapters.promoteTo.${to}`),
        () => act(() => api(`/api/admin/finetune/adapters/${a.id}/promote`, { method: "POST", body: { to } }), moved)));
    }
    const r = ratings(feedback[a.name]);
    return [a.name, a.audience, badge(a.status), gate(a.metrics), `${formatNumber(r.up)} / ${formatNumber(r.down)}`,
      formatDate(a.created_at), a.promoted_by ? `${a.promoted_by}, ${formatDate(a.promoted_at)}` : "", a.reason || "", actions];
  });
  const rollbacks = el("div", "row-actions");
  rollbacks.setAttribute("data-testid", "rollbacks");
  for (const audience of [...new Set(adapters.filter((a) => SERVING.includes(a.status)).map((a) => a.audience))].sort()) {
    rollbacks.append(button(t("adapters.rollback", { audience }),
      () => act(() => api("/api/admin/finetune/rollback", { method: "POST", body: { audience } }), moved)));
  }
  panel.append(
    heading(t("adapters.compare")), el("p", "muted", t("adapters.compareHelp")), comparison(adapters, feedback), rollbacks,
    heading(t("adapters.all")),
    adapters.length ? table([t("adapters.adapter"), t("adapters.audience"), t("admin.state"), t("adapters.gate"),
      `${t("quality.up")} / ${t("quality.down")}`, t("admin.createdAt"), t("adapters.promotedBy"), t("admin.reason"), ""], rows, "adapters-table")
      : el("p", "muted", t("adapters.none")),
    heading(t("adapters.refresh")), refreshForm(act),
  );
}
