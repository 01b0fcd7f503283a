// The product API as the page calls it: JSON requests with the session's CSRF token, and the chat's
// server-sent event stream read from a fetch body (so that an AbortController can stop it).

let csrfToken = "";

/** Remember the session's CSRF token (from /api/auth/me or the sign-in answer); "" after sign-out. */
export function setCsrfToken(token) {
  csrfToken = token || "";
}

/** An error answer of the API: `status` (HTTP), `code` (stable) and `message`. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function failure(response) {
  const body = await response.json().catch(() => ({}));
  const error = body.error || {};
  return new ApiError(response.status, error.code || "http_error", error.message || `HTTP ${response.status}`);
}

/**
 * Call `path` with an optional JSON `body`; resolves to the parsed JSON (null for 204).
 * Rejects with ApiError for any non-2xx answer.
 */
export async function api(path, { method = "GET", body, signal } = {}) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") headers["X-CSRF-Token"] = csrfToken;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method, headers, signal, credentials: "same-origin", body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) throw await failure(response);
  return response.status === 204 ? null : response.json();
}

/** Fetch a document's original as text (for the preview); rejects with ApiError. */
export async function fetchText(path) {
  const response = await fetch(path, { credentials: "same-origin" });
  if (!response.ok) throw await failure(response);
  return response.text();
}

/** 32 random hex digits (crypto.randomUUID needs a secure context; the appliance may be plain HTTP). */
function idempotencyKey() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * POST the chat request `body`; yields `{event, data}` for each server-sent event until the stream
 * ends. Aborting `signal` stops reading and closes the connection (the server then stops generating).
 */
export async function* chatEvents(body, signal) {
  const response = await fetch("/api/chat", {
    method: "POST",
    // One key per question: the server stores a resubmitted question once (a retry, a double click).
    headers: {
      "Content-Type": "application/json", Accept: "text/event-stream", "X-CSRF-Token": csrfToken,
      "Idempotency-Key": idempotencyKey(),
    },
    credentials: "same-origin",
    body: JSON.stringify(body),
    signal,
  });
  if (!response.ok) throw await failure(response);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const frame = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        let event = "message";
        let data = "";
        for (const line of frame.split("\n")) {
          if (line.startsWith("event:")) event = line.slice(6).trim();
          else if (line.startsWith("data:")) data += line.slice(5).trim();
        }
        if (data) yield { event, data: JSON.parse(data) };
      }
    }
  } finally {
    reader.releaseLock();
  }
}

/** POST `form` (a FormData of files and fields) to `path`; resolves to the parsed JSON. Rejects with ApiError. */
export async function apiForm(path, form) {
  const response = await fetch(path, {
    method: "POST", headers: { Accept: "application/json", "X-CSRF-Token": csrfToken }, credentials: "same-origin", body: form,
  });
  if (!response.ok) throw await failure(response);
  return response.json();
}
