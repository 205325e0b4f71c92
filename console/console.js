// Herald's operator console (SPEC §16): a page that talks only to Herald's public API, with the
// credential the operator typed, kept in this tab's sessionStorage. No third-party code; every
// value from the API is put in the page as text (never as HTML).

const $ = (selector, root = document) => root.querySelector(selector);
const $$ = (selector, root = document) => [...root.querySelectorAll(selector)];

// ---------------------------------------------------------------------------------------------
// Session and API

const session = {
  get token() { return sessionStorage.getItem("herald.token") || ""; },
  get appId() { return sessionStorage.getItem("herald.appId") || ""; },
  get role() { return sessionStorage.getItem("herald.role") || ""; },
  save(token, appId, role) {
    sessionStorage.setItem("herald.token", token);
    sessionStorage.setItem("herald.appId", appId);
    sessionStorage.setItem("herald.role", role);
  },
  clear() { sessionStorage.clear(); },
};

class APIError extends Error {
  constructor(status, body) {
    const error = (body && body.error) || {};
    super(error.message || `HTTP ${status}`);
    this.status = status;
    this.code = error.code || "";
    this.field = (error.params && error.params.field) || "";
  }
}

async function api(method, path, body, { token = session.token, appId = session.appId, admin = session.role === "admin" } = {}) {
  const headers = { Authorization: `Bearer ${token}` };
  if (admin && appId && !path.startsWith("/v1/apps")) headers["X-App-Id"] = appId;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  const parsed = text ? JSON.parse(text) : null;
  if (!response.ok) throw new APIError(response.status, parsed);
  return parsed;
}

const enc = encodeURIComponent;

// ---------------------------------------------------------------------------------------------
// Small DOM helpers

function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "text") node.textContent = value;
    else if (name === "value") node.value = value;
    else if (name === "class") node.className = value;
    else if (name in node && typeof value !== "string") node[name] = value;
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

function when(ms) {
  return ms ? new Date(ms).toLocaleString() : "—";
}

function notice(text) {
  const box = $("#notice");
  box.textContent = text || "";
  box.hidden = !text;
}

// Shows an API error next to its field: `params.field` names the input (a `.value` segment of a
// settings path is the field itself); else the closest enclosing field, else the form's own slot.
function showError(scope, error) {
  clearErrors(scope);
  const field = (error.field || "").replace(/\.value(?=\.|$)/, "");
  const slots = $$("[data-error-for]", scope);
  let target = null;
  for (let path = field; ; path = path.includes(".") ? path.slice(0, path.lastIndexOf(".")) : "") {
    target = slots.find((slot) => slot.dataset.errorFor === path);
    if (target || path === "") break;
  }
  if (!target) { notice(`${error.code || "error"}: ${error.message}`); return; }
  target.textContent = `${error.code ? error.code + ": " : ""}${error.message}`;
  target.scrollIntoView({ block: "nearest" });
}

function clearErrors(scope) {
  for (const slot of $$("[data-error-for]", scope)) slot.textContent = "";
  notice("");
}

function confirmAction(text) {
  const dialog = $("#confirm");
  $("#confirm-text").textContent = text;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "yes"), { once: true });
    dialog.showModal();
  });
}

// ---------------------------------------------------------------------------------------------
// Views

const views = ["sign-in", "settings", "users", "queue", "apps"];
let current = "";

function show(view) {
  if (!session.token) view = "sign-in";
  if (session.role === "admin" && !session.appId && ["settings", "users", "queue"].includes(view)) view = "apps";
  current = view;
  for (const name of views) $(`#view-${name}`).hidden = name !== view;
  $("#nav").hidden = !session.token;
  for (const button of $$("#nav [data-view]")) {
    if (button.dataset.view === view) button.setAttribute("aria-current", "page"); else button.removeAttribute("aria-current");
    button.hidden = session.role === "admin" && !session.appId && button.dataset.view !== "apps";
  }
  $("#who").textContent = session.token ? `${session.role}${session.appId ? " · app " + session.appId : ""}` : "";
  if (location.hash !== `#${view}`) history.replaceState(null, "", `#${view}`);
  queue.stop();
  notice("");
  if (view === "settings") settings.load();
  if (view === "queue") queue.start();
  if (view === "apps") apps.load();
}

// ---------------------------------------------------------------------------------------------
// Sign in

