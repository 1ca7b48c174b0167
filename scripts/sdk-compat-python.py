"""Runs the contract of Etchv's Python SDK (etchv-sdk, MIT, its own repository) against a Filigrane node.

Every public method of the SDK that this node offers, called as a new user would with nothing but a base URL
and a key. Driven by scripts/sdk-compat, which starts a node (with TLS, so that signed upload URLs are https)
when none is named. The SDK is imported from the checkout the user names; none of its code is part of this
project. Needs httpx (Debian: python3-httpx).

    python3 scripts/sdk-compat-python.py SDK_DIR BASE_URL API_KEY IMAGE [PDF] [VIDEO]

Prints one line per check ("ok NAME" or "FAIL NAME: why"), "# ..." notes (what type and name a document or video
result came back with) and ends with "N passed, N failed".
"""
import io
import os
import re
import sys
import time
import zipfile

if len(sys.argv) < 5:
    print("usage: python3 sdk-compat-python.py SDK_DIR BASE_URL API_KEY IMAGE [PDF] [VIDEO]", file=sys.stderr)
    sys.exit(2)
sdk_dir, base_url, api_key, image_path = sys.argv[1:5]
pdf_path = sys.argv[5] if len(sys.argv) > 5 else ""
video_path = sys.argv[6] if len(sys.argv) > 6 else ""
# A checkout keeps the package under src/ (its pyproject's layout); an unpacked package has it at the top.
sys.path.insert(0, os.path.join(sdk_dir, "src") if os.path.isdir(os.path.join(sdk_dir, "src", "etchv")) else sdk_dir)
import etchv  # noqa: E402

print(f"# etchv-sdk {etchv.__version__} (Python {sys.version.split()[0]}) against {base_url}")

HEX64 = re.compile(r"[0-9a-f]{64}")
ASSET = re.compile(r"ast_[0-9a-f]{64}")
REQ = re.compile(r"req_[0-9a-f]{64}")
passed = failed = 0
state = {}


def must(cond, what):
    if not cond:
        raise AssertionError(what)


def result_type(data):
    """The type and extension a document or video result must be announced with, read from its bytes: a QuickTime
    file (major brand "qt  ") is video/quicktime named .mov, another ISO file video/mp4, anything else a PDF."""
    if data[4:8] == b"ftyp":
        return ("video/quicktime", "mov") if data[8:12] == b"qt  " else ("video/mp4", "mp4")
    return "application/pdf", "pdf"


def check(name):
    def run(fn):
        global passed, failed
        try:
            fn()
            passed += 1
            print(f"ok {name}", flush=True)
        except Exception as e:  # every failure is a result to print, not a crash
            failed += 1
            extra = f" (HTTP {e.status_code} code={e.code} detail={e.detail!r})" if isinstance(e, etchv.EtchvError) else ""
            print(f"FAIL {name}: {type(e).__name__}: {e}{extra}", flush=True)
        return fn
    return run


def expect_error(status, cls, fn):
    try:
        fn()
    except etchv.EtchvError as e:
        must(e.status_code == status, f"HTTP {e.status_code}, want {status}")
        must(isinstance(e, cls), f"{type(e).__name__}, want {cls.__name__}")
        return e
    raise AssertionError(f"succeeded, want HTTP {status}")


def until_done(request_id, detect=False):
    for _ in range(240):
        job = client.get_job(request_id, detect=detect)
        if job["status"] in ("succeeded", "failed"):
            return job
        time.sleep(0.5)
    raise AssertionError(f"job {request_id} still running")


client = etchv.Etchv(api_key, base_url=base_url, timeout=120)
image = open(image_path, "rb").read()


@check("check_api_key")
def _():
    info = client.check_api_key()
    must(info.get("organization_id") and info.get("key_id") and isinstance(info.get("scopes"), list), repr(info))


@check("embed_image")
def _():
    r = client.embed_image(image, {"sdk": "python", "check": "embed_image"}, filename="photo.png")
    must(HEX64.fullmatch(r.watermark_id), f"watermark_id {r.watermark_id}")
    must(r.request_id and REQ.fullmatch(r.request_id), f"request_id {r.request_id}")
    must(ASSET.fullmatch(r.asset_id or "") and ASSET.fullmatch(r.source_asset_id or ""), f"asset ids {r.asset_id} {r.source_asset_id}")
    must(r.content_type == "image/png" and r.filename.endswith(".png"), f"{r.content_type} {r.filename}")
    must(r.accelerator == "cpu", f"accelerator {r.accelerator}")
    state["embed"] = r


