// Icons: Shoelace's <sl-icon> with the Bootstrap icons that web/build.mjs copies into dist/shoelace/.
import "@shoelace-style/shoelace/dist/components/icon/icon.js";
import { setBasePath } from "@shoelace-style/shoelace/dist/utilities/base-path.js";

setBasePath("/shoelace");

/** A decorative icon `name` (its button carries the accessible name). */
export function icon(name) {
  const node = document.createElement("sl-icon");
  node.setAttribute("name", name);
  node.setAttribute("aria-hidden", "true");
  return node;
}