async function signIn(event) {
  event.preventDefault();
  const form = $("#sign-in-form");
  clearErrors(form);
  const token = form.token.value.trim();
  const appId = form.appId.value.trim();
  try {
    // The admin token lists apps; an app key is asked who it is.
    let role = "";
    try {
      await api("GET", "/v1/apps?limit=1", undefined, { token, admin: true });
      role = "admin";
    } catch (error) {
      if (error.status !== 403) throw error;
    }
    if (role === "admin") {
      if (appId) await api("GET", "/v1/settings/notifications", undefined, { token, appId, admin: true });
    } else {
      const who = await api("GET", "/v1/whoami", undefined, { token, admin: false });
      if (who.role !== "server") throw new APIError(403, { error: { code: "AUTH_ERR_NO_ACCESS", message: `a ${who.role} key cannot run the console: use a server key`, params: { field: "token" } } });
      role = "server";
      session.save(token, who.app, role);
      show("settings");
      return;
    }
    session.save(token, appId, role);
    show(appId ? "settings" : "apps");
  } catch (error) {
    if (!error.field) error.field = error.code === "ERR_APP_NOT_FOUND" ? "appId" : "token";
    if (error.field === "X-App-Id") error.field = "appId";
    showError(form, error);
  }
}

// ---------------------------------------------------------------------------------------------
// Settings: a form built from what GET /v1/settings/notifications answers, so a setting added to
// Herald shows up here without a change to this page (enums are listed below by field name).

const ENUMS = {
  messages: ["DONT_SUBSCRIBE", "SUBSCRIBE_TO_ALL", "SUBSCRIBE_TO_MENTIONS"],
  replies: ["DONT_SUBSCRIBE", "SUBSCRIBE_TO_ALL", "SUBSCRIBE_TO_MENTIONS", "SUBSCRIBE_TO_SUBSCRIBED_THREADS"],
  quotedReplies: ["DONT_SUBSCRIBE", "SUBSCRIBE_TO_ALL", "SUBSCRIBE_TO_MENTIONS", "SUBSCRIBE_TO_QUOTES_ON_OWN_MESSAGES"],
  reactions: ["DONT_SUBSCRIBE", "SUBSCRIBE_TO_REACTIONS_ON_OWN_MESSAGES", "SUBSCRIBE_TO_REACTIONS_ON_ALL_MESSAGES"],
  memberLeft: ["DONT_SUBSCRIBE", "SUBSCRIBE"], memberAdded: ["DONT_SUBSCRIBE", "SUBSCRIBE"],
  memberJoined: ["DONT_SUBSCRIBE", "SUBSCRIBE"], memberKicked: ["DONT_SUBSCRIBE", "SUBSCRIBE"],
  memberBanned: ["DONT_SUBSCRIBE", "SUBSCRIBE"], memberUnbanned: ["DONT_SUBSCRIBE", "SUBSCRIBE"],
  memberScopeChanged: ["DONT_SUBSCRIBE", "SUBSCRIBE"],
  dnd: ["DISABLED", "ENABLED"],
  privacyTemplateMode: ["DEFAULT", "PRIVACY", "USER_CHOICE"],
  messageEdited: ["NOTIFY", "DONT_NOTIFY"], messageDeleted: ["NOTIFY", "DONT_NOTIFY"],
  mode: ["pull", "webhook", "gorush", "direct"],
};
// Fields Herald sets itself: shown, never sent back.
const READ_ONLY = new Set(["delivery.secretSet", "delivery.apns.privateKeySet", "delivery.fcm.serviceAccountSet",
  "delivery.fcm.clientEmail", "delivery.fcm.tokenUri"]);
// Direct delivery's provider blocks (SPEC §13.4), null until added: their fields (the ones GET
// answers are shown too), the write-only secret (a textarea, empty when shown, sent only when
// filled, never answered), and the placeholders of fields Herald fills in when left empty.
const PROVIDERS = {
  apns: {
    label: "APNs", fields: ["teamId", "keyId", "topic", "endpoint", "sandboxEndpoint", "privateKeySet"], secret: "privateKey",
    hint: "the .p8 key's PEM (-----BEGIN PRIVATE KEY-----…)",
    placeholders: { topic: "default bundle id (optional)", endpoint: "https://api.push.apple.com", sandboxEndpoint: "https://api.sandbox.push.apple.com" },
  },
  fcm: {
    label: "FCM", fields: ["projectId", "endpoint", "clientEmail", "tokenUri", "serviceAccountSet"], secret: "serviceAccount",
    hint: "the service account's JSON file ({\"client_email\", \"private_key\", \"token_uri\", …})",
    placeholders: { endpoint: "https://fcm.googleapis.com" },
  },
  webpush: { label: "Web Push", fields: ["subject"], placeholders: { subject: "mailto:ops@example.com or https://…" } },
};
// Block fields that an empty input sets to null (the others keep their value, or Herald's default).
const NULLABLE = new Set(["delivery.apns.topic"]);
// The order of SPEC §7.1 (the API answers keys sorted); keys not listed follow, as answered.
const ORDER = ["groupPreferences", "oneOnOnePreferences", "messages", "replies", "quotedReplies", "reactions", "memberJoined",
  "memberAdded", "memberLeft", "memberKicked", "memberBanned", "memberUnbanned", "memberScopeChanged", "mutePreferences", "dnd",
  "schedule", "usePrivacyTemplate", "timezone", "replyDigestSeconds"];
