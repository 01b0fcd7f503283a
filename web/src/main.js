// The chat app's entry point: sign-in (password or single sign-on), the header (language, sign-out),
// and the wiring of the sidebar, the thread and the composer.
import "@shoelace-style/shoelace/dist/components/badge/badge.js";
import "@shoelace-style/shoelace/dist/components/button/button.js";
import "@shoelace-style/shoelace/dist/components/dialog/dialog.js";
import "@shoelace-style/shoelace/dist/components/input/input.js";
import "@shoelace-style/shoelace/dist/components/textarea/textarea.js";
import "./icons.js";

import { api, setCsrfToken } from "./api.js";
import { initialLocale, setLocale, t } from "./i18n.js";
import { initAdmin, showTab } from "./admin.js";
import { initSidebar, refreshConversations } from "./sidebar.js";
import { initUploads, showUploads } from "./uploads.js";
import { ask, newConversation, openConversation, session, showEmpty, stop } from "./thread.js";

const $ = (id) => document.getElementById(id);
let me = null;

/** Show view `name` (chat, documents, admin; `admin/TAB` opens a tab) and mark its tab current. */
function showView(name) {
  const [view, tab] = name.split("/");
  const wanted = view === "admin" && !(me && me.is_admin) ? "chat" : ["documents", "admin"].includes(view) ? view : "chat";
  $("app").hidden = wanted !== "chat";
  $("documents").hidden = wanted !== "documents";
  $("admin").hidden = wanted !== "admin";
  for (const button of document.querySelectorAll("#views [data-view]")) {
    if (button.dataset.view === wanted) button.setAttribute("aria-current", "page");
    else button.removeAttribute("aria-current");
  }
  if (wanted === "chat" && !$("thread").children.length) showEmpty();
  if (wanted === "documents") showUploads().catch(() => {});
  if (wanted === "admin") showTab(tab || "users");
}

function showChat(user) {
  me = user;
  setCsrfToken(user.csrf_token);
  $("whoami").textContent = t("whoami", { name: user.name });
  for (const node of [$("app"), $("whoami"), $("logout"), $("views")]) node.hidden = false;
  document.querySelector('#views [data-view="admin"]').hidden = !user.is_admin;
  $("login").hidden = true;
  const page = location.hash.slice(1);
  if (page.startsWith("documents") || page.startsWith("admin")) {
    showView(page);
    refreshConversations();
    return;
  }
  const wanted = new URLSearchParams(location.hash.slice(1)).get("c");
  const opened = wanted ? openConversation(wanted).catch(() => newConversation()) : Promise.resolve(showEmpty());
  opened.finally(() => {
    refreshConversations();
    $("question").focus();
  });
}

async function showLogin(message) {
  me = null;
  setCsrfToken("");
  for (const node of [$("app"), $("whoami"), $("logout"), $("views"), $("documents"), $("admin")]) node.hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  // Focus before the providers' round trip: focusing after it would move a reader who has already
  // gone on to the password field back to the user name, mid-typing.
  $("username").focus();
  const providers = await fetch("/api/auth/providers").then((r) => r.json()).catch(() => ({}));
  $("sso").hidden = !providers.oidc;
}

$("login").addEventListener("submit", async (event) => {
  event.preventDefault();
  const response = await fetch("/api/auth/login", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    credentials: "same-origin",
    body: JSON.stringify({ username: $("username").value, password: $("password").value }),
  });
  const body = await response.json().catch(() => ({}));
  $("password").value = "";
  if (response.ok) showChat(body);
  else $("login-error").textContent = body.error ? body.error.message : `HTTP ${response.status}`;
});

$("logout").addEventListener("click", async () => {
  await api("/api/auth/logout", { method: "POST" }).catch(() => {});
  session.conversationId = null;
  $("thread").replaceChildren();
  $("conversations").replaceChildren();
  await showLogin();
});

$("ask").addEventListener("submit", (event) => {
  event.preventDefault();
  const question = $("question").value.trim();
  if (!question || session.controller) return;
  $("question").value = "";
  ask(question).then(() => {
    if (session.conversationId) history.replaceState(null, "", `#c=${session.conversationId}`);
  });
});
$("question").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    $("ask").requestSubmit();
  }
});
$("stop").addEventListener("click", stop);

$("lang").addEventListener("change", (event) => setLocale(event.target.value));
window.addEventListener("localechange", () => {
  $("lang").value = document.documentElement.lang.startsWith("zh") ? "zh" : "en";
  if (me) $("whoami").textContent = t("whoami", { name: me.name });
  if ($("thread").querySelector(".empty")) showEmpty();
  // The open conversation is drawn again in the new language (its sources' headings, its buttons).
  else if (me && session.conversationId && !session.controller) openConversation(session.conversationId).catch(() => {});
  if (me) refreshConversations();
  if (me && !$("documents").hidden) showUploads().catch(() => {});
  if (me && !$("admin").hidden) showView(location.hash.slice(1) || "admin");
});

for (const button of document.querySelectorAll("#views [data-view]")) {
  button.addEventListener("click", () => {
    const view = button.dataset.view;
    history.replaceState(null, "", view === "chat" ? (session.conversationId ? `#c=${session.conversationId}` : "#") : `#${view}`);
    showView(view);
  });
}
initUploads();
initAdmin();

session.onChange = () => refreshConversations();
session.onSessionEnded = () => showLogin(t("signin.ended"));
initSidebar();
setLocale(initialLocale());

api("/api/auth/me").then(showChat, () => showLogin());
