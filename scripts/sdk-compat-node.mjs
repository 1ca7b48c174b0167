// Runs the contract of Etchv's Node SDK (@etchv/sdk, MIT, its own repository) against a Filigrane node:
// every method of the SDK that this node offers, as a new user would call it with nothing but a base URL and
// a key. Driven by scripts/sdk-compat, which starts a node when none is named. The SDK is imported from the
// directory the user names; none of its code is part of this project.
//
//   node scripts/sdk-compat-node.mjs SDK_DIR BASE_URL API_KEY IMAGE [PDF] [VIDEO]
//
// Prints one line per check ("ok NAME" or "FAIL NAME: why"), "# ..." notes (what type and name a document or video
// result came back with) and ends with "N passed, N failed".
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const [sdkDir, baseUrl, apiKey, imagePath, pdfPath, videoPath] = process.argv.slice(2);
if (!sdkDir || !baseUrl || !apiKey || !imagePath) {
  console.error('usage: node sdk-compat-node.mjs SDK_DIR BASE_URL API_KEY IMAGE [PDF] [VIDEO]');
  process.exit(2);
}
const pkg = JSON.parse(await readFile(join(sdkDir, 'package.json'), 'utf8'));
const entry = pkg.exports?.['.']?.import ?? pkg.main ?? 'index.js';
const { Etchv, EtchvError } = await import(pathToFileURL(resolve(sdkDir, entry)).href);
console.log(`# ${pkg.name} ${pkg.version} against ${baseUrl}`);

const hex64 = /^[0-9a-f]{64}$/;
const assetId = /^ast_[0-9a-f]{64}$/;
const reqId = /^req_[0-9a-f]{64}$/;
let passed = 0, failed = 0;
const state = {};

function must(cond, what) { if (!cond) throw new Error(what); }
// resultType is the type and extension a document or video result must be announced with, read from its bytes:
// a QuickTime file (major brand "qt  ") is video/quicktime named .mov, another ISO file video/mp4, else a PDF.
function resultType(bytes) {
  const text = new TextDecoder('latin1').decode(bytes.subarray(4, 12));
  if (text.startsWith('ftyp')) return text.endsWith('qt  ') ? { type: 'video/quicktime', ext: 'mov' } : { type: 'video/mp4', ext: 'mp4' };
  return { type: 'application/pdf', ext: 'pdf' };
}
async function check(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`ok ${name}`);
  } catch (e) {
    failed++;
    const detail = e instanceof EtchvError ? ` (HTTP ${e.statusCode} ${JSON.stringify(e.detail)})` : '';
    console.log(`FAIL ${name}: ${e.message}${detail}`);
  }
}
async function expectError(status, fn) {
  try { await fn(); } catch (e) {
    must(e instanceof EtchvError, `not an EtchvError: ${e}`);
    must(e.statusCode === status, `HTTP ${e.statusCode}, want ${status}`);
    return e;
  }
  throw new Error(`succeeded, want HTTP ${status}`);
}
const sleep = ms => new Promise(r => setTimeout(r, ms));
async function untilDone(client, id, opts) {
  for (let i = 0; i < 120; i++) {
    const job = await client.getJob(id, opts);
    if (job.status === 'succeeded' || job.status === 'failed') return job;
    await sleep(500);
  }
  throw new Error(`job ${id} still running`);
}

const client = new Etchv({ apiKey, baseUrl, timeout: 120000 });
const image = new Uint8Array(await readFile(imagePath));