const ordered = (object) => Object.entries(object).sort(([a], [b]) =>
  (ORDER.includes(a) ? ORDER.indexOf(a) : ORDER.length) - (ORDER.includes(b) ? ORDER.indexOf(b) : ORDER.length));
const DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"];

const isEntry = (value) => value && typeof value === "object" && !Array.isArray(value) && "userCanOverride" in value && "value" in value;

function input(path, value) {
  const leaf = path.split(".").pop();
  if (ENUMS[leaf] && typeof value === "string") {
    return el("select", { name: path }, ...ENUMS[leaf].map((option) => el("option", { value: option, text: option, selected: option === value })));
  }
  if (typeof value === "boolean") return el("input", { type: "checkbox", name: path, checked: value });
  if (typeof value === "number") return el("input", { type: "number", name: path, value: String(value), step: "any" });
  if (Array.isArray(value)) {
    return el("textarea", { name: path, placeholder: "one per line", value: value.join("\n") });
  }
  return el("input", { name: path, value: value ?? "" });
}

function scheduleInputs(path, schedule) {
  const grid = el("div", { class: "schedule" }, el("span"), el("span", { text: "from" }), el("span", { text: "to" }), el("span", { text: "no pushes" }));
  for (const day of DAYS) {
    const value = schedule[day] || { from: 0, to: 2359, dnd: false };
    grid.append(el("span", { text: day }),
      el("input", { type: "number", name: `${path}.${day}.from`, value: String(value.from), min: "0", max: "2359", "aria-label": `${day} from` }),
      el("input", { type: "number", name: `${path}.${day}.to`, value: String(value.to), min: "0", max: "2359", "aria-label": `${day} to` }),
      el("input", { type: "checkbox", name: `${path}.${day}.dnd`, checked: value.dnd, "aria-label": `${day}: no pushes` }));
  }
  return grid;
}

function fieldRow(path, value, overridable) {
  const control = path.endsWith(".schedule") ? scheduleInputs(path, value) : input(path, value);
  if (READ_ONLY.has(path)) control.disabled = true;
  const override = overridable === undefined ? el("span") : el("label", { class: "override" },
    el("input", { type: "checkbox", name: `${path}.userCanOverride`, checked: overridable }), "users may override");
  return el("div", { class: "field" }, el("span", { class: "name", text: path }), control, override,
    el("span", { class: "error", "data-error-for": path }));
}

// `delivery` (SPEC §13.3, §13.4): its own fields, then one fieldset per provider block with a
// checkbox named by the block's path (checked: the block is set; unchecking removes it and its key).
function deliveryFieldset(delivery) {
  const group = el("fieldset", { "data-delivery": "" }, el("legend", { text: "delivery" }),
    el("p", { class: "hint", text: "Who sends the app's jobs. In mode direct Herald sends them through the provider blocks below; "
      + "a device whose platform has no block is skipped. Keys are write-only: leave a key empty to keep the stored one." }));
  const first = ["mode", "url", "timeoutMs", "concurrency", "secretSet"];
  const rank = (name) => (first.includes(name) ? first.indexOf(name) : first.length);
  for (const [name, item] of Object.entries(delivery).sort(([a], [b]) => rank(a) - rank(b))) {
    if (!(name in PROVIDERS)) group.append(fieldRow(`delivery.${name}`, item));
  }
  for (const [name, provider] of Object.entries(PROVIDERS)) {
    const block = delivery[name] && typeof delivery[name] === "object" ? delivery[name] : null;
    const path = `delivery.${name}`;
    const body = el("div", { "data-block-body": name, hidden: !block });
    const fields = [...new Set([...provider.fields, ...Object.keys(block || {})])];
    for (const field of fields) {
      const value = block ? block[field] : field.endsWith("Set") ? false : "";
      const row = fieldRow(`${path}.${field}`, value ?? "");
      const control = row.querySelector("input, select, textarea");
      if (provider.placeholders && provider.placeholders[field]) control.placeholder = provider.placeholders[field];
      body.append(row);
    }
    if (provider.secret) {
      const secretPath = `${path}.${provider.secret}`;
      body.append(el("div", { class: "field" }, el("span", { class: "name", text: secretPath }),
        el("textarea", { name: secretPath, "data-write-only": "", autocomplete: "off", spellcheck: "false",
          placeholder: `${block ? "leave empty to keep the stored key, or paste " : ""}${provider.hint}` }),
        el("span"), el("span", { class: "error", "data-error-for": secretPath })));
    }
    if (name === "webpush") body.append(webPushKeyRow());
    group.append(el("fieldset", { "data-block": name },
      el("legend", {}, el("label", { class: "override" },
        el("input", { type: "checkbox", name: path, checked: Boolean(block), "data-toggles": name }), `${provider.label} (${path})`)),
      el("span", { class: "error", "data-error-for": path }), body));
  }
  return group;
}

