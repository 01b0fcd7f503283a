// The open conversation: its stored turns, and a question asked into it with the answer streamed in:
// the sources found first with a status line (reading N sources, writing, checking), then the draft as
// the model writes it, marked as being checked, each sentence replaced in place by its checked text
// (`revise`, "" when withdrawn) or the whole draft by a quote or "not found" (`replace`); then its
// citations and actions. The stop button aborts the fetch; the server stops generating when it sees that.
import { ApiError, api, chatEvents } from "./api.js";
import { answerActions } from "./feedback.js";
import { errorText } from "./format.js";
import { offerNextStep } from "./handoff.js";
import { t } from "./i18n.js";
import { addCitationChips, el, renderMarkdown } from "./render.js";
import { citationChip, labelChips, sourceList } from "./sources.js";

/** What the rest of the page needs to know: the open conversation and the running request. */
export const session = {
  conversationId: null,
  controller: null,
  askedAt: 0,  // performance.now() when the running answer was asked for
  onChange: () => {},
  onSessionEnded: () => {},
};

const thread = () => document.getElementById("thread");

// Stop takes Ask's place while an answer runs: the second click of a double click on Ask would land
// on it and stop the answer just asked for. Clicks on Stop this soon after the question are ignored.
const STOP_GRACE_MS = 600;

function scrollDown() {
  const node = thread();
  node.scrollTop = node.scrollHeight;
}

function setBusy(busy) {
  document.getElementById("send").hidden = busy;
  document.getElementById("stop").hidden = !busy;
  if (!busy) document.getElementById("question").focus();
}

/** Show the greeting of an empty conversation. */
export function showEmpty() {
  const note = el("div", "empty");
  note.append(el("h2", "", t("empty.title")), el("p", "", t("empty.body")));
  thread().replaceChildren(note);
}

function userTurn(text) {
  const turn = el("div", "turn user");
  turn.append(el("div", "question", text));
  return turn;
}

/** A titled list of documents, each a link to its ACL-checked route, with `before(d)` and `after(d)` nodes. */
function documentList(cls, testid, title, documents, before, after) {
  const section = el("section", cls);
  section.setAttribute("data-testid", testid);
  section.append(el("h3", "sources-title", t(title)));
  const list = el("ol", "found-list");
  for (const d of documents) {
    const link = el("a", "source-link", d.title || d.source);
    link.href = d.route;
    link.target = "_blank";
    link.rel = "noopener noreferrer";
    const item = el("li");
    item.append(...before(d), link, ...after(d));
    list.append(item);
  }
  section.append(list);
  return section;
}

/** One answer on screen: its text (as Markdown, with citation chips), sources, notes and actions. */
class AnswerView {
  constructor() {
    this.turn = el("article", "turn assistant");
    this.answer = el("div", "answer");
    this.answer.setAttribute("data-testid", "answer");
    this.turn.append(this.answer);
    this.text = "";
    this.citations = [];
    this.segments = [];  // the draft's sentences: {text, checked}
    this.tail = "";  // draft text after the last complete sentence
  }

  /** The answer while it is written: checked sentences as they are, the rest marked as being checked. */
  showDraft() {
    let checked = 0;
    while (checked < this.segments.length && this.segments[checked]?.checked) checked += 1;
    const done = this.segments.slice(0, checked).map((s) => s.text).join("");
    const pending = this.segments.slice(checked).map((s) => (s ? s.text : "")).join("") + this.tail;
    this.setText(done);
    this.draft?.remove();
    this.draft = null;
    if (pending.trim()) {
      this.draft = el("div", "draft");
      this.draft.setAttribute("data-testid", "answer-draft");
      this.draft.title = t("answer.checking");
      this.draft.append(addCitationChips(renderMarkdown(pending), (n) => citationChip(n, () => this.citations)));
      this.answer.append(this.draft);
    }
  }

  /** Apply one event of the draft (`token`, `sentence`, `revise`, `replace`). */
  drafted(event, data) {
    if (event === "token") this.tail += data.text;
    else if (event === "sentence") {
      this.segments[data.index] = { text: data.text, checked: false };
      this.tail = data.rest || "";
    } else if (event === "revise") {
      this.segments[data.index] = { text: data.text, checked: true };
      if (data.state === "withdrawn") this.withdrawn = (this.withdrawn || 0) + 1;
    } else if (event === "replace") {
      this.segments = [];
      this.tail = data.text;
    }
    this.showDraft();
  }

  /** The status line: sources read, writing, checking; "" removes it. */
  status(text) {
    if (!this.statusLine) {
      this.statusLine = el("div", "status");
      this.statusLine.setAttribute("data-testid", "answer-status");
      this.statusLine.setAttribute("role", "status");
      this.turn.prepend(this.statusLine);
    }
    this.statusLine.textContent = text;
    this.statusLine.hidden = !text;
  }

  /** The sources found, listed before the answer is written (replaced by the citations at the end). */
  foundSources(sources) {
    this.found?.remove();
    this.found = null;
    if (!sources || !sources.length) return;
    this.found = documentList("found", "found-sources", "sources.found", sources, (s) => [el("span", "n", `[${s.n}] `)], () => []);
    this.answer.before(this.found);
  }