@check("detect_image (marked)")
def _():
    d = client.detect_image(state["embed"].image, filename="marked.png")
    must(d.watermarked and d.watermark_id == state["embed"].watermark_id, repr(d))
    must(d.units and d.units[0].index == 0, "units")


@check("detect_image (original)")
def _():
    d = client.detect_image(image)
    must(d.watermarked is False and d.watermark_id is None, repr(d))


@check("submit_embed + get_job + get_embed_result")
def _():
    rc = client.submit_embed("images", image, {"sdk": "python", "check": "async"})
    must(REQ.fullmatch(rc.get("request_id", "")) and rc.get("status_url") and rc.get("result_url"), repr(rc))
    job = until_done(rc["request_id"])
    must(job["status"] == "succeeded" and ASSET.fullmatch(job.get("asset_id") or ""), repr(job))
    r = client.get_embed_result(rc["request_id"])
    must(r.request_id == rc["request_id"] and HEX64.fullmatch(r.watermark_id), f"result {r.request_id} {r.watermark_id}")
    must(r.asset_id == job["asset_id"], f"result asset {r.asset_id}, job {job['asset_id']}")
    state["async"] = r


@check("submit_detection + get_job(detect) + get_detection_result")
def _():
    rc = client.submit_detection("images", state["embed"].image)
    must(REQ.fullmatch(rc.get("request_id", "")), repr(rc))
    job = until_done(rc["request_id"], detect=True)
    must(job["status"] == "succeeded" and job.get("operation") == "detect", repr(job))
    d = client.get_detection_result(rc["request_id"])
    must(d.watermarked and d.watermark_id == state["embed"].watermark_id, repr(d))


@check("embed_image replays one idempotency_key")
def _():
    key = f"sdk-compat-py-{time.time_ns()}"
    b = client.embed_image(image, {"sdk": "python", "check": "idem"}, idempotency_key=key)
    c = client.embed_image(image, {"sdk": "python", "check": "idem"}, idempotency_key=key)
    must(b.request_id == c.request_id and b.watermark_id == c.watermark_id and b.image == c.image, "replay differs")
    e = expect_error(409, etchv.ConflictError, lambda: client.embed_image(image, {"sdk": "python", "check": "other"}, idempotency_key=key))
    must(e.code == "idempotency_conflict", f"code {e.code}")


@check("upload_file + embed/detect with upload_id (url-encoded form)")
def _():
    session = client.upload_file("image", image, filename="big.png")
    must(session.get("upload_id") and session.get("status") == "received", repr(session))
    # Above large_file_threshold the SDK sends the file through an upload session and the embed as
    # application/x-www-form-urlencoded data=…&upload_id=…; a small threshold takes that path here.
    small = etchv.Etchv(api_key, base_url=base_url, timeout=120, large_file_threshold=1024)
    r = small.embed_image(image, {"sdk": "python", "check": "upload"}, filename="big.png")
    must(HEX64.fullmatch(r.watermark_id) and r.image.startswith(b"\x89PNG"), repr(r.watermark_id))
    d = small.detect_image(r.image)
    must(d.watermarked and d.watermark_id == r.watermark_id, repr(d))
    small.close()


@check("list_assets (two pages)")
def _():
    p1 = client.list_assets(limit=2)
    must(isinstance(p1.get("items"), list) and len(p1["items"]) == 2 and isinstance(p1.get("next_cursor"), str), repr(p1)[:200])
    p2 = client.list_assets(limit=2, cursor=p1["next_cursor"])
    must(not {a["id"] for a in p1["items"]} & {a["id"] for a in p2["items"]}, "pages overlap")
    for a in p1["items"] + p2["items"]:
        must(ASSET.fullmatch(a["id"]), f"id {a['id']}")
    kinds = client.list_assets(kind="watermarked", media_type="image", watermark_id=state["embed"].watermark_id)
    must(any(a["id"] == state["embed"].asset_id for a in kinds["items"]), "filter by watermark_id misses the embed")


