// Citations: numbered chips inside an answer, the answer's source list, and the preview dialog
// that shows a cited document (its metadata, the cited passage, and its text, sanitised).
import { ApiError, api, fetchText } from "./api.js";
import { errorText } from "./format.js";
import { t } from "./i18n.js";
import { el, renderMarkdown, sanitizeHtml } from "./render.js";

const PREVIEW_MAX_CHARS = 200_000;
const dialog = () => document.getElementById("preview");

function docId(citation) {
  return citation.doc_id || (citation.route || "").split("/")[3];
}

/** A chip for marker `n`: opens the preview of citation `n` of `citations()` (known once they arrive). */
export function citationChip(n, citations) {
  const chip = el("button", "chip", String(n));
  chip.type = "button";
  chip.dataset.n = String(n);
  chip.setAttribute("data-testid", "chip");
  chip.addEventListener("click", () => {
    const citation = citations().find((c) => c.n === n);
    if (citation) openPreview(citation);
  });
  return chip;
}

/** Give the chips under `root` their accessible names, now that `citations` are known. */
export function labelChips(root, citations) {
  for (const chip of root.querySelectorAll(".chip")) {
    const citation = citations.find((c) => c.n === Number(chip.dataset.n));
    const title = citation ? citation.title || citation.source : "";
    chip.setAttribute("aria-label", t("source.n", { n: chip.dataset.n, title }));
    chip.title = title;
  }
}

/** The source list of an answer (title, path, page, snippet), each item opening the preview. */
export function sourceList(citations) {
  const section = el("section", "sources");
  section.append(el("h3", "sources-title", t("sources.title")));
  const list = el("ol", "citations");
  list.setAttribute("data-testid", "citations");
  for (const c of citations) {
    const item = el("li");
    const open = el("button", "source-link");
    open.type = "button";
    open.setAttribute("data-testid", "source");
    open.append(el("span", "n", `[${c.n}]`), " ", el("span", "title", c.title || c.source));
    open.addEventListener("click", () => openPreview(c));
    item.append(open);
    const where = c.source + (c.page ? ` · ${t("source.page", { page: c.page })}` : "") + (c.heading ? ` · ${c.heading}` : "");
    item.append(el("span", "src", where));
    item.append(el("span", "snippet", c.snippet));
    list.append(item);
  }
  section.append(list);
  return section;
}

function isText(meta) {
  return (meta.mime || "").startsWith("text/") || /\.(md|markdown|txt|html?|csv|ya?ml|json)$/i.test(meta.source);
}

function documentBody(meta, text) {
  const shown = text.length > PREVIEW_MAX_CHARS ? text.slice(0, PREVIEW_MAX_CHARS) + "\n…" : text;
  if (/markdown/.test(meta.mime) || /\.(md|markdown)$/i.test(meta.source)) {
    const body = el("div", "doc markdown");
    body.append(renderMarkdown(shown));
    return body;
  }
  if (/html/.test(meta.mime) || /\.html?$/i.test(meta.source)) {
    const body = el("div", "doc html");
    body.append(sanitizeHtml(shown));
    return body;
  }
  return el("pre", "doc plain", shown);
}

/** Open the preview dialog on `citation`'s document. */
export async function openPreview(citation) {
  const box = dialog();
  const body = document.getElementById("preview-body");
  const download = document.getElementById("preview-download");
  box.label = citation.title || citation.source;
  download.href = citation.route;
  download.hidden = false;
  const head = el("p", "preview-path", citation.source + (citation.page ? ` · ${t("source.page", { page: citation.page })}` : ""));
  const cited = el("blockquote", "preview-cited");
  cited.append(el("strong", "", t("preview.cited")), el("span", "", citation.snippet));
  const content = el("div", "preview-content", t("preview.loading"));
  content.setAttribute("data-testid", "preview-content");
  body.replaceChildren(head, cited, content);
  box.show();
  try {
    const meta = await api(`/api/documents/${encodeURIComponent(docId(citation))}`);
    box.label = meta.title || meta.source;
    if (!isText(meta)) {
      content.textContent = t("preview.nopreview");
      return;
    }
    content.replaceChildren(documentBody(meta, await fetchText(meta.route)));
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) {
      download.hidden = true;
      content.textContent = t("preview.gone");
    } else content.textContent = t("answer.error", { message: err instanceof ApiError ? errorText(err) : err.message });
  }
}
