// The admin pages (admins only): users and groups, API keys, sources, jobs, the model in use, the
// usage and quality view (quality.js) and the refresh's adapters (adapters.js). Every action is a call
// of the documented /api/admin routes.
import { showAdapters } from "./adapters.js";
import { api } from "./api.js";
import { errorText, formatBytes, formatDate, formatNumber } from "./format.js";
import { t } from "./i18n.js";
import { showQuality } from "./quality.js";
import { el } from "./render.js";
import { button, heading, pathText, table } from "./tables.js";

const $ = (id) => document.getElementById(id);
const TABS = ["users", "keys", "sources", "jobs", "model", "quality", "adapters"];
let currentTab = "users";

function status(text, isError = false) {
  const node = $("admin-status");
  node.textContent = text;
  node.classList.toggle("error", isError);
}

async function act(call, done) {
  try {
    const result = await call();
    if (done) status(done(result));
  } catch (err) {
    status(errorText(err), true);
  }
  await showTab(currentTab, { keepStatus: true });
}

function field(label, input) {
  const wrap = el("label", "field");
  wrap.append(el("span", "", label), input);
  return wrap;
}

function input(name, type = "text") {
  const node = el("input");
  node.name = name;
  node.type = type;
  node.required = type !== "checkbox";
  return node;
}

async function usersTab(panel) {
  const users = await api("/api/admin/users");
  const form = el("form", "admin-form");
  form.id = "user-create";
  const name = input("name");
  const password = input("password", "password");
  const groups = input("groups");
  groups.required = false;
  const admin = input("is_admin", "checkbox");
  const submit = el("button", "primary", t("admin.create"));
  submit.type = "submit";
  form.append(field(t("admin.name"), name), field(t("admin.password"), password), field(t("admin.groups"), groups),
    field(t("admin.isAdmin"), admin), submit);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const body = { name: name.value.trim(), password: password.value, is_admin: admin.checked,
      groups: groups.value.split(/[\s,]+/).filter(Boolean) };
    act(() => api("/api/admin/users", { method: "POST", body }), (u) => t("admin.created", { name: u.name }));
  });
  const rows = users.map((u) => {
    const who = encodeURIComponent(u.name);
    const actions = el("div", "row-actions");
    actions.append(button(u.disabled ? t("admin.enable") : t("admin.disable"),
      () => act(() => api(`/api/admin/users/${who}`, { method: "PATCH", body: { disabled: !u.disabled } }))));
    if (!u.is_service && !u.sso) {
      actions.append(button(t("admin.resetPassword"), () => {
        const password = window.prompt(t("admin.newPassword", { name: u.name }));
        if (password) act(() => api(`/api/admin/users/${who}/password`, { method: "PUT", body: { password } }),
          () => t("admin.passwordSet", { name: u.name }));
      }));
    }
    actions.append(button(t("admin.addGroup"), () => {
      const group = window.prompt(t("admin.groupName"));
      if (group) act(() => api(`/api/admin/users/${who}/groups/${encodeURIComponent(group.trim())}`, { method: "PUT" }));
    }));
    for (const g of u.groups) {
      actions.append(button(t("admin.removeGroup", { group: g }),
        () => act(() => api(`/api/admin/users/${who}/groups/${encodeURIComponent(g)}`, { method: "DELETE" }))));
    }
    const role = u.is_admin ? t("admin.admin") : u.is_service ? t("admin.service") : t("admin.person");
    return [u.name, u.groups.join(", "), role, u.disabled ? t("admin.disabled") : t("admin.active"), actions];
  });
  panel.append(heading(t("admin.createUser")), form,
    table([t("admin.name"), t("admin.groups"), t("admin.role"), t("admin.state"), ""], rows, "users-table"));
}

async function keysTab(panel) {
  const keys = await api("/api/admin/keys");
  const form = el("form", "admin-form");
  const name = input("name");
  const groups = input("groups");
  groups.required = false;
  const submit = el("button", "primary", t("admin.createKey"));
  submit.type = "submit";
  form.append(field(t("admin.keyName"), name), field(t("admin.groups"), groups), submit);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const created = await api("/api/admin/keys", { method: "POST",
        body: { name: name.value.trim(), groups: groups.value.split(/[\s,]+/).filter(Boolean) } });
      await showTab("keys");
      const once = el("div", "key-once");
      once.append(el("p", "", t("admin.keyOnce")), el("code", "", created.key));
      $("admin-panel").prepend(once);
    } catch (err) {
      status(errorText(err), true);
    }
  });
  const rows = keys.map((k) => [k.name, k.prefix, formatDate(k.created_at), k.last_used_at ? formatDate(k.last_used_at) : t("admin.never"),
    k.revoked_at ? t("admin.revoked") : button(t("admin.revoke"),
      () => act(() => api(`/api/admin/keys/${encodeURIComponent(k.name)}`, { method: "DELETE" })))]);
  panel.append(heading(t("admin.createKey")), form,
    table([t("admin.keyName"), t("admin.prefix"), t("admin.createdAt"), t("admin.lastUsed"), ""], rows, "keys-table"));
}