@check("get_asset")
def _():
    a = client.get_asset(state["embed"].asset_id)
    must(a["id"] == state["embed"].asset_id and a["kind"] == "watermarked" and isinstance(a["version"], int), repr(a)[:200])
    b = client.get_asset(state["embed"].asset_id, include_metadata=False)
    must(b["id"] == a["id"], repr(b)[:200])
    state["asset"] = a


@check("update_asset (and 409 on a stale version)")
def _():
    a = client.update_asset(state["embed"].asset_id, version=state["asset"]["version"], name="renamed.png", metadata={"sdk": "python"})
    must(a["name"] == "renamed.png" and a["version"] == state["asset"]["version"] + 1, repr(a)[:200])
    e = expect_error(409, etchv.ConflictError, lambda: client.update_asset(state["embed"].asset_id, version=state["asset"]["version"], name="again"))
    must(e.code == "asset_version_conflict", f"code {e.code}")


@check("download_asset")
def _():
    must(client.download_asset(state["embed"].asset_id) == state["embed"].image, "bytes differ from the embed result")


@check("delete_asset + delete_assets")
def _():
    client.delete_asset(state["embed"].asset_id)
    client.delete_asset(state["embed"].asset_id)  # repeating is safe
    e = expect_error(404, etchv.NotFoundError, lambda: client.get_asset(state["embed"].asset_id))
    must(e.code == "asset_not_found", f"code {e.code}")
    client.delete_assets([state["async"].asset_id, state["async"].source_asset_id])
    expect_error(404, etchv.NotFoundError, lambda: client.get_asset(state["async"].asset_id))


@check("submit_batch + wait_for_batch + iter_batch_results")
def _():
    items = [{"filename": f"p{i}.png", "file": image, "data": {"sdk": "python", "item": i}} for i in range(2)]
    key = f"sdk-compat-batch-{time.time_ns()}"
    batch = client.submit_batch(items, idempotency_key=key)
    must(re.fullmatch(r"bat_[0-9a-f]{32}", batch.batch_id) and batch.status != "draft", repr(batch)[:300])
    again = client.submit_batch(items, idempotency_key=key)  # a replay of a started batch
    must(again.batch_id == batch.batch_id, "replay made another batch")
    results = list(client.iter_batch_results(batch.batch_id, timeout=240))
    must(len(results) == 2 and all(r.ok and HEX64.fullmatch(r.result.watermark_id) for r in results),
         repr([(r.status, r.error_code) for r in results]))
    state["batch"] = batch.batch_id


@check("submit_batch_zip + download_batch_archive")
def _():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("a.png", image)
        z.writestr("dir/b.png", image)
    batch = client.submit_batch_zip(buf.getvalue(), [{"filename": "a.png", "data": {"zip": 1}}, {"filename": "dir/b.png", "data": {"zip": 2}}], archive=True)
    must(batch.archive and batch.item_count == 2, repr(batch)[:300])
    archive = client.download_batch_archive(batch.batch_id, timeout=240)
    names = zipfile.ZipFile(io.BytesIO(archive)).namelist()
    must("manifest.json" in names and len(names) == 3, repr(names))
    e = expect_error(409, etchv.ConflictError, lambda: client.download_batch_archive(state["batch"], timeout=30))
    must(e.code == "archive_not_requested", f"code {e.code}")


@check("list_batches (before= cursor) + get_batch")
def _():
    p1 = client.list_batches(limit=1)
    must(len(p1.data) == 1 and p1.next_cursor and p1.data[0].items == (), repr(p1)[:300])
    p2 = client.list_batches(limit=1, before=p1.next_cursor)
    must(len(p2.data) == 1 and p2.data[0].batch_id != p1.data[0].batch_id, repr(p2)[:300])
    b = client.get_batch(state["batch"])
    must(b.done and len(b.items) == 2, repr(b)[:300])


@check("cancel_batch (draft)")
def _():
    # A draft: created by plain HTTP, since submit_batch always uploads and starts.
    import httpx
    r = httpx.post(base_url.rstrip("/") + "/watermarks/batches",
                   json={"archive": False, "items": [{"filename": "x.png", "size": len(image), "data": {"a": 1}}]},
                   headers={"X-API-Key": api_key, "Idempotency-Key": f"sdk-compat-draft-{time.time_ns()}"})
    must(r.status_code == 201, f"create draft: HTTP {r.status_code}")
    b = client.cancel_batch(r.json()["batch_id"])
    must(b.status == "cancelled", repr(b)[:300])


