// The open conversation: its stored turns, and a question asked into it with the answer streamed in
// (Markdown re-rendered as tokens arrive, a `replace` event taking back what was shown), then its
// sources and actions. The stop button aborts the fetch; the server stops generating when it sees that.
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
  onChange: () => {},
  onSessionEnded: () => {},
};

const thread = () => document.getElementById("thread");

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

/** One answer on screen: its text (as Markdown, with citation chips), sources, notes and actions. */
class AnswerView {
  constructor() {
    this.turn = el("article", "turn assistant");
    this.answer = el("div", "answer");
    this.answer.setAttribute("data-testid", "answer");
    this.turn.append(this.answer);
    this.text = "";
    this.citations = [];
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
      if (event === "token") view.setText(view.text + data.text);
      else if (event === "replace") view.setText(data.text);  // declined after all: replaces what was shown
      else if (event === "citations") view.setCitations(data.citations);
      else if (event === "done") {
        done = data;
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
    session.controller = null;
    setBusy(false);
  }
  if (done && done.abstained) offerNextStep(view.turn, session.conversationId);
  view.finish({ id: done ? done.message_id : null, rating: null, comment: "" }, regenerateLast(question, userNode, view));
  session.onChange();
  scrollDown();
}

/** Stop the running answer (the fetch is aborted; the question stays in the conversation). */
export function stop() {
  if (session.controller) session.controller.abort();
}
