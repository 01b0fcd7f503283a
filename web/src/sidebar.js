// The sidebar: the reader's conversations (newest first), a search over titles and messages, new chat,
// rename and delete (each confirmed in a dialog). On a phone-sized screen it slides over the chat.
import { api } from "./api.js";
import { t } from "./i18n.js";
import { icon } from "./icons.js";
import { el } from "./render.js";
import { newConversation, openConversation, session } from "./thread.js";

let query = "";
let pending = null;  // the conversation being renamed or deleted
let searchTimer = 0;

const $ = (id) => document.getElementById(id);

function closeOnPhone() {
  if (!$("sidebar").classList.contains("open")) return;
  $("sidebar").classList.remove("open");
  $("sidebar-toggle").setAttribute("aria-expanded", "false");
  $("sidebar-toggle").focus();
}

function item(conv) {
  const li = el("li", "conv");
  li.dataset.id = conv.id;
  const open = el("button", "conv-open", conv.title || t("sidebar.untitled"));
  open.type = "button";
  if (conv.id === session.conversationId) open.setAttribute("aria-current", "true");
  open.addEventListener("click", async () => {
    await openConversation(conv.id).catch((err) => alertIn(err.message));
    closeOnPhone();
    location.hash = `c=${conv.id}`;
    refreshConversations();
  });
  const rename = el("button", "conv-rename");
  rename.type = "button";
  rename.append(icon("pencil"));
  rename.setAttribute("aria-label", `${t("sidebar.rename")}: ${conv.title}`);
  rename.addEventListener("click", () => {
    pending = conv;
    $("rename-input").value = conv.title;
    $("rename-dialog").show();
  });
  const remove = el("button", "conv-delete");
  remove.type = "button";
  remove.append(icon("trash"));
  remove.setAttribute("aria-label", `${t("sidebar.delete")}: ${conv.title}`);
  remove.addEventListener("click", () => {
    pending = conv;
    $("delete-text").textContent = t("delete.confirm", { title: conv.title || t("sidebar.untitled") });
    $("delete-dialog").show();
  });
  li.append(open, rename, remove);
  return li;
}

function alertIn(message) {
  $("conversations").replaceChildren(el("li", "error", message));
}

/** Reload the conversation list (with the current search) from the server. */
export async function refreshConversations() {
  const path = `/api/conversations${query ? `?q=${encodeURIComponent(query)}` : ""}`;
  try {
    const list = await api(path);
    const items = list.map(item);
    if (!items.length) items.push(el("li", "conv-empty", t(query ? "sidebar.nomatch" : "sidebar.empty")));
    $("conversations").replaceChildren(...items);
  } catch (err) {
    alertIn(err.message);
  }
}

/** Wire the sidebar's controls and dialogs (once, at start). */
export function initSidebar() {
  $("new-chat").addEventListener("click", () => {
    newConversation();
    location.hash = "";
    closeOnPhone();
    refreshConversations();
    $("question").focus();
  });
  $("conv-search").addEventListener("sl-input", (event) => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => {
      query = event.target.value.trim();
      refreshConversations();
    }, 200);
  });
  $("conv-search").addEventListener("sl-clear", () => {
    query = "";
    refreshConversations();
  });
  $("sidebar-toggle").addEventListener("click", () => {
    $("sidebar").classList.add("open");
    $("sidebar-toggle").setAttribute("aria-expanded", "true");
    $("new-chat").focus();
  });
  $("sidebar-close").addEventListener("click", closeOnPhone);
  $("sidebar").addEventListener("keydown", (event) => {
    if (event.key === "Escape") closeOnPhone();
  });
  $("rename-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const title = $("rename-input").value.trim();
    if (!pending || !title) return;
    await api(`/api/conversations/${pending.id}`, { method: "PATCH", body: { title } }).catch((err) => alertIn(err.message));
    $("rename-dialog").hide();
    refreshConversations();
  });
  $("rename-cancel").addEventListener("click", () => $("rename-dialog").hide());
  $("delete-ok").addEventListener("click", async () => {
    if (!pending) return;
    await api(`/api/conversations/${pending.id}`, { method: "DELETE" }).catch((err) => alertIn(err.message));
    if (pending.id === session.conversationId) {
      newConversation();
      location.hash = "";
    }
    $("delete-dialog").hide();
    refreshConversations();
  });
  $("delete-cancel").addEventListener("click", () => $("delete-dialog").hide());
}