// The app's Web Push public key (POST/GET /v1/settings/delivery/webpush-keys): not a setting,
// shown in the Web Push block; the key pair is made once, on demand.
function webPushKeyRow() {
  return el("div", { class: "field", "data-webpush-keys": "" }, el("span", { class: "name", text: "Web Push public key" }),
    el("code", { class: "key", "data-webpush-key": "", text: "…" }),
    el("button", { type: "button", class: "quiet", "data-action": "make-webpush-keys", hidden: true, text: "Make the key pair" }),
    el("span", { class: "error", "data-error-for": "webpushKeys" }));
}

function settingsForm(settings) {
  const form = $("#settings-form");
  form.replaceChildren();
  const switches = el("fieldset", {}, el("legend", { text: "App switches" }));
  let delivery = null;
  for (const [key, value] of ordered(settings)) {
    if (key === "delivery" && value && typeof value === "object" && !Array.isArray(value)) {
      delivery = deliveryFieldset(value);
    } else if (isEntry(value)) {
      form.append(el("fieldset", {}, el("legend", { text: key }), fieldRow(key, value.value, value.userCanOverride)));
    } else if (value && typeof value === "object" && !Array.isArray(value) && Object.values(value).some(isEntry)) {
      const group = el("fieldset", {}, el("legend", { text: key }));
      for (const [name, entry] of ordered(value)) group.append(fieldRow(`${key}.${name}`, entry.value, entry.userCanOverride));
      form.append(group);
    } else if (value && typeof value === "object" && !Array.isArray(value)) {
      for (const [name, item] of Object.entries(value)) switches.append(fieldRow(`${key}.${name}`, item));
    } else {
      switches.append(fieldRow(key, value));
    }
  }
  form.append(switches);
  if (delivery) form.append(delivery);
}

// `delivery` for the PATCH: its own fields (not the read-only ones); each provider block that is
// checked with its fields (an empty one left out, so Herald keeps its value or default; a key only
// when typed), null for one that was set and is unchecked, nothing for one that stays unset.
function deliveryPatch(form, delivery, read) {
  const patch = {};
  for (const [name, item] of Object.entries(delivery)) {
    if (!(name in PROVIDERS) && !READ_ONLY.has(`delivery.${name}`)) patch[name] = read(`delivery.${name}`, item);
  }
  for (const [name, provider] of Object.entries(PROVIDERS)) {
    const path = `delivery.${name}`;
    if (!form.elements[path].checked) {
      if (delivery[name]) patch[name] = null;
      continue;
    }
    const block = {};
    for (const control of $$(`[data-block-body='${name}'] [name]`, form)) {
      const field = control.name.slice(path.length + 1);
      if (READ_ONLY.has(control.name) || field.includes(".")) continue;
      if (control.type === "checkbox") block[field] = control.checked;
      else if (control.value.trim() !== "") block[field] = control.type === "number" ? Number(control.value) : control.value.trim();
      else if (NULLABLE.has(control.name)) block[field] = null;
    }
    patch[name] = block;
  }
  return patch;
}

// The PATCH body from the form: every field, in the shape GET answered.
function settingsPatch(settings) {
  const form = $("#settings-form");
  const read = (path, like) => {
    if (path.endsWith(".schedule")) {
      const schedule = {};
      for (const day of DAYS) {
        schedule[day] = {
          from: Number(form.elements[`${path}.${day}.from`].value),
          to: Number(form.elements[`${path}.${day}.to`].value),
          dnd: form.elements[`${path}.${day}.dnd`].checked,
        };
      }
      return schedule;
    }
    const control = form.elements[path];
    // A field that was null (delivery.url before one is set) stays null while left empty.
    if (like === null || like === undefined) return control.value.trim() === "" ? null : control.value;
    if (typeof like === "boolean") return control.checked;
    if (typeof like === "number") return control.value.trim() === "" ? null : Number(control.value);
    if (Array.isArray(like)) return control.value.split("\n").map((line) => line.trim()).filter(Boolean);
    return control.value;
  };
  const patch = {};
  for (const [key, value] of Object.entries(settings)) {
    if (key === "delivery" && value && typeof value === "object" && !Array.isArray(value)) {
      patch[key] = deliveryPatch(form, value, read);
    } else if (isEntry(value)) {
      patch[key] = { value: read(key, value.value), userCanOverride: form.elements[`${key}.userCanOverride`].checked };
    } else if (value && typeof value === "object" && !Array.isArray(value) && Object.values(value).some(isEntry)) {
      patch[key] = {};
      for (const [name, entry] of Object.entries(value)) {
        const path = `${key}.${name}`;
        patch[key][name] = { value: read(path, entry.value), userCanOverride: form.elements[`${path}.userCanOverride`].checked };
      }
    } else if (value && typeof value === "object" && !Array.isArray(value)) {
      patch[key] = {};
      for (const [name, item] of Object.entries(value)) {
        if (!READ_ONLY.has(`${key}.${name}`)) patch[key][name] = read(`${key}.${name}`, item);
      }
    } else {
      patch[key] = read(key, value);
    }
  }
  return patch;
}

