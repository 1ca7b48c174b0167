// Filigrane console: the few pages that call the API (assets, mark, check) and the key page's copy button.
// Every call goes to /console/api/<API path> with the session cookie and the CSRF token; the node runs the
// API's own route for it. Values from the server are inserted with textContent, never as HTML; a value someone
// chose (a name, a URL) inside a sentence is a bidirectional isolate (say, iso), so that a right-to-left override
// in it cannot reorder the words around it.
"use strict";
(function () {
  const csrf = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";

  function api(path, opts) {
    opts = opts || {};
    opts.credentials = "same-origin";
    opts.headers = Object.assign({ "X-CSRF-Token": csrf }, opts.headers || {});
    return fetch("/console/api" + path, opts);
  }

  // seg is an id as one segment of a path. encodeURIComponent alone would not keep it there: the node decodes
  // %2F and resolves "..", so an id like "../../assets" (from a link's query) would call another route. The
  // API's ids (req_…, ast_…, whk_…) are letters, digits, "_" and "-".
  const idPattern = /^[A-Za-z0-9_-]{1,200}$/;
  function seg(id) {
    const s = String(id);
    if (!idPattern.test(s)) throw new Error("not an id: " + s);
    return s;
  }

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  // say fills node with a sentence of alternating text and values: say(p, "Added ", name, ". Verify it.").
  // Each value is a <bdi>, isolated from the text around it.
  function say(node, ...parts) {
    node.textContent = "";
    parts.forEach((part, i) => node.append(i % 2 ? el("bdi", {}, part) : String(part)));
    return node;
  }

  // iso isolates a value in plain text that holds no elements (a confirmation dialog's question).
  const iso = (s) => "\u2068" + s + "\u2069";

  async function problemText(resp) {
    try {
      const p = await resp.json();
      return (p.title || "Error") + (p.detail ? ": " + p.detail : "") + (p.code ? " (" + p.code + ")" : "");
    } catch (e) {
      return "Error " + resp.status;
    }
  }

  function kindOf(file) {
    const t = (file.type || "").toLowerCase(), n = file.name.toLowerCase();
    if (t === "application/pdf" || n.endsWith(".pdf")) return "documents";
    if (t.startsWith("video/") || /\.(mp4|m4v|mov)$/.test(n)) return "videos";
    return "images";
  }

  // Follows a 202 receipt until the job ends, then returns the result's response.
  async function untilDone(resp, status) {
    let receipt = await resp.json();
    const id = receipt.request_id;
    const base = receipt.operation === "detect" || receipt.type === "detection" ? "/watermarks/detection-jobs/" : "/watermarks/jobs/";
    for (let i = 0; i < 600; i++) {
      status.textContent = "Job " + id + " is " + (receipt.status || "queued") + "…";
      await new Promise((r) => setTimeout(r, 2000));
      const r = await api(base + id + "/result");
      if (r.status !== 202) return r;
      receipt = await r.json();
    }
    throw new Error("the job did not finish in time; find it later in Assets");
  }

  // --- keys: copy the new secret
  const copy = document.getElementById("copy-secret");
  if (copy) {
    copy.addEventListener("click", async () => {
      const input = document.getElementById("new-secret");
      input.select();
      try { await navigator.clipboard.writeText(input.value); copy.textContent = "Copied"; } catch (e) { copy.textContent = "Select and copy"; }
    });
  }

  // --- assets
  const assetTable = document.getElementById("assets");
  if (assetTable) {
    const body = assetTable.querySelector("tbody");
    const status = document.getElementById("assets-status");
    const more = document.getElementById("assets-more");
    const filters = document.getElementById("asset-filters");
    const mayDelete = ["owner", "admin"].includes(document.getElementById("main").dataset.role);
    let cursor = null;

    function query() {
      const q = new URLSearchParams();
      q.set("limit", "25");
      for (const [k, v] of new FormData(filters)) if (v) q.set(k, v);
      if (cursor) q.set("cursor", cursor);
      return q.toString();
    }

    async function load(reset) {
      if (reset) { cursor = null; body.textContent = ""; }
      status.textContent = "Loading…";
      const r = await api("/assets?" + query());
      if (!r.ok) { status.textContent = await problemText(r); return; }
      const page = await r.json();
      for (const a of page.items) body.appendChild(row(a));
      cursor = page.next_cursor;
      more.hidden = !cursor;
      status.textContent = body.children.length === 0 ? "No assets match." : body.children.length + " assets shown.";
    }

    function row(a) {
      const tr = el("tr", { "data-asset-id": a.id });
      const prev = el("td");
      const content = "/console/api/assets/" + seg(a.id) + "/content";
      // A small preview made by the server (never the full file); a missing one leaves the cell empty.
      if (a.media_type === "image") {
        const img = el("img", { class: "thumb", src: "/console/thumbnails/" + seg(a.id), alt: "", loading: "lazy", width: "64", height: "64" });
        img.addEventListener("error", () => img.remove());
        prev.appendChild(img);
      }
      tr.appendChild(prev);
      tr.appendChild(el("td", {}, a.name || a.filename || a.id));
      tr.appendChild(el("td", {}, a.kind));
      tr.appendChild(el("td", {}, a.media_type));
      tr.appendChild(el("td", { class: "mono" }, a.watermark_id ? a.watermark_id.slice(0, 16) + "…" : "—"));
      tr.appendChild(el("td", {}, (a.created_at || "").replace("T", " ").replace(/\..*|Z$/, "") + " UTC"));
      const act = el("td");
      const dl = el("a", { href: content, download: a.name || a.id }, "Download");
      dl.setAttribute("aria-label", "Download " + (a.name || a.id));
      act.appendChild(dl);
      const edit = el("button", { type: "button", "aria-label": "Edit name and metadata of " + (a.name || a.id), "aria-expanded": "false" }, "Edit");
      edit.addEventListener("click", () => toggleEditor(tr, a, edit));
      act.append(" ", edit);
      if (mayDelete) {
        const del = el("button", { type: "button", class: "danger", "aria-label": "Delete " + (a.name || a.id) }, "Delete");
        del.addEventListener("click", async () => {
          if (!confirm("Delete " + iso(a.name || a.id) + "? Downloads stop at once.")) return;
          const r = await api("/assets/" + seg(a.id), { method: "DELETE" });
          if (r.ok) { tr.remove(); status.textContent = "Deleted."; } else status.textContent = await problemText(r);
        });
        act.append(" ", del);
      }
      tr.appendChild(act);
      return tr;
    }

    // toggleEditor opens (or closes) a row under the asset with its name and metadata, saved with PATCH at
    // the version read (409 when someone changed it meanwhile).
    async function toggleEditor(tr, a, button) {
      const open = tr.nextElementSibling;
      if (open && open.classList.contains("editor")) { open.remove(); button.setAttribute("aria-expanded", "false"); return; }
      const r = await api("/assets/" + seg(a.id));
      if (!r.ok) { status.textContent = await problemText(r); return; }
      const full = await r.json();
      const row = el("tr", { class: "editor" });
      const cell = el("td", { colspan: "7" });
      const form = el("form", { class: "card", id: "edit-" + a.id });
      const nameId = "name-" + a.id, metaId = "meta-" + a.id;
      const p1 = el("p");
      p1.appendChild(el("label", { for: nameId }, "Name"));
      p1.appendChild(el("input", { id: nameId, name: "name", maxlength: "255", value: full.name || "" }));
      const p2 = el("p");
      p2.appendChild(el("label", { for: metaId }, "Metadata (a JSON object)"));
      const ta = el("textarea", { id: metaId, name: "metadata", rows: "4", class: "mono" });
      ta.value = JSON.stringify(full.metadata || {}, null, 2);
      p2.appendChild(ta);
      const msg = el("p", { role: "status" });
      const save = el("button", { type: "submit", class: "primary" }, "Save");
      form.append(p1, p2, save, msg);
      form.addEventListener("submit", async (e) => {
        e.preventDefault();
        let metadata;
        try { metadata = JSON.parse(ta.value); } catch (err) { msg.textContent = "The metadata is not valid JSON."; return; }
        const r = await api("/assets/" + seg(a.id), { method: "PATCH", headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ version: full.version, name: form.elements.name.value, metadata: metadata }) });
        if (r.ok) {
          const next = await r.json();
          full.version = next.version;
          tr.children[1].textContent = next.name || a.id;
          msg.textContent = "Saved.";
        } else {
          msg.textContent = await problemText(r);
        }
      });
      cell.appendChild(form);
      row.appendChild(cell);
      tr.after(row);
      button.setAttribute("aria-expanded", "true");
      document.getElementById(nameId).focus();
    }

    // The filter form is a plain GET form: a filtered list has its own address (bookmark, share, back).
    const params = new URLSearchParams(location.search);
    for (const name of ["kind", "media_type", "watermark_id"]) {
      if (params.has(name) && filters.elements[name]) filters.elements[name].value = params.get(name);
    }
    more.addEventListener("click", () => load(false));
    load(true).then(() => { assetTable.dataset.loaded = "1"; });
  }

  // --- mark a file
  const markForm = document.getElementById("mark-form");
  if (markForm) {
    const out = document.getElementById("mark-result");
    markForm.addEventListener("submit", async (e) => {
      e.preventDefault();
      const file = document.getElementById("mark-file").files[0];
      if (!file) return;
      const fd = new FormData();
      fd.append("data", document.getElementById("mark-data").value);
      fd.append("file", file, file.name);
      out.textContent = "";
      const status = say(el("p", { role: "status" }), "Marking ", file.name, "…");
      out.appendChild(status);
      try {
        let r = await api("/watermarks/" + kindOf(file), { method: "POST", body: fd });
        if (r.status === 202) r = await untilDone(r, status);
        if (!r.ok) { status.textContent = await problemText(r); status.className = "error"; return; }
        const blob = await r.blob();
        const url = URL.createObjectURL(blob);
        status.textContent = "Marked.";
        const dl = el("dl", { class: "card result", id: "mark-done" });
        for (const [k, h] of [["Watermark id", "X-Watermark-ID"], ["Watermarked asset", "X-Asset-ID"], ["Source asset", "X-Source-Asset-ID"]]) {
          dl.appendChild(el("dt", {}, k));
          dl.appendChild(el("dd", { class: "mono", "data-field": h }, r.headers.get(h) || "—"));
        }
        out.appendChild(dl);
        if (blob.type.startsWith("image/")) out.appendChild(el("img", { class: "preview", src: url, alt: "The watermarked " + file.name }));
        const name = (file.name.replace(/\.[^.]*$/, "") || "file") + "-watermarked" + (blob.type === "image/png" ? ".png" : (file.name.match(/\.[^.]*$/) || [""])[0]);
        const p = el("p");
        p.appendChild(el("a", { href: url, download: name, id: "mark-download" }, "Download the watermarked file"));
        const job = r.headers.get("X-Request-ID");
        if (job) {
          p.append(" · ");
          p.appendChild(el("a", { href: "/console/jobs?request_id=" + encodeURIComponent(job), id: "mark-job" }, "The job"));
        }
        out.appendChild(p);
      } catch (err) {
        status.textContent = "The request failed: " + err.message;
        status.className = "error";
      }
    });
  }

  // --- check a file (drag and drop)
  const drop = document.getElementById("drop");
  if (drop) {
    const input = document.getElementById("check-file");
    const out = document.getElementById("check-result");

    async function check(file) {
      out.textContent = "";
      const status = say(el("p", { role: "status" }), "Checking ", file.name, "…");
      out.appendChild(status);
      const fd = new FormData();
      fd.append("file", file, file.name);
      try {
        let r = await api("/watermarks/" + kindOf(file) + "/detect", { method: "POST", body: fd });
        if (r.status === 202) r = await untilDone(r, status);
        if (!r.ok) { status.textContent = await problemText(r); status.className = "error"; return; }
        show(file, await r.json(), status);
      } catch (err) {
        status.textContent = "The request failed: " + err.message;
        status.className = "error";
      }
    }

    function show(file, res, status) {
      say(status, "Checked ", file.name, ".");
      const card = el("div", { class: "card result", id: "check-done" });
      card.appendChild(el("p", { class: "verdict " + (res.watermarked ? "yes" : "no"), id: "verdict" },
        res.watermarked ? "Watermarked" : "No watermark found"));
      const dl = el("dl");
      dl.appendChild(el("dt", {}, "Watermark id"));
      dl.appendChild(el("dd", { class: "mono", id: "check-wm" }, res.watermark_id || "—"));
      dl.appendChild(el("dt", {}, "Confidence"));
      dl.appendChild(el("dd", { id: "check-confidence" }, typeof res.confidence === "number" ? (res.confidence * 100).toFixed(1) + " %" : "—"));
      card.appendChild(dl);
      if (Array.isArray(res.units) && res.units.length) {
        const wrap = el("div", { class: "scroll" });
        const t = el("table", { id: "units" });
        t.appendChild(el("caption", {}, "Per unit (page, frame group or image)"));
        const head = el("tr");
        for (const h of ["Unit", "Watermarked", "Confidence", "Watermark id"]) head.appendChild(el("th", { scope: "col" }, h));
        t.appendChild(el("thead")).appendChild(head);
        const tb = el("tbody");
        for (const u of res.units) {
          const tr = el("tr");
          tr.appendChild(el("td", {}, u.index));
          tr.appendChild(el("td", {}, u.watermarked ? "yes" : "no"));
          tr.appendChild(el("td", {}, typeof u.confidence === "number" ? (u.confidence * 100).toFixed(1) + " %" : "—"));
          tr.appendChild(el("td", { class: "mono" }, u.watermark_id || "—"));
          tb.appendChild(tr);
        }
        t.appendChild(tb);
        wrap.appendChild(t);
        card.appendChild(wrap);
      }
      out.appendChild(card);
    }

    drop.addEventListener("click", () => input.click());
    drop.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); input.click(); }
    });
    drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
    drop.addEventListener("dragleave", () => drop.classList.remove("over"));
    drop.addEventListener("drop", (e) => {
      e.preventDefault();
      drop.classList.remove("over");
      if (e.dataTransfer.files.length) check(e.dataTransfer.files[0]);
    });
    input.addEventListener("change", () => { if (input.files.length) check(input.files[0]); });
  }

  const mayManage = ["owner", "admin"].includes((document.getElementById("main") || { dataset: {} }).dataset.role);
  const shortTime = (t) => (t ? t.replace("T", " ").replace(/\..*|Z$/, "") + " UTC" : "—");

  // --- batches
  const batchTable = document.getElementById("batches");
  if (batchTable) {
    const body = batchTable.querySelector("tbody");
    const status = document.getElementById("batches-status");
    const more = document.getElementById("batches-more");
    let cursor = null;
    async function load() {
      status.textContent = "Loading…";
      const r = await api("/watermarks/batches?limit=20" + (cursor ? "&cursor=" + encodeURIComponent(cursor) : ""));
      if (!r.ok) { status.textContent = await problemText(r); return; }
      const page = await r.json();
      for (const b of page.data) {
        const tr = el("tr", { "data-batch-id": b.batch_id });
        tr.appendChild(el("td", { class: "mono" }, b.batch_id));
        tr.appendChild(el("td", {}, b.status));
        tr.appendChild(el("td", {}, b.item_count));
        tr.appendChild(el("td", {}, b.counts.succeeded));
        tr.appendChild(el("td", {}, b.counts.failed));
        tr.appendChild(el("td", {}, b.counts.in_progress));
        tr.appendChild(el("td", {}, b.credits.charged));
        tr.appendChild(el("td", {}, shortTime(b.created_at)));
        const act = el("td");
        if (b.archive && b.archive_status === "ready") {
          act.appendChild(el("a", { href: "/console/api" + b.archive_url, download: b.batch_id + ".zip" }, "Download archive"));
        }
        if (["draft", "starting", "processing"].includes(b.status)) {
          const cancel = el("button", { type: "button", class: "danger", "aria-label": "Cancel batch " + b.batch_id }, "Cancel");
          cancel.addEventListener("click", async () => {
            const r = await api("/watermarks/batches/" + seg(b.batch_id) + "/cancel", { method: "POST" });
            status.textContent = r.ok ? "Cancel requested for " + b.batch_id + "." : await problemText(r);
          });
          act.append(" ", cancel);
        }
        tr.appendChild(act);
        body.appendChild(tr);
      }
      cursor = page.next_cursor;
      more.hidden = !cursor;
      status.textContent = body.children.length === 0 ? "No batches yet." : body.children.length + " batches shown.";
    }
    more.addEventListener("click", load);
    load();
  }

  // --- webhooks
  const hookTable = document.getElementById("webhooks");
  if (hookTable) {
    const body = hookTable.querySelector("tbody");
    const status = document.getElementById("webhooks-status");
    const created = document.getElementById("webhook-created");
    const deliveries = document.getElementById("deliveries");
    async function showDeliveries(h) {
      deliveries.textContent = "";
      deliveries.appendChild(say(el("h2"), "Deliveries to ", h.url));
      const r = await api("/webhooks/" + seg(h.id) + "/deliveries");
      if (!r.ok) { deliveries.appendChild(el("p", { class: "error" }, await problemText(r))); return; }
      const list = await r.json();
      const items = Array.isArray(list) ? list : list.data || [];
      if (!items.length) { deliveries.appendChild(el("p", {}, "No deliveries yet.")); return; }
      const wrap = el("div", { class: "scroll" });
      const t = el("table");
      const head = el("tr");
      for (const c of ["Event", "Status", "Attempts", "Created", ""]) head.appendChild(el("th", { scope: "col" }, c));
      t.appendChild(el("thead")).appendChild(head);
      const tb = el("tbody");
      for (const d of items) {
        const tr = el("tr");
        tr.appendChild(el("td", { class: "mono" }, d.id));
        tr.appendChild(el("td", {}, d.status));
        tr.appendChild(el("td", {}, d.attempts));
        tr.appendChild(el("td", {}, shortTime(d.created_at)));
        const act = el("td");
        if (mayManage) {
          const again = el("button", { type: "button", "aria-label": "Redeliver " + d.id }, "Redeliver");
          again.addEventListener("click", async () => {
            const r = await api("/webhooks/" + seg(h.id) + "/deliveries/" + seg(d.id) + "/redeliver", { method: "POST" });
            status.textContent = r.ok ? "Redelivery of " + d.id + " queued." : await problemText(r);
          });
          act.appendChild(again);
        }
        tr.appendChild(act);
        tb.appendChild(tr);
      }
      t.appendChild(tb);
      wrap.appendChild(t);
      deliveries.appendChild(wrap);
    }
    async function load() {
      body.textContent = "";
      const r = await api("/webhooks");
      if (!r.ok) { status.textContent = await problemText(r); return; }
      const list = await r.json();
      const items = Array.isArray(list) ? list : list.data || [];
      for (const h of items) {
        const tr = el("tr", { "data-webhook-id": h.id });
        tr.appendChild(el("td", { class: "mono" }, h.url));
        tr.appendChild(el("td", { class: "mono" }, h.id));
        tr.appendChild(el("td", {}, h.enabled ? "yes" : "no"));
        tr.appendChild(el("td", {}, shortTime(h.created_at)));
        const act = el("td");
        const show = el("button", { type: "button", "aria-label": "Deliveries to " + h.url }, "Deliveries");
        show.addEventListener("click", () => showDeliveries(h));
        act.appendChild(show);
        if (mayManage) {
          const del = el("button", { type: "button", class: "danger", "aria-label": "Delete endpoint " + h.url }, "Delete");
          del.addEventListener("click", async () => {
            if (!confirm("Delete the endpoint " + iso(h.url) + "?")) return;
            const r = await api("/webhooks/" + seg(h.id), { method: "DELETE" });
            if (r.ok) load(); else status.textContent = await problemText(r);
          });
          act.append(" ", del);
        }
        tr.appendChild(act);
        body.appendChild(tr);
      }
      status.textContent = items.length ? items.length + " endpoints." : "No endpoints yet.";
    }
    const form = document.getElementById("webhook-form");
    if (form) {
      form.addEventListener("submit", async (e) => {
        e.preventDefault();
        const r = await api("/webhooks", { method: "POST", headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ url: form.elements.url.value, description: form.elements.description.value }) });
        created.textContent = "";
        if (!r.ok) { created.appendChild(el("p", { class: "error" }, await problemText(r))); return; }
        const h = await r.json();
        const card = el("div", { class: "card secret", id: "webhook-secret" });
        card.appendChild(el("p", {}, "Endpoint added. Copy its signing secret now: it is shown once."));
        const lbl = el("label", { for: "new-webhook-secret" }, "Signing secret");
        card.appendChild(lbl);
        card.appendChild(el("input", { id: "new-webhook-secret", class: "mono", readonly: "", value: h.signing_secret || "" }));
        created.appendChild(card);
        form.reset();
        load();
      });
    }
    load();
  }

  // --- storage destinations
  const storeTable = document.getElementById("storage");
  if (storeTable) {
    const body = storeTable.querySelector("tbody");
    const status = document.getElementById("storage-status");
    const deliveries = document.getElementById("storage-deliveries");
    async function showDeliveries(d) {
      deliveries.textContent = "";
      deliveries.appendChild(say(el("h2"), "Deliveries to ", d.name || d.id));
      const r = await api("/storage/destinations/" + seg(d.id) + "/deliveries?limit=50");
      if (!r.ok) { deliveries.appendChild(el("p", { class: "error" }, await problemText(r))); return; }
      const page = await r.json();
      if (!page.items.length) { deliveries.appendChild(el("p", {}, "No deliveries yet.")); return; }
      const wrap = el("div", { class: "scroll" });
      const t = el("table", { id: "storage-delivery-list" });
      const head = el("tr");
      for (const c of ["Object", "Status", "Attempts", "Asset", "Created", "Error"]) head.appendChild(el("th", { scope: "col" }, c));
      t.appendChild(el("thead")).appendChild(head);
      const tb = el("tbody");
      for (const x of page.items) {
        const tr = el("tr", { "data-delivery-id": x.id });
        tr.appendChild(el("td", { class: "mono" }, x.uri || x.key));
        tr.appendChild(el("td", {}, x.status));
        tr.appendChild(el("td", {}, x.attempts));
        tr.appendChild(el("td", { class: "mono" }, x.asset_id || "—"));
        tr.appendChild(el("td", { class: "when" }, shortTime(x.created_at)));
        tr.appendChild(el("td", {}, x.last_error || x.error_code || "—"));
        tb.appendChild(tr);
      }
      t.appendChild(tb);
      wrap.appendChild(t);
      deliveries.appendChild(wrap);
    }
    async function load() {
      body.textContent = "";
      const r = await api("/storage/destinations");
      if (!r.ok) { status.textContent = await problemText(r); return; }
      const list = await r.json();
      const items = Array.isArray(list) ? list : list.data || [];
      for (const d of items) {
        const tr = el("tr", { "data-destination-id": d.id });
        tr.appendChild(el("td", {}, d.name || d.id));
        tr.appendChild(el("td", { class: "mono" }, d.bucket + (d.prefix ? "/" + d.prefix : "")));
        tr.appendChild(el("td", { class: "mono" }, d.endpoint));
        tr.appendChild(el("td", {}, d.enabled ? "yes" : "no"));
        tr.appendChild(el("td", {}, d.verified_at ? shortTime(d.verified_at) : "not verified"));
        tr.appendChild(el("td", {}, d.last_error || "—"));
        const act = el("td");
        const show = el("button", { type: "button", "aria-label": "Deliveries to " + (d.name || d.id) }, "Deliveries");
        show.addEventListener("click", () => showDeliveries(d));
        act.appendChild(show);
        if (mayManage) {
          const verify = el("button", { type: "button", "aria-label": "Verify " + (d.name || d.id) }, "Verify");
          verify.addEventListener("click", async () => {
            say(status, "Verifying ", d.name || d.id, "…");
            const r = await api("/storage/destinations/" + seg(d.id) + "/verify", { method: "POST" });
            status.textContent = r.ok ? "Verified." : await problemText(r);
            load();
          });
          act.append(" ", verify);
        }
        tr.appendChild(act);
        body.appendChild(tr);
      }
      if (!status.textContent || status.textContent === "Loading…") status.textContent = items.length ? items.length + " destinations." : "No destinations yet.";
    }
    const form = document.getElementById("storage-form");
    if (form) {
      form.addEventListener("submit", async (e) => {
        e.preventDefault();
        const f = form.elements;
        const dest = { name: f.name.value, provider: "s3", endpoint: f.endpoint.value, region: f.region.value, bucket: f.bucket.value,
          prefix: f.prefix.value, secure: f.secure.checked, path_style: f.path_style.checked,
          access_key_id: f.access_key_id.value, secret_access_key: f.secret_access_key.value };
        const r = await api("/storage/destinations", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(dest) });
        if (!r.ok) { status.textContent = await problemText(r); return; }
        const d = await r.json();
        form.reset();
        say(status, "Added ", d.name || d.id, ". Verify it before jobs name it.");
        load();
      });
    }
    status.textContent = "Loading…";
    load();
  }

  // --- GPU
  const gpuCard = document.getElementById("gpu-card");
  if (gpuCard) {
    const msg = document.getElementById("gpu-message");
    function show(s) {
      document.getElementById("gpu-status").textContent = s.status;
      document.getElementById("gpu-warm").textContent = shortTime(s.warm_until);
      document.getElementById("gpu-ready").textContent = shortTime(s.ready_at);
    }
    async function load() {
      const r = await api("/accelerators/gpu");
      if (r.ok) show(await r.json()); else msg.textContent = await problemText(r);
    }
    document.getElementById("gpu-wake").addEventListener("click", async () => {
      const r = await api("/accelerators/gpu/wake", { method: "POST" });
      if (r.ok) { show(await r.json()); msg.textContent = "Wake requested."; } else msg.textContent = await problemText(r);
    });
    load();
  }

  // --- recent jobs: each row's status and result link from the API's own job route
  const recent = document.getElementById("recent-jobs");
  if (recent) {
    for (const tr of recent.querySelectorAll("tbody tr")) {
      const id = tr.dataset.requestId;
      (async () => {
        const r = await api("/watermarks/jobs/" + seg(id));
        const st = tr.querySelector(".job-status");
        if (!r.ok) { st.textContent = r.status === 404 ? "no longer kept" : "unavailable"; tr.querySelector(".job-op").textContent = "—"; return; }
        const job = await r.json();
        tr.querySelector(".job-op").textContent = job.operation;
        st.textContent = job.status + (job.error_code ? " (" + job.error_code + ")" : "");
        st.className = "job-status status-" + job.status;
        if (job.status === "succeeded") {
          tr.querySelector(".job-result").appendChild(el("a", { href: "/console/api/watermarks/jobs/" + seg(id) + "/result",
            "aria-label": "Result of " + id }, job.operation === "detect" ? "Detection result" : "Download"));
        }
      })();
    }
  }

  // --- job lookup
  const jobForm = document.getElementById("job-form");
  if (jobForm) {
    const out = document.getElementById("job-result");
    const id = new URLSearchParams(location.search).get("request_id");
    if (id) {
      jobForm.elements.request_id.value = id;
      if (!idPattern.test(id)) out.appendChild(el("p", { class: "error" }, "That is not a request id (req_ followed by letters and digits)."));
      else (async () => {
        const r = await api("/watermarks/jobs/" + seg(id));
        if (!r.ok) { out.appendChild(el("p", { class: "error" }, await problemText(r))); return; }
        const job = await r.json();
        const card = el("div", { class: "card result", id: "job-done" });
        const dl = el("dl");
        for (const [k, v] of [["Status", job.status], ["Operation", job.operation], ["Format", job.format], ["Credits", job.credits],
          ["Attempts", job.attempts], ["Accelerator", job.accelerator], ["Watermarked asset", job.asset_id], ["Source asset", job.source_asset_id],
          ["Result kept until", job.result_expires_at ? shortTime(job.result_expires_at) : null], ["Error", job.error_code]]) {
          if (v === undefined || v === null || v === "") continue;
          dl.appendChild(el("dt", {}, k));
          dl.appendChild(el("dd", { class: k.endsWith("asset") ? "mono" : "" }, v));
        }
        card.appendChild(dl);
        if (job.status === "succeeded") {
          const p = el("p");
          p.appendChild(el("a", { href: "/console/api/watermarks/jobs/" + seg(id) + "/result", id: "job-result-link" },
            job.operation === "detect" ? "Open the detection result (JSON)" : "Download the result"));
          card.appendChild(p);
        }
        out.appendChild(card);
      })();
    }
  }
})();