await check('embedImage', async () => {
  const r = await client.embedImage(image, { sdk: 'node', check: 'embedImage' });
  must(hex64.test(r.watermarkId), `watermarkId ${r.watermarkId}`);
  must(reqId.test(r.requestId), `requestId ${r.requestId}`);
  must(assetId.test(r.assetId) && assetId.test(r.sourceAssetId), `asset ids ${r.assetId} ${r.sourceAssetId}`);
  must(r.contentType === 'image/png' && /\.png$/.test(r.filename), `${r.contentType} ${r.filename}`);
  state.embed = r;
});
await check('detectImage (marked)', async () => {
  must(state.embed, 'no embed');
  const d = await client.detectImage(state.embed.image, { filename: 'marked.png' });
  must(d.watermarked && d.watermarkId === state.embed.watermarkId, `detected ${JSON.stringify(d)}`);
  must(d.units.length >= 1 && d.units[0].index === 0, 'units');
});
await check('detectImage (original)', async () => {
  const d = await client.detectImage(image);
  must(d.watermarked === false && d.watermarkId === null, `detected ${JSON.stringify(d)}`);
});
await check('submitEmbed + getJob + getEmbedResult', async () => {
  const rc = await client.submitEmbed('images', image, { sdk: 'node', check: 'async' });
  must(reqId.test(rc.request_id) && rc.status_url && rc.result_url, `receipt ${JSON.stringify(rc)}`);
  const job = await untilDone(client, rc.request_id);
  must(job.status === 'succeeded' && assetId.test(job.asset_id), `job ${JSON.stringify(job)}`);
  const r = await client.getEmbedResult(rc.request_id);
  must(r.requestId === rc.request_id && hex64.test(r.watermarkId), `result ${r.requestId} ${r.watermarkId}`);
  must(r.assetId === job.asset_id, `result asset ${r.assetId}, job ${job.asset_id}`);
  state.async = r;
});
await check('submitDetection + getJob(detect)', async () => {
  must(state.embed, 'no embed');
  const rc = await client.submitDetection('images', state.embed.image);
  must(reqId.test(rc.request_id), `receipt ${JSON.stringify(rc)}`);
  const job = await untilDone(client, rc.request_id, { detect: true });
  must(job.status === 'succeeded' && job.operation === 'detect', `job ${JSON.stringify(job)}`);
});
await check('embedImage replays one Idempotency-Key', async () => {
  const a = await client.embedImage(image, { sdk: 'node', check: 'idem' }, { idempotencyKey: 'sdk-compat-' + Date.now() });
  const key = 'sdk-compat-replay-' + Date.now();
  const b = await client.embedImage(image, { sdk: 'node', check: 'idem' }, { idempotencyKey: key });
  const c = await client.embedImage(image, { sdk: 'node', check: 'idem' }, { idempotencyKey: key });
  must(b.requestId === c.requestId && b.watermarkId === c.watermarkId && a.watermarkId === b.watermarkId, 'replay differs');
});
await check('listAssets (two pages)', async () => {
  const p1 = await client.listAssets({ limit: 2 });
  must(Array.isArray(p1.items) && p1.items.length === 2 && typeof p1.next_cursor === 'string', `page 1 ${JSON.stringify(p1).slice(0, 200)}`);
  must(p1.items.every(a => assetId.test(a.id)), 'ids');
  const p2 = await client.listAssets({ limit: 2, cursor: p1.next_cursor });
  must(p2.items.length >= 1 && p2.items[0].id !== p1.items[0].id, 'page 2');
  const wm = await client.listAssets({ watermarkId: state.embed?.watermarkId, kind: 'watermarked', mediaType: 'image' });
  must(wm.items.some(a => a.id === state.embed?.assetId), 'watermark filter');
});
await check('getAsset', async () => {
  const a = await client.getAsset(state.embed.assetId);
  must(a.id === state.embed.assetId && a.parent_asset_id === state.embed.sourceAssetId && a.version === 1, JSON.stringify(a));
  state.asset = a;
});
await check('updateAsset', async () => {
  const a = await client.updateAsset(state.embed.assetId, { version: state.asset.version, name: 'renamed.png', metadata: { sdk: 'node' } });
  must(a.name === 'renamed.png' && a.version === state.asset.version + 1 && a.metadata?.sdk === 'node', JSON.stringify(a));
  const e = await expectError(409, () => client.updateAsset(state.embed.assetId, { version: state.asset.version, name: 'again' }));
  must(e.detail?.code === 'asset_version_conflict', `code ${JSON.stringify(e.detail)}`);
});
await check('downloadAsset', async () => {
  const bytes = await client.downloadAsset(state.embed.assetId);
  must(Buffer.from(bytes).equals(Buffer.from(state.embed.image)), `downloaded ${bytes.length} bytes, embed gave ${state.embed.image.length}`);
});
await check('deleteAsset', async () => {
  await client.deleteAsset(state.embed.assetId);
  await client.deleteAsset(state.embed.assetId); // repeating is safe
  const e = await expectError(404, () => client.getAsset(state.embed.assetId));
  must(e.detail?.code === 'asset_not_found', `code ${JSON.stringify(e.detail)}`);
});
await check('deleteAssets (bulk)', async () => {
  must(state.async, 'no async embed');
  await client.deleteAssets([state.async.assetId, state.async.sourceAssetId]);
  await expectError(404, () => client.getAsset(state.async.assetId));
});
await check('errors: wrong key is 401 with a code', async () => {
  const bad = new Etchv({ apiKey: 'fgk_wrong', baseUrl });
  const e = await expectError(401, () => bad.getAsset('ast_' + '0'.repeat(64)));
  must(e.detail?.code === 'unauthorized', `detail ${JSON.stringify(e.detail)}`);
});
await check('errors: not an image is 422, not retried', async () => {
  const t0 = Date.now();
  await expectError(422, () => client.detectImage(new TextEncoder().encode('not an image at all')));
  must(Date.now() - t0 < 10000, 'took as long as a retry loop');
});
for (const [name, path, embed, detect] of [['Document', pdfPath, 'embedDocument', 'detectDocument'], ['Video', videoPath, 'embedVideo', 'detectVideo']]) {
  if (!path) { console.log(`# skipped ${embed}/${detect}: no ${name.toLowerCase()} file given`); continue; }
  const file = new Uint8Array(await readFile(path));
  await check(`${embed} + ${detect}`, async () => {
    const r = await client[embed](file, { sdk: 'node', check: embed });
    must(hex64.test(r.watermarkId) && assetId.test(r.assetId), `embed ${r.watermarkId} ${r.assetId}`);
    const want = resultType(r.image);
    must(r.contentType === want.type && r.filename.endsWith('.' + want.ext), `result typed ${r.contentType} named ${r.filename}; its bytes are ${want.type}`);
    console.log(`# ${embed} returned ${r.contentType} named ${r.filename}`);
    const d = await client[detect](r.image);
    must(d.watermarked && d.watermarkId === r.watermarkId, `detected ${JSON.stringify(d)}`);
  });
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