const settings = {
  loaded: null,
  async load() {
    try {
      this.loaded = await api("GET", "/v1/settings/notifications");
      settingsForm(this.loaded);
      await this.webPushKey();
    } catch (error) { notice(`Settings could not be read: ${error.message}`); }
  },
  async save() {
    const view = $("#view-settings");
    clearErrors(view);
    $("#settings-status").textContent = "";
    try {
      const patch = settingsPatch(this.loaded);
      // Removing a provider block removes its stored key too: asked first.
      const removed = Object.keys(PROVIDERS).filter((name) => patch.delivery && patch.delivery[name] === null);
      if (removed.length && !(await confirmAction(`Remove ${removed.map((name) => PROVIDERS[name].label).join(", ")} from direct delivery, `
        + "with its stored key? Its devices get no pushes until it is added again."))) return;
      this.loaded = await api("PATCH", "/v1/settings/notifications", patch);
      // The first push mode makes delivery's signing secret: shown here this once, not kept in the form.
      const secret = this.loaded.delivery && this.loaded.delivery.secret;
      if (this.loaded.delivery) delete this.loaded.delivery.secret;
      settingsForm(this.loaded);
      $("#settings-status").textContent = `Saved at ${new Date().toLocaleTimeString()}.`
        + (secret ? ` Webhook signing secret (shown once, keep it): ${secret}` : "");
      await this.webPushKey();
    } catch (error) { showError(view, error); }
  },
  // The Web Push public key in the form: GET answers it, or 404 before one is made (the button
  // then makes it); `make` POSTs, which answers the existing key rather than replace it.
  async webPushKey(make = false) {
    const row = $("[data-webpush-keys]");
    if (!row) return;
    const button = $("[data-action='make-webpush-keys']", row);
    try {
      const keys = await api(make ? "POST" : "GET", "/v1/settings/delivery/webpush-keys");
      $("[data-webpush-key]", row).textContent = keys.publicKey;
      button.hidden = true;
      if (make) clearErrors(row);
    } catch (error) {
      if (!make && error.status === 404) {
        $("[data-webpush-key]", row).textContent = "none yet (browsers need it as applicationServerKey)";
        button.hidden = false;
        return;
      }
      error.field = "webpushKeys";
      showError(row, error);
    }
  },
  async restore() {
    if (!(await confirmAction("Restore every setting of this app to Herald's built-in defaults?"))) return;
    try {
      this.loaded = await api("DELETE", "/v1/settings/notifications");
      settingsForm(this.loaded);
      $("#settings-status").textContent = "Built-in defaults restored.";
      await this.webPushKey();
    } catch (error) { showError($("#view-settings"), error); }
  },
};

// ---------------------------------------------------------------------------------------------
// Users

function flatten(object, prefix = "", out = []) {
  for (const [key, value] of ordered(object)) {
    const path = prefix ? `${prefix}.${key}` : key;
    if (value && typeof value === "object" && !Array.isArray(value) && !path.endsWith(".schedule")) flatten(value, path, out);
    else out.push([path, value]);
  }
  return out;
}

function scheduleText(schedule) {
  return DAYS.map((day) => {
    const value = schedule[day];
    return value.dnd ? `${day.slice(0, 3)} none` : `${day.slice(0, 3)} ${value.from}–${value.to}`;
  }).join(", ");
}

