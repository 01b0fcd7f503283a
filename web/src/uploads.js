// "My documents": upload files (drag and drop or a file chooser, several at once) with an audience,
// then watch each one's job until it is searchable or says, in words, why it failed; delete one's own.
import { api, apiForm } from "./api.js";
import { errorText, formatBytes, formatDate } from "./format.js";
import { t } from "./i18n.js";
import { icon } from "./icons.js";
import { el } from "./render.js";

const $ = (id) => document.getElementById(id);
const POLL_MS = 1000;
let chosen = [];
let poll = null;

function audienceLabel(option) {
  if (option.kind === "me") return t("upload.me");
  if (option.kind === "everyone") return t("upload.everyone");
  return t("upload.group", { name: option.name });
}

async function loadAudiences() {
  const select = $("upload-audience");
  const current = select.value;
  const options = await api("/api/uploads/audiences");
  select.replaceChildren(...options.map((o) => {
    const option = el("option", "", audienceLabel(o));
    option.value = o.value;
    return option;
  }));
  if (options.some((o) => o.value === current)) select.value = current;
}

function choose(files) {
  chosen = [...files];
  $("upload-chosen").textContent = chosen.length ? t("upload.chosen", { count: chosen.length }) : "";
  $("upload-error").textContent = "";
}

function statusCell(upload) {
  const cell = el("td", "upload-status");
  const words = el("span", `status status-${upload.status}`, t(`status.${upload.status}`));
  words.setAttribute("data-testid", "upload-status");
  cell.append(words);
  if (upload.status === "queued" || upload.status === "running") {
    const bar = el("progress");
    bar.max = 1;
    bar.value = upload.progress;
    bar.setAttribute("aria-label", t(`status.${upload.status}`));
    cell.append(bar);
  }
  if (upload.reason) cell.append(el("div", "reason", upload.reason));
  return cell;
}

function row(upload) {
  const tr = el("tr");
  tr.dataset.upload = upload.id;
  const audience = upload.audience === "everyone" ? t("upload.everyone")
    : upload.audience.startsWith("group:") ? t("upload.group", { name: upload.audience.slice(6) }) : t("upload.me");
  tr.append(el("td", "upload-name", upload.filename), el("td", "", audience), el("td", "", formatBytes(upload.size_bytes)),
    el("td", "", formatDate(upload.created_at)), statusCell(upload));
  const actions = el("td");
  if (upload.status !== "queued" && upload.status !== "running") {
    const remove = el("button", "action upload-delete");
    remove.type = "button";
    remove.append(icon("trash"), el("span", "", t("upload.delete")));
    remove.setAttribute("aria-label", `${t("upload.delete")}: ${upload.filename}`);
    remove.addEventListener("click", () => deleteUpload(upload));
    actions.append(remove);
  }
  tr.append(actions);
  return tr;
}

/** Draw the caller's uploads; poll while any is still queued or running. */
export async function refreshUploads() {
  const uploads = await api("/api/uploads");
  const body = $("upload-rows");
  body.replaceChildren(...uploads.map(row));
  $("upload-none").hidden = uploads.length > 0;
  clearTimeout(poll);
  if (uploads.some((u) => u.status === "queued" || u.status === "running") && !$("documents").hidden) {
    poll = setTimeout(() => refreshUploads().catch(() => {}), POLL_MS);
  }
}

async function deleteUpload(upload) {
  if (!window.confirm(t("upload.deleteConfirm", { name: upload.filename }))) return;
  try {
    await api(`/api/uploads/${encodeURIComponent(upload.id)}`, { method: "DELETE" });
  } catch (err) {
    $("upload-error").textContent = errorText(err);
  }
  await refreshUploads();
}

async function send(event) {
  event.preventDefault();
  if (!chosen.length) {
    $("upload-error").textContent = t("upload.none");
    return;
  }
  const form = new FormData();
  for (const file of chosen) form.append("files", file, file.name);
  form.append("audience", $("upload-audience").value);
  $("upload-send").disabled = true;
  try {
    await apiForm("/api/uploads", form);
    choose([]);
    $("upload-input").value = "";
  } catch (err) {
    $("upload-error").textContent = errorText(err);
  } finally {
    $("upload-send").disabled = false;
  }
  await refreshUploads();
}

/** Wire the drop zone, the file chooser and the form (once). */
export function initUploads() {
  const zone = $("drop-zone");
  for (const name of ["dragenter", "dragover"]) {
    zone.addEventListener(name, (event) => {
      event.preventDefault();
      zone.classList.add("dragging");
    });
  }
  for (const name of ["dragleave", "drop"]) zone.addEventListener(name, () => zone.classList.remove("dragging"));
  zone.addEventListener("drop", (event) => {
    event.preventDefault();
    choose(event.dataTransfer.files);
  });
  $("upload-input").addEventListener("change", (event) => choose(event.target.files));
  $("upload-form").addEventListener("submit", send);
}

/** Show the documents view's current state. */
export async function showUploads() {
  await loadAudiences();
  await refreshUploads();
}
