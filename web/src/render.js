// Text to DOM without running anything from it: Markdown by `marked`, then sanitised by DOMPurify
// into a fragment (never assigned as HTML by us), then `[n]` markers turned into citation chips.
import DOMPurify from "dompurify";
import { marked } from "marked";

// Images would load from anywhere the text names (and the CSP refuses them anyway); forms and
// styles have no place in an answer or a preview.
const PURIFY = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: ["img", "style", "form", "input", "button", "textarea", "select", "iframe", "svg", "math"],
  FORBID_ATTR: ["style", "id", "class"],
  RETURN_DOM_FRAGMENT: true,
};
const SAFE_HREF = /^(https?:|mailto:|#|\/(?!\/))/i;
const MARKER = /\[(\d+(?:\s*[,，]\s*\d+)*)\]/g;

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    const href = node.getAttribute("href") || "";
    if (!SAFE_HREF.test(href.trim())) node.removeAttribute("href");
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

/** Sanitised DOM of untrusted HTML (a document's own HTML): a DocumentFragment. */
export function sanitizeHtml(html) {
  return DOMPurify.sanitize(html, PURIFY);
}

/** Sanitised DOM of untrusted Markdown (an answer, a Markdown document): a DocumentFragment. */
export function renderMarkdown(text) {
  return sanitizeHtml(marked.parse(text, { gfm: true, breaks: false, async: false }));
}

/**
 * Replace the `[n]` and `[n, m]` markers in the text of `root` (outside code and links) by chips made
 * with `makeChip(n)`; returns `root`.
 */
export function addCitationChips(root, makeChip) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const texts = [];
  while (walker.nextNode()) {
    const node = walker.currentNode;
    if (!node.parentElement || !node.parentElement.closest("code, pre, a")) texts.push(node);
  }
  for (const node of texts) {
    const value = node.nodeValue;
    MARKER.lastIndex = 0;
    if (!MARKER.test(value)) continue;
    MARKER.lastIndex = 0;
    const parts = document.createDocumentFragment();
    let at = 0;
    for (const match of value.matchAll(MARKER)) {
      parts.append(value.slice(at, match.index));
      for (const n of match[1].split(/\s*[,，]\s*/)) parts.append(makeChip(Number(n)));
      at = match.index + match[0].length;
    }
    parts.append(value.slice(at));
    node.replaceWith(parts);
  }
  return root;
}

/** An element `tag` with class `cls` and text `text` (set as text, never parsed). */
export function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}