@check("webhooks: create, list, update, deliveries, redeliver, delete")
def _():
    w = client.create_webhook("https://hooks.example.test/sdk-compat")
    must(re.fullmatch(r"wh_[0-9a-f]{32}", w["id"]) and w["signing_secret"].startswith("whsec_"), repr(w))
    must(any(x["id"] == w["id"] for x in client.list_webhooks()), "not listed")
    u = client.update_webhook(w["id"], enabled=False)
    must(u["enabled"] is False, repr(u))
    page = client.list_webhook_deliveries(w["id"])
    must(isinstance(page.get("data"), list) and "next_cursor" in page, repr(page))
    # An event for it: the host does not resolve, so the delivery is logged with a failed attempt.
    client.update_webhook(w["id"], enabled=True)
    rc = client.submit_embed("images", image, {"sdk": "python", "check": "webhook"}, webhook_id=w["id"])
    until_done(rc["request_id"])
    for _ in range(120):
        page = client.list_webhook_deliveries(w["id"])
        if page["data"] and page["data"][0]["attempts"] >= 1:
            break
        time.sleep(0.5)
    must(page["data"] and re.fullmatch(r"evt_[0-9a-f]{64}", page["data"][0]["id"]), repr(page)[:300])
    event = page["data"][0]
    must(event["request_id"] == rc["request_id"] and event["payload"]["type"] == "watermark.embed.succeeded", repr(event)[:300])
    again = client.redeliver_webhook(w["id"], event["id"])
    must(again["id"] == event["id"], repr(again)[:300])
    client.delete_webhook(w["id"])
    expect_error(404, etchv.NotFoundError, lambda: client.update_webhook(w["id"], enabled=True))


@check("storage: list_storage_destinations")
def _():
    must(isinstance(client.list_storage_destinations(), list), "not a list")


# With an S3-compatible server named by scripts/sdk-compat (SDKCOMPAT_S3_* in the environment): every
# storage method, the keys passed the way the SDK passes provider fields (``credentials`` as JSON text).
s3 = {k: os.environ.get("SDKCOMPAT_S3_" + k.upper(), "") for k in ("endpoint", "bucket", "access_key", "secret_key")}
if all(s3.values()):
    import json

    def until_stored(delivery_id):
        for _ in range(240):
            try:
                d = client.get_storage_delivery(delivery_id)
                if d["status"] in ("stored", "failed"):
                    return d
            except etchv.NotFoundError:
                pass  # 404 until the first attempt ran (docs/storage.md)
            time.sleep(0.5)
        raise AssertionError(f"delivery {delivery_id} not stored")

    @check("storage: create, verify, embed to it, deliveries, download, move, retry, update, delete")
    def _():
        d = client.create_storage_destination(
            name="sdk-compat", provider="s3", bucket=s3["bucket"], endpoint=s3["endpoint"], secure=False,
            path_style=True, region="us-east-1", prefix="sdk",
            credentials=json.dumps({"access_key_id": s3["access_key"], "secret_access_key": s3["secret_key"]}))
        must(re.fullmatch(r"dst_[0-9a-f]{32}", d["id"]) and d.get("verified_at") is None, repr(d))
        must(s3["secret_key"] not in json.dumps(d), "the secret came back")
        v = client.verify_storage_destination(d["id"])
        must(v.get("verified_at"), repr(v))
        r = client.embed_image(image, {"sdk": "python", "check": "storage"}, storage_destination_id=d["id"], storage_key="out/photo.png")
        must(r.storage_delivery_id and re.fullmatch(r"std_[0-9a-f]{64}", r.storage_delivery_id), f"storage_delivery_id {r.storage_delivery_id}")
        stored = until_stored(r.storage_delivery_id)
        must(stored["status"] == "stored" and stored["key"].endswith("out/photo.png"), repr(stored))
        page = client.list_storage_deliveries(d["id"])
        must(isinstance(page.get("items"), list) and any(x["id"] == r.storage_delivery_id for x in page["items"]), repr(page)[:300])
        must(client.download_storage_delivery(r.storage_delivery_id) == r.image, "stored bytes differ from the embed result")
        other = client.embed_image(image, {"sdk": "python", "check": "move"})
        moved = client.create_storage_delivery(d["id"], other.asset_id, key="moved/photo.png")
        must(re.fullmatch(r"std_[0-9a-f]{64}", moved["id"]), repr(moved))
        must(until_stored(moved["id"])["status"] == "stored", "move not stored")
        again = client.retry_storage_delivery(moved["id"])
        must(again["id"] == moved["id"] and again["status"] == "stored", repr(again))
        u = client.update_storage_destination(d["id"], enabled=False)
        must(u["enabled"] is False, repr(u))
        client.delete_storage_destination(d["id"])
        expect_error(404, etchv.NotFoundError, lambda: client.verify_storage_destination(d["id"]))
