// Small DOM builders the admin pages share: a table with a header row (in a box that scrolls sideways
// when the table is wider than the page), and a button with a label.
import { el } from "./render.js";

/** A table whose header cells are `headers` (texts) and whose body rows are `rows` (arrays of text or nodes),
 * `testid` its `data-testid`; returned in its scroll box (`.table-scroll`), so that a narrow page scrolls
 * the table rather than break its headers' words. */
export function table(headers, rows, testid) {
  const node = el("table", "grid");
  if (testid) node.setAttribute("data-testid", testid);
  const head = el("tr");
  head.append(...headers.map((h) => {
    const th = el("th", "", h);
    th.scope = "col";
    return th;
  }));
  const thead = el("thead");
  thead.append(head);
  const tbody = el("tbody");
  for (const cells of rows) {
    const tr = el("tr");
    tr.append(...cells.map((c) => {
      const td = el("td");
      if (c instanceof Node) td.append(c);
      else td.textContent = c ?? "";
      return td;
    }));
    tbody.append(tr);
  }
  node.append(thead, tbody);
  const box = el("div", "table-scroll");
  box.append(node);
  return box;
}

/** A plain button with `label` that calls `onClick`. */
export function button(label, onClick, cls = "action") {
  const node = el("button", cls, label);
  node.type = "button";
  node.addEventListener("click", onClick);
  return node;
}

/** A path or file name for a table cell: the one kind of cell text that may break inside a word (it has
 * few spaces), so that it does not widen its table; every other cell keeps its words whole (style.css). */
export function pathText(text) {
  return el("span", "path", text);
}

/** A section heading. */
export function heading(text) {
  return el("h3", "admin-heading", text);
}