/** A cell for text the server withheld (`withheld: true`): it cites or names documents the admin may not read. */
function withheld(label = t("admin.withheld")) {
  return el("span", "muted withheld", label);
}

async function sourcesTab(panel) {
  const [sources, uploads] = await Promise.all([api("/api/admin/sources"), api("/api/admin/uploads")]);
  const rows = sources.map((s) => {
    const errors = el("ul", "file-errors");
    for (const e of s.errors) {
      // A file's name and reason are withheld where its ACL does not admit this admin (or the upload is not theirs).
      const hidden = s.withheld || e.path === null;
      const item = el("li", "", hidden ? `${t(`status.${e.status}`)} (${t("admin.withheldFile")})` : `: ${t(`status.${e.status}`)} — ${e.reason}`);
      if (!hidden) item.prepend(pathText(e.path));
      errors.append(item);
    }
    if (!s.errors.length) errors.append(el("li", "", t("admin.noErrors")));
    const path = s.withheld ? withheld(t("admin.withheldUpload", { owner: s.upload_owner, audience: s.audience })) : pathText(s.path);
    return [path, s.kind, formatNumber(s.documents), formatNumber(s.chunks), s.last_synced_at ? formatDate(s.last_synced_at) : t("admin.never"),
      errors, button(t("admin.syncNow"), () => act(() => api(`/api/admin/sources/${s.id}/sync`, { method: "POST" }),
        (job) => t("admin.syncQueued", { id: job.id })))];
  });
  panel.append(table([t("admin.path"), t("admin.kind"), t("admin.documents"), t("admin.chunks"), t("admin.lastSync"),
    t("admin.errors"), ""], rows, "sources-table"));
  // Everyone's uploads: a private upload's file name is its owner's alone.
  const uploadRows = uploads.map((u) => [u.withheld ? withheld() : pathText(u.filename), u.owner, u.audience, formatBytes(u.size_bytes),
    t(`status.${u.status}`), formatNumber(u.chunks), formatDate(u.created_at)]);
  panel.append(heading(t("admin.uploads")), table([t("admin.file"), t("admin.owner"), t("admin.audience"), t("admin.size"),
    t("admin.state"), t("admin.chunks"), t("admin.createdAt")], uploadRows, "uploads-table"));
}

async function jobsTab(panel) {
  const jobs = await api("/api/jobs?limit=50");
  // A queued or running sync stops at its next file boundary and resumes later (POST /api/jobs/{id}/stop).
  const stop = (j) => j.kind === "sync" && ["queued", "running"].includes(j.status)
    ? button(t("admin.stopSync"), () => act(() => api(`/api/jobs/${j.id}/stop`, { method: "POST" }),
      () => t("admin.stopRequested", { id: j.id })))
    : "";
  const rows = jobs.map((j) => [String(j.id), j.kind, j.withheld ? withheld() : pathText(j.params.path || ""), t(`status.${j.status}`),
    formatDate(j.created_at), j.finished_at ? formatDate(j.finished_at) : "", j.withheld ? "" : j.reason, stop(j)]);
  panel.append(table([t("admin.job"), t("admin.kind"), t("admin.path"), t("admin.state"), t("admin.createdAt"),
    t("admin.finished"), t("admin.reason"), ""], rows, "jobs-table"));
}

async function modelTab(panel) {
  const model = await api("/api/admin/model");
  panel.append(table(["", ""], [[t("admin.backend"), model.llm_backend], [t("admin.llm"), model.llm_model],
    [t("admin.embedding"), model.embedding_model], [t("admin.adapter"), model.adapter]], "model-table"));
}

const RENDER = {
  users: usersTab, keys: keysTab, sources: sourcesTab, jobs: jobsTab, model: modelTab, quality: showQuality,
  adapters: (panel) => showAdapters(panel, act),
};

/** Show admin tab `name` (users, keys, sources, jobs, model, quality, adapters). */
export async function showTab(name, { keepStatus = false } = {}) {
  currentTab = TABS.includes(name) ? name : "users";
  for (const tab of document.querySelectorAll("#admin-tabs [data-tab]")) {
    tab.setAttribute("aria-selected", String(tab.dataset.tab === currentTab));
  }
  if (!keepStatus) status("");
  const panel = $("admin-panel");
  const fresh = el("div");
  try {
    await RENDER[currentTab](fresh);
  } catch (err) {
    fresh.append(el("p", "error", errorText(err)));
  }
  panel.replaceChildren(...fresh.childNodes);
}

/** Wire the tab buttons (once). */
export function initAdmin() {
  for (const tab of document.querySelectorAll("#admin-tabs [data-tab]")) {
    tab.addEventListener("click", () => {
      history.replaceState(null, "", `#admin/${tab.dataset.tab}`);
      showTab(tab.dataset.tab);
    });
  }
}

/** The tab currently shown. */
export function currentAdminTab() {
  return currentTab;
}
