// When the documents hold no answer: say so plainly, and, where a helpdesk takes conversations
// (GET /api/handoff), offer "ask the helpdesk", which hands the conversation over as a ticket.
import { api } from "./api.js";
import { errorText } from "./format.js";
import { t } from "./i18n.js";
import { el } from "./render.js";

let enabled = null;

async function helpdeskEnabled() {
  if (enabled === null) enabled = (await api("/api/handoff").catch(() => ({ enabled: false }))).enabled;
  return enabled;
}

/** Append to answer `turn` the "not found" note and, when a helpdesk is configured, its button. */
export async function offerNextStep(turn, conversationId) {
  const box = el("div", "next-step");
  box.setAttribute("data-testid", "not-found");
  box.append(el("p", "", t("answer.notfound")));
  turn.append(box);
  if (!conversationId || !(await helpdeskEnabled())) return;
  const ask = el("button", "action ask-helpdesk", t("answer.askHelpdesk"));
  ask.type = "button";
  const result = el("span", "rate-status");
  result.setAttribute("role", "status");
  ask.addEventListener("click", async () => {
    ask.disabled = true;
    try {
      const ticket = await api(`/api/conversations/${encodeURIComponent(conversationId)}/handoff`, { method: "POST" });
      result.textContent = t("answer.handedOff", { id: ticket.ticket_id });
      ask.remove();
    } catch (err) {
      result.textContent = errorText(err);
      ask.disabled = false;
    }
  });
  box.append(ask, result);
}
