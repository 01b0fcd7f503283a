// Under each answer: copy, regenerate (the last answer only), and thumbs up or down with an optional
// comment and an optional corrected answer (what it should have said; the monthly refresh learns it),
// stored against the answer's message ID (PUT /api/messages/{id}/feedback).
import { api } from "./api.js";
import { t } from "./i18n.js";
import { icon } from "./icons.js";
import { el } from "./render.js";

async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    await navigator.clipboard.writeText(text);
    return;
  }
  const area = el("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.className = "offscreen";
  document.body.append(area);
  area.select();
  document.execCommand("copy");
  area.remove();
}

function actionButton(cls, key, iconName) {
  const button = el("button", `action ${cls}`);
  button.type = "button";
  button.append(icon(iconName), el("span", "label", t(key)));
  button.dataset.i18nKey = key;
  return button;
}

/** A two-line Shoelace text box of class `cls` labelled by the catalog's `${key}.label` and `${key}.placeholder`. */
function textBox(cls, key, maxlength, value) {
  const box = document.createElement("sl-textarea");
  box.setAttribute("rows", "2");
  box.setAttribute("resize", "auto");
  box.setAttribute("label", t(`${key}.label`));
  box.setAttribute("placeholder", t(`${key}.placeholder`));
  box.setAttribute("maxlength", String(maxlength));
  box.className = cls;
  box.value = value || "";
  return box;
}

/**
 * The action bar of an answer.
 *
 * @param {object} answer `{id, text, rating, comment, corrected}`: `id` is the stored message's (null
 *     when the answer was not stored, e.g. stopped: no rating then); `corrected` the reader's corrected answer.
 * @param {function|null} regenerate called by the regenerate button; null: no such button.
 */
export function answerActions(answer, regenerate) {
  const bar = el("div", "actions");
  bar.setAttribute("role", "group");
  const copy = actionButton("copy", "answer.copy", "clipboard");
  copy.addEventListener("click", async () => {
    await copyText(answer.text).catch(() => {});
    copy.querySelector(".label").textContent = t("answer.copied");
    setTimeout(() => (copy.querySelector(".label").textContent = t("answer.copy")), 1500);
  });
  bar.append(copy);
  if (regenerate) {
    const again = actionButton("regenerate", "answer.regenerate", "arrow-clockwise");
    again.addEventListener("click", regenerate);
    bar.append(again);
  }
  if (answer.id == null) return bar;

  const up = actionButton("rate-up", "answer.up", "hand-thumbs-up");
  const down = actionButton("rate-down", "answer.down", "hand-thumbs-down");
  const status = el("span", "rate-status");
  status.setAttribute("role", "status");
  const form = el("form", "comment");
  form.hidden = true;
  const box = textBox("comment-input", "comment", 4000, answer.comment);
  const fix = textBox("correction-input", "correction", 8000, answer.corrected);
  const send = document.createElement("sl-button");
  send.setAttribute("size", "small");
  send.setAttribute("type", "submit");
  send.className = "comment-send";
  send.textContent = t("comment.send");
  form.append(box, fix, send);
  const body = () => ({ rating, comment: box.value || "", corrected_answer: fix.value.trim() || null });

  let rating = answer.rating ?? null;
  const show = () => {
    up.setAttribute("aria-pressed", String(rating === 1));
    down.setAttribute("aria-pressed", String(rating === -1));
  };
  const rate = async (value) => {
    rating = value;
    show();
    await api(`/api/messages/${answer.id}/feedback`, { method: "PUT", body: body() });
    status.textContent = t("answer.thanks");
    form.hidden = false;
  };
  up.addEventListener("click", () => rate(1).catch((err) => (status.textContent = err.message)));
  down.addEventListener("click", () => rate(-1).catch((err) => (status.textContent = err.message)));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (rating == null) return;
    try {
      await api(`/api/messages/${answer.id}/feedback`, { method: "PUT", body: body() });
      status.textContent = t("comment.sent");
    } catch (err) {
      status.textContent = err.message;
    }
  });
  show();
  bar.append(up, down, status);
  const wrap = el("div", "answer-actions");
  wrap.append(bar, form);
  return wrap;
}