const users = {
  uid: "",
  cursors: [],
  async lookup(event) {
    event.preventDefault();
    const form = $("#lookup-form");
    clearErrors($("#view-users"));
    const uid = form.uid.value.trim();
    try {
      const [preferences, mutes, devices] = await Promise.all([
        api("GET", `/v1/users/${enc(uid)}/preferences?include=sources`),
        api("GET", `/v1/users/${enc(uid)}/mutes`),
        api("GET", `/v1/users/${enc(uid)}/devices`),
      ]);
      this.uid = uid;
      const sources = preferences.sources || {};
      delete preferences.sources;
      $("#user-preferences tbody").replaceChildren(...flatten(preferences).map(([path, value]) => el("tr", {},
        el("td", { text: path }),
        el("td", { text: path.endsWith(".schedule") ? scheduleText(value) : String(value) }),
        el("td", {}, el("span", { class: `tag ${sources[path] || "app"}`, text: sources[path] || "app" })))));
      const now = Date.now();
      $("#user-mutes").replaceChildren(...(mutes.conversations.length ? mutes.conversations.map((mute) =>
        el("li", { text: `${mute.type} ${mute.id} until ${when(mute.until)} (${Math.round((mute.until - now) / 60000)} min)` }))
        : [el("li", { class: "hint", text: "none" })]));
      $("#user-devices").replaceChildren(...(devices.data.length ? devices.data.map((device) =>
        el("li", { "data-device": device.id, text: `${device.id}: ${device.platform}${device.topic ? " " + device.topic : ""}${device.sandbox ? " (sandbox)" : ""}, token …${device.token.slice(-8)}` }))
        : [el("li", { class: "hint", text: "none" })]));
      $("#user-details").hidden = false;
      $("#explain-result").hidden = true;
      this.cursors = [];
      await this.page(null);
      await this.levels(null);
    } catch (error) { showError($("#view-users"), error); }
  },
  async page(cursor) {
    const query = new URLSearchParams({ limit: "20" });
    if (cursor) query.set("cursor", cursor);
    const inbox = await api("GET", `/v1/users/${enc(this.uid)}/threads?${query}`);
    this.next = inbox.meta.next;
    $("[data-action='inbox-next']").disabled = !inbox.meta.hasMore;
    $("[data-action='inbox-first']").disabled = !cursor;
    $("#inbox-totals").textContent = `${inbox.totals.unreadThreads} threads with unread replies, ${inbox.totals.unreadMentions} unread mentions in all.`;
    $("#user-inbox tbody").replaceChildren(...(inbox.data.length ? inbox.data.map((row) => el("tr", { "data-thread": row.parentMessageId },
      el("td", {}, el("code", { text: row.parentMessageId }), el("div", { class: "hint", text: row.parent ? row.parent.text || "" : "" })),
      el("td", { text: row.conversationId }),
      el("td", { text: String(row.replyCount) }),
      el("td", { text: String(row.unreadReplyCount) }),
      el("td", { text: String(row.unreadMentionCount) }),
      el("td", { text: row.subscribed ? `subscribed (${row.subscription.reason}, ${row.subscription.source})` : "unsubscribed" }),
      el("td", { "data-level": row.level, text: row.level }),
      el("td", { text: when(row.updatedAt) })))
      : [el("tr", {}, el("td", { colspan: "8", class: "hint", text: "no threads" }))]));
  },
  // Conversation levels (SPEC §18): newest change first, paged with the API's cursors like the inbox.
  async levels(cursor) {
    const query = new URLSearchParams({ limit: "20" });
    if (cursor) query.set("cursor", cursor);
    const list = await api("GET", `/v1/users/${enc(this.uid)}/conversation-levels?${query}`);
    this.levelsNext = list.meta.next;
    $("[data-action='levels-next']").disabled = !list.meta.hasMore;
    $("[data-action='levels-first']").disabled = !cursor;
    $("#user-levels tbody").replaceChildren(...(list.data.length ? list.data.map((item) => el("tr", { "data-conversation": item.conversationId },
      el("td", {}, el("code", { text: item.conversationId })),
      el("td", { "data-level": item.level, text: item.level }),
      el("td", { text: when(item.updatedAt) }),
      el("td", {}, el("button", { type: "button", class: "quiet", "data-action": "remove-level", "data-conversation-id": item.conversationId, text: "Remove" }))))
      : [el("tr", {}, el("td", { colspan: "4", class: "hint", text: "no conversation levels" }))]));
  },
  async setLevel(event) {
    event.preventDefault();
    const form = $("#level-form");
    clearErrors(form);
    try {
      const conversationId = form.conversationId.value.trim();
      await api("PUT", `/v1/users/${enc(this.uid)}/conversations/${enc(conversationId)}/level`, { level: form.level.value });
      form.conversationId.value = "";
      await this.levels(null);
    } catch (error) { showError(form, error); }
  },
  async removeLevel(conversationId) {
    const form = $("#level-form");
    clearErrors(form);
    try {
      await api("DELETE", `/v1/users/${enc(this.uid)}/conversations/${enc(conversationId)}/level`);
      await this.levels(null);
    } catch (error) { showError(form, error); }
  },
  async explain(event) {
    event.preventDefault();
    const form = $("#explain-form");
    clearErrors(form);
    try {
      const decision = await api("GET", `/v1/users/${enc(this.uid)}/messages/${enc(form.messageId.value.trim())}/routing`);
      $("#explain-summary").textContent = decision.notified
        ? `Notified: ${decision.reason}${decision.jobId ? ` (job ${decision.jobId})` : ""}.`
        : `Not notified: ${decision.reason}.`;
      $("#explain-steps").replaceChildren(...decision.steps.map((step) => el("li", { text: step })));
      $("#explain-result").hidden = false;
    } catch (error) { showError(form, error); }
  },
};

// ---------------------------------------------------------------------------------------------
// Queue: stats and a chart sampled every 3 s while this view is open; dead jobs; rejected events.

const SERIES = [["ready", "#2456c9"], ["leased", "#1e7a3e"], ["retrying", "#c77c02"], ["dead", "#b3261e"]];

