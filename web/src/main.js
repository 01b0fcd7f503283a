// The chat app's entry point: sign-in (password or single sign-on), the header (language, sign-out),
// and the wiring of the sidebar, the thread and the composer.
import "@shoelace-style/shoelace/dist/components/button/button.js";
import "@shoelace-style/shoelace/dist/components/dialog/dialog.js";
import "@shoelace-style/shoelace/dist/components/input/input.js";
import "@shoelace-style/shoelace/dist/components/textarea/textarea.js";
import "./icons.js";

import { api, setCsrfToken } from "./api.js";
import { initialLocale, setLocale, t } from "./i18n.js";
import { initSidebar, refreshConversations } from "./sidebar.js";
import { ask, newConversation, openConversation, session, showEmpty, stop } from "./thread.js";

const $ = (id) => document.getElementById(id);
let me = null;

function showChat(user) {
  me = user;
  setCsrfToken(user.csrf_token);
  $("whoami").textContent = t("whoami", { name: user.name });
  for (const node of [$("app"), $("whoami"), $("logout")]) node.hidden = false;
  $("login").hidden = true;
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
  for (const node of [$("app"), $("whoami"), $("logout")]) node.hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  const providers = await fetch("/api/auth/providers").then((r) => r.json()).catch(() => ({}));
  $("sso").hidden = !providers.oidc;
  $("username").focus();
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
});

session.onChange = () => refreshConversations();
session.onSessionEnded = () => showLogin(t("signin.ended"));
initSidebar();
setLocale(initialLocale());

api("/api/auth/me").then(showChat, () => showLogin());
