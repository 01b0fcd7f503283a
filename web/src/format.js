// Dates, numbers and sizes in the reader's language (Intl), and an API error in words from the catalogs.
import { locale, t } from "./i18n.js";

const tag = () => (locale() === "zh" ? "zh-CN" : "en-GB");

/** A UTC timestamp (ISO 8601) as a local date and time; "" for none. */
export function formatDate(iso) {
  if (!iso) return "";
  const moment = new Date(/[zZ]|[+-]\d\d:\d\d$/.test(iso) ? iso : `${iso}Z`);
  return new Intl.DateTimeFormat(tag(), { dateStyle: "medium", timeStyle: "short" }).format(moment);
}

/** A calendar day (YYYY-MM-DD) in the reader's format. */
export function formatDay(day) {
  return new Intl.DateTimeFormat(tag(), { dateStyle: "medium", timeZone: "UTC" }).format(new Date(`${day}T00:00:00Z`));
}

/** A calendar day (YYYY-MM-DD) in short, as a chart's axis labels it ("7 Dec", "12月7日"). */
export function formatShortDay(day) {
  return new Intl.DateTimeFormat(tag(), { day: "numeric", month: "short", timeZone: "UTC" }).format(new Date(`${day}T00:00:00Z`));
}

/** A number with the reader's grouping; `digits` fraction digits at most. */
export function formatNumber(value, digits = 0) {
  return new Intl.NumberFormat(tag(), { maximumFractionDigits: digits }).format(value);
}

/** A share (0..1) as a percentage; "–" for none. */
export function formatPercent(value) {
  return value === null || value === undefined ? "–" : new Intl.NumberFormat(tag(), { style: "percent" }).format(value);
}

/** A size in bytes as B, KB or MB. */
export function formatBytes(bytes) {
  if (bytes < 1024) return `${formatNumber(bytes)} B`;
  if (bytes < 1024 * 1024) return `${formatNumber(bytes / 1024, 1)} KB`;
  return `${formatNumber(bytes / 1024 / 1024, 1)} MB`;
}

/** The catalog's message for an ApiError's code (the server's own words as detail), else a generic one. */
export function errorText(err) {
  const key = `error.${err.code}`;
  const text = t(key);
  if (text !== key) return err.message ? `${text} (${err.message})` : text;
  return err.message || t("error.generic", { code: err.code || "?" });
}
