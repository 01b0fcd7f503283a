// Message catalogs (English, Chinese): the browser's language picks one, the header's menu switches,
// and the choice is remembered in localStorage.
import en from "./locales/en.js";
import zh from "./locales/zh.js";

const CATALOGS = { en, zh };
const STORE_KEY = "assistant.lang";
let current = "en";

/** The catalog to start with: the stored choice, else the first of the browser's languages we have. */
export function initialLocale() {
  const stored = localStorage.getItem(STORE_KEY);
  if (stored && CATALOGS[stored]) return stored;
  for (const tag of navigator.languages || [navigator.language || "en"]) {
    const base = String(tag).toLowerCase().split("-")[0];
    if (CATALOGS[base]) return base;
  }
  return "en";
}

/** The current catalog's name ("en" or "zh"). */
export function locale() {
  return current;
}

/** The message `key` of the current catalog (English if it lacks one), `{name}` filled from `vars`. */
export function t(key, vars = {}) {
  const text = CATALOGS[current][key] ?? CATALOGS.en[key] ?? key;
  return text.replace(/\{(\w+)\}/g, (_, name) => String(vars[name] ?? ""));
}

/**
 * Fill the static texts under `root`: `data-i18n="key"` sets the text, `data-i18n-attr="attr:key;..."`
 * sets attributes (placeholder, aria-label, a dialog's label).
 */
export function translate(root = document) {
  for (const node of root.querySelectorAll("[data-i18n]")) node.textContent = t(node.dataset.i18n);
  for (const node of root.querySelectorAll("[data-i18n-attr]")) {
    for (const pair of node.dataset.i18nAttr.split(";")) {
      const [attr, key] = pair.split(":");
      node.setAttribute(attr.trim(), t(key.trim()));
    }
  }
}

/** Switch to catalog `lang`, remember it, retranslate the page and tell listeners (`localechange`). */
export function setLocale(lang) {
  current = CATALOGS[lang] ? lang : "en";
  localStorage.setItem(STORE_KEY, current);
  document.documentElement.lang = current === "zh" ? "zh-CN" : "en";
  translate(document);
  window.dispatchEvent(new CustomEvent("localechange", { detail: current }));
}