const queue = {
  samples: [],
  timer: null,
  start() {
    this.stop();
    $("#queue-legend").replaceChildren(...SERIES.map(([name]) => el("span", {}, el("i", { class: name }), name)));
    this.sample();
    this.lists();
    this.timer = setInterval(() => this.sample(), 3000);
  },
  stop() {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  },
  async sample() {
    try {
      const stats = await api("GET", "/v1/jobs/stats");
      this.samples.push({ at: Date.now(), ...stats });
      if (this.samples.length > 120) this.samples.shift();
      $("#queue-stats").replaceChildren(...[...SERIES.map(([name]) => name), "oldestReadyAgeMs"].map((name) =>
        el("div", { "data-stat": name }, el("dt", { text: name === "oldestReadyAgeMs" ? "oldest ready" : name }),
          el("dd", { text: name === "oldestReadyAgeMs" ? `${Math.round(stats[name] / 1000)} s` : String(stats[name]) }))));
      this.draw();
    } catch (error) { notice(`Queue stats could not be read: ${error.message}`); this.stop(); }
  },
  draw() {
    const canvas = $("#queue-chart");
    const context = canvas.getContext("2d");
    const { width, height } = canvas;
    const pad = 30;
    context.clearRect(0, 0, width, height);
    // An even top, so the middle line is a whole number too.
    const highest = Math.max(0, ...this.samples.flatMap((sample) => SERIES.map(([name]) => sample[name])));
    const max = Math.max(2, Math.ceil(highest / 2) * 2);
    context.strokeStyle = "#d6dbe4";
    context.fillStyle = "#5b6577";
    context.font = "12px system-ui, sans-serif";
    for (const fraction of [0, 0.5, 1]) {
      const y = height - pad - fraction * (height - 2 * pad);
      context.beginPath(); context.moveTo(pad, y); context.lineTo(width - 8, y); context.stroke();
      context.fillText(String(Math.round(max * fraction)), 2, y + 4);
    }
    const step = (width - pad - 8) / Math.max(1, this.samples.length - 1);
    if (this.samples.length > 1) {
      const seconds = Math.round((this.samples[this.samples.length - 1].at - this.samples[0].at) / 1000);
      context.fillText(`${seconds} s ago`, pad, height - 8);
      context.fillText("now", width - 32, height - 8);
    }
    for (const [name, color] of SERIES) {
      context.strokeStyle = color;
      context.lineWidth = 2;
      context.beginPath();
      this.samples.forEach((sample, index) => {
        const x = pad + index * step;
        const y = height - pad - (sample[name] / max) * (height - 2 * pad);
        if (index === 0) context.moveTo(x, y); else context.lineTo(x, y);
      });
      context.stroke();
    }
  },
  async lists() {
    try {
      const [dead, rejected] = await Promise.all([api("GET", "/v1/jobs/dead?limit=50"), api("GET", "/v1/events/rejected?limit=50")]);
      $("#dead-jobs tbody").replaceChildren(...(dead.data.length ? dead.data.map((job) => el("tr", { "data-job": job.id },
        el("td", { text: job.id }), el("td", { text: job.recipient }), el("td", { text: job.kind }),
        el("td", { text: String(job.attempt) }), el("td", { text: job.lastError || "" }),
        el("td", {}, el("button", { type: "button", class: "quiet", "data-action": "requeue", "data-job-id": job.id, text: "Requeue" }))))
        : [el("tr", {}, el("td", { colspan: "6", class: "hint", text: "no dead jobs" }))]));
      $("#rejected-events tbody").replaceChildren(...(rejected.data.length ? rejected.data.map((item) => el("tr", {},
        el("td", { text: when(item.receivedAt) }), el("td", { text: `${item.source ?? "?"} / ${item.id ?? "?"}` }),
        el("td", { text: item.type ?? "" }), el("td", { text: `${item.error.code}: ${item.error.message}` }),
        el("td", {}, el("details", {}, el("summary", { text: "event" }), el("pre", { text: JSON.stringify(item.event, null, 2) })))))
        : [el("tr", {}, el("td", { colspan: "5", class: "hint", text: "no rejected events" }))]));
    } catch (error) { notice(`Queue lists could not be read: ${error.message}`); }
  },
  async requeue(id) {
    try {
      const result = await api("POST", "/v1/jobs/dead/requeue", { ids: [id] });
      notice("");
      $("#settings-status").textContent = "";
      await Promise.all([this.lists(), this.sample()]);
      if (!result.requeued) notice(`Job ${id} was not dead any more.`);
    } catch (error) { notice(`Requeue failed: ${error.message}`); }
  },
};

// ---------------------------------------------------------------------------------------------
// Apps and keys (admin token)