else:
    print("# skipped the storage methods: no S3 server (scripts/sdk-compat starts versitygw when installed)")


@check("errors: wrong key is AuthenticationError with a code")
def _():
    bad = etchv.Etchv("fgk_wrong", base_url=base_url)
    e = expect_error(401, etchv.AuthenticationError, bad.check_api_key)
    must(e.code == "unauthorized" and e.message, f"code {e.code} message {e.message}")


@check("errors: not an image is 422, not retried")
def _():
    t0 = time.monotonic()
    e = expect_error(422, etchv.EtchvError, lambda: client.detect_image(b"not an image at all"))
    must(e.code and time.monotonic() - t0 < 10, f"code {e.code}")


for label, path, embed, detect in (("document", pdf_path, "embed_document", "detect_document"),
                                   ("video", video_path, "embed_video", "detect_video")):
    if not path:
        print(f"# skipped {embed}/{detect}: no {label} file given")
        continue
    data = open(path, "rb").read()

    @check(f"{embed} + {detect}")
    def _():
        r = getattr(client, embed)(data, {"sdk": "python", "check": embed}, filename=os.path.basename(path))
        must(HEX64.fullmatch(r.watermark_id) and ASSET.fullmatch(r.asset_id or ""), f"embed {r.watermark_id} {r.asset_id}")
        want, ext = result_type(r.image)
        must(r.content_type == want and r.filename.endswith("." + ext),
             f"result typed {r.content_type} named {r.filename}; its bytes are {want}")
        print(f"# {embed} returned {r.content_type} named {r.filename}")
        d = getattr(client, detect)(r.image)
        must(d.watermarked and d.watermark_id == r.watermark_id, repr(d))

    @check(f"submit_embed({label}s) with the default filename \"file\" + get_embed_result")
    def _():
        # submit_* name the part "file", without an extension: the server tells the format from the bytes.
        rc = client.submit_embed(label + "s", data, {"sdk": "python", "check": "submit " + label})
        r = client.get_embed_result(rc["request_id"])
        must(HEX64.fullmatch(r.watermark_id) and r.request_id == rc["request_id"], f"{r.watermark_id} {r.request_id}")

    @check(f"submit_batch_zip({label}) + iter_batch_results + download_batch_archive")
    def _():
        # A batch result and its archive member are announced and named as the result's bytes say (a MOV: .mov).
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr(os.path.basename(path), data)
        batch = client.submit_batch_zip(buf.getvalue(), [{"filename": os.path.basename(path), "data": {"zip": label}}],
                                        archive=True)
        [item] = list(client.iter_batch_results(batch.batch_id, timeout=240))
        must(item.ok, repr(item))
        want, ext = result_type(item.result.image)
        must(item.result.content_type == want and item.result.filename.endswith("." + ext),
             f"result typed {item.result.content_type} named {item.result.filename}; its bytes are {want}")
        names = zipfile.ZipFile(io.BytesIO(client.download_batch_archive(batch.batch_id, timeout=240))).namelist()
        must(len(names) == 2 and "manifest.json" in names and any(n.endswith("." + ext) for n in names), repr(names))

    @check(f"{embed} through an upload session (url-encoded upload_id)")
    def _():
        small = etchv.Etchv(api_key, base_url=base_url, timeout=120, large_file_threshold=1024)
        r = getattr(small, embed)(data, {"sdk": "python", "check": "upload " + label})
        d = getattr(small, detect)(r.image)
        must(d.watermarked and d.watermark_id == r.watermark_id, repr(d))
        small.close()

client.close()
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
