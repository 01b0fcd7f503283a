// Chat page: signs in (password or single sign-on), posts the question, renders the answer as
// server-sent events arrive, then its citations.
const thread = document.getElementById("thread");
const form = document.getElementById("ask");
const input = document.getElementById("question");
const send = document.getElementById("send");
const loginForm = document.getElementById("login");
const loginError = document.getElementById("login-error");
const whoami = document.getElementById("whoami");
const logoutButton = document.getElementById("logout");
const history = [];
// The session's CSRF token: sent as X-CSRF-Token on every state-changing request.
let csrfToken = "";

function showChat(me) {
  csrfToken = me.csrf_token || "";
  whoami.textContent = `Signed in as ${me.name}`;
  for (const node of [thread, form, whoami, logoutButton]) node.hidden = false;
  loginForm.hidden = true;
  input.focus();
}

async function showLogin(message) {
  csrfToken = "";
  for (const node of [thread, form, whoami, logoutButton]) node.hidden = true;
  loginForm.hidden = false;
  loginError.textContent = message || "";
  const providers = await fetch("/api/auth/providers").then((r) => r.json()).catch(() => ({}));
  document.getElementById("sso").hidden = !providers.oidc;
}

async function start() {
  const response = await fetch("/api/auth/me", { credentials: "same-origin" });
  if (response.ok) showChat(await response.json());
  else await showLogin();
}

loginForm.addEventListener("submit", async (event) => {
  event.preventDefault();
  const response = await fetch("/api/auth/login", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    credentials: "same-origin",
    body: JSON.stringify({
      username: document.getElementById("username").value,
      password: document.getElementById("password").value,
    }),
  });
  const body = await response.json().catch(() => ({}));
  document.getElementById("password").value = "";
  if (response.ok) showChat(body);
  else loginError.textContent = body.error ? body.error.message : `HTTP ${response.status}`;
});

logoutButton.addEventListener("click", async () => {
  await fetch("/api/auth/logout", { method: "POST", credentials: "same-origin", headers: { "X-CSRF-Token": csrfToken } });
  thread.replaceChildren();
  history.length = 0;
  await showLogin();
});

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

// Parses a text/event-stream body into {event, data} objects.
async function* readEvents(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let event = "message", data = "";
      for (const line of frame.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data += line.slice(5).trim();
      }
      if (data) yield { event, data: JSON.parse(data) };
    }
  }
}

function renderCitations(turn, citations) {
  if (!citations.length) return;
  const list = el("ol", "citations");
  list.setAttribute("data-testid", "citations");
  for (const c of citations) {
    const item = el("li");
    item.append(el("span", "n", `[${c.n}] `));
    const src = el("a", "src", c.source + (c.page ? ` (page ${c.page})` : ""));
    src.href = c.route;  // the document route of the API (ACL-checked), never a server path
    item.append(src);
    if (c.heading) item.append(el("span", "heading", ` — ${c.heading}`));
    item.append(el("span", "snippet", c.snippet));
    list.append(item);
  }
  turn.append(list);
}

// A quiet line under an answer that the model stopped at its length limit, mid-sentence perhaps.
function noteCut(answer) {
  const note = el("div", "note", "The answer was cut at the length limit.");
  note.setAttribute("data-testid", "answer-note");
  answer.after(note);
}

async function ask(question) {
  thread.append(el("div", "turn user", question));
  const turn = el("div", "turn assistant");
  const answer = el("div", "answer streaming");
  answer.setAttribute("data-testid", "answer");
  turn.append(answer);
  thread.append(turn);
  thread.scrollTop = thread.scrollHeight;
  let text = "";
  try {
    const response = await fetch("/api/chat", {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream", "X-CSRF-Token": csrfToken },
      credentials: "same-origin",
      body: JSON.stringify({ question, history: history.slice(-6) }),
    });
    if (response.status === 401) {
      await showLogin("Your session has ended; please sign in again.");
      return;
    }
    if (!response.ok) {
      const body = await response.json().catch(() => ({}));
      throw new Error(body.error ? body.error.message : `HTTP ${response.status}`);
    }
    for await (const { event, data } of readEvents(response)) {
      if (event === "token") { text += data.text; answer.textContent = text; }
      else if (event === "replace") { text = data.text; answer.textContent = text; }  // declined after all
      else if (event === "citations") renderCitations(turn, data.citations);
      else if (event === "done" && data.finish_reason === "length") noteCut(answer);
      else if (event === "error") throw new Error(data.message);
      thread.scrollTop = thread.scrollHeight;
    }
    history.push({ role: "user", content: question }, { role: "assistant", content: text });
  } catch (err) {
    turn.append(el("div", "error", `Something went wrong: ${err.message}`));
  } finally {
    answer.classList.remove("streaming");
  }
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const question = input.value.trim();
  if (!question) return;
  input.value = "";
  send.disabled = true;
  try { await ask(question); } finally { send.disabled = false; input.focus(); }
});
input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); form.requestSubmit(); }
});

start();