const apps = {
  selected: "",
  async load() {
    const admin = session.role === "admin";
    $("#apps-need-admin").hidden = admin;
    $("#apps-admin").hidden = !admin;
    if (!admin) return;
    try {
      const rows = [];
      let cursor = null;
      do {
        const page = await api("GET", `/v1/apps?limit=1000${cursor ? `&cursor=${enc(cursor)}` : ""}`);
        rows.push(...page.data);
        cursor = page.meta.next;
      } while (cursor && rows.length < 5000);
      $("#apps-list tbody").replaceChildren(...rows.map((app) => el("tr", { "data-app": app.id },
        el("td", { text: app.id }), el("td", { text: when(app.createdAt) }),
        el("td", {}, el("button", { type: "button", class: "quiet", "data-action": "select-app", "data-app-id": app.id, text: "Keys" }),
          " ", el("button", { type: "button", class: "quiet", "data-action": "use-app", "data-app-id": app.id, text: "Act in this app" })))));
      if (this.selected) await this.keys(this.selected);
    } catch (error) { notice(`Apps could not be read: ${error.message}`); }
  },
  async create(event) {
    event.preventDefault();
    const form = $("#create-app-form");
    clearErrors(form);
    try {
      const app = await api("POST", "/v1/apps", { id: form.newAppId.value.trim() });
      form.reset();
      this.selected = app.id;
      await this.load();
    } catch (error) { showError(form, error); }
  },
  async keys(app) {
    this.selected = app;
    $("#keys-panel").hidden = false;
    $("#keys-app").textContent = app;
    const list = await api("GET", `/v1/apps/${enc(app)}/keys`);
    $("#keys-list tbody").replaceChildren(...list.data.map((key) => el("tr", { "data-key": key.id },
      el("td", { text: key.id }), el("td", { text: key.role }), el("td", { text: key.label || "" }), el("td", { text: when(key.createdAt) }),
      el("td", {}, el("button", { type: "button", class: "danger", "data-action": "revoke-key", "data-key-id": key.id, text: "Revoke" })))));
  },
  async createKey(event) {
    event.preventDefault();
    const form = $("#create-key-form");
    clearErrors(form);
    try {
      const body = { role: form.keyRole.value };
      if (form.keyLabel.value.trim()) body.label = form.keyLabel.value.trim();
      const created = await api("POST", `/v1/apps/${enc(this.selected)}/keys`, body);
      $("#new-secret code").textContent = created.key;
      $("#new-secret").hidden = false;
      form.keyLabel.value = "";
      await this.keys(this.selected);
    } catch (error) { showError(form, error); }
  },
  async revoke(id) {
    if (!(await confirmAction(`Revoke key ${id} of ${this.selected}? Requests with it are refused from then on.`))) return;
    try {
      await api("DELETE", `/v1/apps/${enc(this.selected)}/keys/${enc(id)}`);
      $("#new-secret").hidden = true;
      await this.keys(this.selected);
    } catch (error) { notice(`Revoking failed: ${error.message}`); }
  },
  use(app) {
    session.save(session.token, app, "admin");
    show("settings");
  },
};

// ---------------------------------------------------------------------------------------------
// Wiring

document.addEventListener("DOMContentLoaded", () => {
  $("#sign-in-form").addEventListener("submit", signIn);
  $("#lookup-form").addEventListener("submit", (event) => users.lookup(event));
  $("#explain-form").addEventListener("submit", (event) => users.explain(event));
  $("#level-form").addEventListener("submit", (event) => users.setLevel(event));
  $("#create-app-form").addEventListener("submit", (event) => apps.create(event));
  $("#create-key-form").addEventListener("submit", (event) => apps.createKey(event));
  // A provider block's checkbox shows or hides its fields.
  $("#settings-form").addEventListener("change", (event) => {
    const name = event.target.dataset.toggles;
    if (name) $(`[data-block-body='${name}']`).hidden = !event.target.checked;
  });
  document.addEventListener("click", (event) => {
    const target = event.target.closest("[data-view], [data-action]");
    if (!target) return;
    if (target.dataset.view) { show(target.dataset.view); return; }
    switch (target.dataset.action) {
      case "sign-out": session.clear(); show("sign-in"); break;
      case "save-settings": settings.save(); break;
      case "restore-defaults": settings.restore(); break;
      case "make-webpush-keys": settings.webPushKey(true); break;
      case "inbox-next": users.cursors.push(users.next); users.page(users.next).catch((error) => notice(error.message)); break;
      case "inbox-first": users.cursors = []; users.page(null).catch((error) => notice(error.message)); break;
      case "levels-next": users.levels(users.levelsNext).catch((error) => notice(error.message)); break;
      case "levels-first": users.levels(null).catch((error) => notice(error.message)); break;
      case "remove-level": users.removeLevel(target.dataset.conversationId); break;
      case "requeue": queue.requeue(target.dataset.jobId); break;
      case "select-app": apps.keys(target.dataset.appId).catch((error) => notice(error.message)); break;
      case "use-app": apps.use(target.dataset.appId); break;
      case "revoke-key": apps.revoke(target.dataset.keyId); break;
    }
  });
  const wanted = location.hash.slice(1);
  show(views.includes(wanted) && wanted !== "sign-in" ? wanted : "settings");
});