  /** The closest documents offered with a "not found". */
  closest(documents) {
    if (!documents || !documents.length) return;
    const section = documentList("sources closest", "closest", "sources.closest", documents, () => [], (d) => [el("span", "src", d.source)]);
    this.turn.append(section);
  }

  setText(text) {
    this.text = text;
    const fragment = addCitationChips(renderMarkdown(text), (n) => citationChip(n, () => this.citations));
    this.answer.replaceChildren(fragment);
    if (this.citations.length) labelChips(this.answer, this.citations);
  }

  setCitations(citations) {
    this.citations = citations || [];
    labelChips(this.answer, this.citations);
    if (this.citations.length) this.turn.append(sourceList(this.citations));
  }

  note(text, cls = "note") {
    const note = el("div", cls, text);
    if (cls === "note") note.setAttribute("data-testid", "answer-note");
    this.turn.append(note);
  }

  finish(message, regenerate) {
    for (const old of thread().querySelectorAll(".action.regenerate")) old.remove();  // the last answer only
    this.turn.append(answerActions({ ...message, text: this.text }, regenerate));
  }
}

function regenerateLast(question, userNode, view) {
  return () => {
    if (session.controller) return;
    userNode.remove();
    view.turn.remove();
    ask(question, { regenerate: true });
  };
}

/** Open conversation `id`: its messages replace the thread. Rejects with ApiError (404: not the reader's). */
export async function openConversation(id) {
  const messages = await api(`/api/conversations/${encodeURIComponent(id)}/messages`);
  session.conversationId = id;
  const node = thread();
  node.replaceChildren();
  let question = null;
  let questionNode = null;
  messages.forEach((message, i) => {
    if (message.role === "user") {
      question = message.content;
      questionNode = userTurn(message.content);
      node.append(questionNode);
      return;
    }
    const view = new AnswerView();
    view.setText(message.content);
    view.setCitations(message.citations);
    node.append(view.turn);
    const last = i === messages.length - 1 && question !== null;
    if (last && message.abstained) offerNextStep(view.turn, id);
    view.finish(
      { id: message.id, rating: message.rating, comment: message.comment, corrected: message.corrected_answer },
      last ? regenerateLast(question, questionNode, view) : null,
    );
  });
  if (!messages.length) showEmpty();
  scrollDown();
}

/** Start a new, empty conversation (created on the server with its first question). */
export function newConversation() {
  if (session.controller) session.controller.abort();
  session.conversationId = null;
  showEmpty();
}

/**
 * Ask `question` in the open conversation (created first if there is none) and stream the answer.
 * With `regenerate`, the server replaces the conversation's last question and answer.
 */
export async function ask(question, { regenerate = false } = {}) {
  if (session.controller) return;
  const controller = new AbortController();
  session.controller = controller;
  session.askedAt = performance.now();
  setBusy(true);
  const node = thread();
  node.querySelector(".empty")?.remove();
  const userNode = userTurn(question);
  const view = new AnswerView();
  view.answer.classList.add("streaming");
  node.append(userNode, view.turn);
  scrollDown();
  let done = null;
  try {
    if (!session.conversationId) {
      session.conversationId = (await api("/api/conversations", { method: "POST", body: {} })).id;
      session.onChange();
    }
    const body = { question, conversation_id: session.conversationId, regenerate };
    for await (const { event, data } of chatEvents(body, controller.signal)) {
      if (event === "sources") view.foundSources(data.sources);
      else if (event === "status") view.status(t(`status.${data.stage}`, { n: data.sources ?? "" }));
      else if (["token", "sentence", "revise", "replace"].includes(event)) view.drafted(event, data);
      else if (event === "citations") {
        view.found?.remove();
        view.setCitations(data.citations);
      } else if (event === "done") {
        done = data;
        view.status("");
        view.segments = [];
        view.tail = "";
        view.showDraft();
        view.setText(data.answer);  // the checked answer
        if (data.abstained) view.closest(data.closest);
        if (data.grounding && data.grounding.removed) view.note(t("answer.withdrawn", { n: data.grounding.removed }));
        if (data.finish_reason === "length") view.note(t("answer.cut"));
      } else if (event === "error") throw new Error(data.message);
      scrollDown();
    }
  } catch (err) {
    if (err.name === "AbortError") view.note(t("answer.stopped"));
    else if (err instanceof ApiError && err.status === 401) {
      session.onSessionEnded();
      return;
    } else view.note(t("answer.error", { message: err instanceof ApiError ? errorText(err) : err.message }), "error");
  } finally {
    view.answer.classList.remove("streaming");
    if (!done) view.status("");
    session.controller = null;
    setBusy(false);
  }
  if (done && done.abstained) offerNextStep(view.turn, session.conversationId);
  view.finish({ id: done ? done.message_id : null, rating: null, comment: "" }, regenerateLast(question, userNode, view));
  session.onChange();
  scrollDown();
}

/**
 * Stop the running answer (the fetch is aborted; the question stays in the conversation). A click
 * within STOP_GRACE_MS of the question is the end of a double click on Ask, and is ignored.
 */
export function stop() {
  if (!session.controller || performance.now() - session.askedAt < STOP_GRACE_MS) return;
  session.controller.abort();
}
