#!/usr/bin/python3
"""A Hugging Face Llama folder (config.json + model.safetensors, as `origami export` writes it)
as a GGUF file for llama.cpp, written with llama.cpp's own gguf-py (PYTHONPATH=LLAMA_CPP/gguf-py).

Why not llama.cpp's convert_hf_to_gguf.py: it needs transformers and sentencepiece for the
vocabulary, which Debian 12 does not package. This script needs numpy only, and gives the file a
placeholder SentencePiece vocabulary of the model's size (placeholder_vocabulary): llama.cpp
runs on token ids here (llama-bench, llama_greedy.cpp), so speed and logits are the model's;
text in and out is the model's only for a byte-tokenizer model (use llama.cpp's converter with
the model's own tokenizer otherwise).

What it shares with llama.cpp's converter is the one transformation that changes numbers'
places: q_proj and k_proj rows are permuted from Hugging Face's rotate-half rotary layout (pairs
i and i + d/2 of each head) into GGML's adjacent pairs (2i, 2i + 1).

  hf_to_gguf.py HF_DIR OUT.gguf [--dtype f32|bf16|f16]
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

import gguf  # llama.cpp's gguf-py


def read_safetensors(path):
    """name -> float32 array (F32, BF16 and F16 files)."""
    with open(path, "rb") as f:
        data = f.read()
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_len])
    base = 8 + header_len
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = data[base + begin:base + end]
        dtype = info["dtype"]
        if dtype == "F32":
            a = np.frombuffer(raw, dtype="<f4")
        elif dtype == "F16":
            a = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        elif dtype == "BF16":
            a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            sys.exit(f"{path}: tensor {name} has dtype {dtype}; F32, F16 or BF16 expected")
        tensors[name] = a.reshape(info["shape"])
    return tensors


def rotary_pairs_adjacent(w, heads):
    """Rows of a q/k projection [heads * d, h]: each head's (i, i + d/2) pairs made adjacent."""
    d = w.shape[0] // heads
    return w.reshape(heads, 2, d // 2, w.shape[1]).swapaxes(1, 2).reshape(w.shape)


def placeholder_vocabulary(writer, vocab):
    """vocab 256 (Origami's byte tokenizer): token i is byte i, "<0xII>", as the model was
    trained; larger: <unk> <s> </s>, the 256 bytes, then "tokN"."""
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    if vocab == 256:
        tokens, types = byte_tokens, [gguf.TokenType.BYTE] * 256
    elif vocab >= 259:
        tokens = ["<unk>", "<s>", "</s>"] + byte_tokens
        types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
        types += [gguf.TokenType.BYTE] * 256
        tokens += [f"tok{i}" for i in range(len(tokens), vocab)]
        types += [gguf.TokenType.NORMAL] * (vocab - len(types))
    else:
        sys.exit(f"vocab_size {vocab}: the placeholder vocabulary is for 256 (bytes) or >= 259")
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * vocab)
    writer.add_token_types(types)
    if vocab == 256:
        writer.add_add_bos_token(False)
    else:
        writer.add_bos_token_id(1)
        writer.add_eos_token_id(2)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("hf_dir")
    p.add_argument("out")
    p.add_argument("--dtype", choices=["f32", "bf16", "f16"], default="f32")
    a = p.parse_args()

    with open(os.path.join(a.hf_dir, "config.json")) as f:
        c = json.load(f)
    for field, allowed in (("hidden_act", ("silu",)), ("attention_bias", (False,)),
                           ("mlp_bias", (False,)), ("rope_scaling", (None,))):
        if c.get(field, allowed[0]) not in allowed:
            sys.exit(f"config.json: {field} = {c[field]!r} is not converted here")
    h, layers = c["hidden_size"], c["num_hidden_layers"]
    heads = c["num_attention_heads"]
    kv_heads = c.get("num_key_value_heads", heads)
    head_dim = c.get("head_dim") or h // heads
    vocab = c["vocab_size"]
    tied = c.get("tie_word_embeddings", False)
    t = read_safetensors(os.path.join(a.hf_dir, "model.safetensors"))

    w = gguf.GGUFWriter(a.out, "llama")
    w.add_name(os.path.basename(os.path.normpath(a.hf_dir)))
    w.add_context_length(c.get("max_position_embeddings", 4096))
    w.add_embedding_length(h)
    w.add_block_count(layers)
    w.add_feed_forward_length(c["intermediate_size"])
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(float(c.get("rope_theta", 10000.0)))
    w.add_layer_norm_rms_eps(float(c.get("rms_norm_eps", 1e-5)))
    w.add_vocab_size(vocab)
    file_type = {"f32": gguf.LlamaFileType.ALL_F32, "bf16": gguf.LlamaFileType.MOSTLY_BF16,
                 "f16": gguf.LlamaFileType.MOSTLY_F16}[a.dtype]
    w.add_file_type(file_type)
    placeholder_vocabulary(w, vocab)

    def add(name, array):
        array = np.ascontiguousarray(array, dtype=np.float32)
        if array.ndim == 1 or a.dtype == "f32":  # norms stay F32, as llama.cpp's converter keeps them
            w.add_tensor(name, array)
        elif a.dtype == "f16":
            w.add_tensor(name, array.astype(np.float16))
        else:  # bf16, rounded to nearest even
            bits = array.view(np.uint32)
            rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
            w.add_tensor(name, rounded, raw_shape=array.shape,
                         raw_dtype=gguf.GGMLQuantizationType.BF16)

    used = set()

    def take(name):
        if name not in t:
            sys.exit(f"model.safetensors: tensor {name} missing")
        used.add(name)
        return t[name]

    add("token_embd.weight", take("model.embed_tokens.weight"))
    for i in range(layers):
        pre = f"model.layers.{i}."
        add(f"blk.{i}.attn_norm.weight", take(pre + "input_layernorm.weight"))
        add(f"blk.{i}.attn_q.weight", rotary_pairs_adjacent(take(pre + "self_attn.q_proj.weight"), heads))
        add(f"blk.{i}.attn_k.weight", rotary_pairs_adjacent(take(pre + "self_attn.k_proj.weight"), kv_heads))
        add(f"blk.{i}.attn_v.weight", take(pre + "self_attn.v_proj.weight"))
        add(f"blk.{i}.attn_output.weight", take(pre + "self_attn.o_proj.weight"))
        add(f"blk.{i}.ffn_norm.weight", take(pre + "post_attention_layernorm.weight"))
        add(f"blk.{i}.ffn_gate.weight", take(pre + "mlp.gate_proj.weight"))
        add(f"blk.{i}.ffn_up.weight", take(pre + "mlp.up_proj.weight"))
        add(f"blk.{i}.ffn_down.weight", take(pre + "mlp.down_proj.weight"))
    add("output_norm.weight", take("model.norm.weight"))
    if not tied:
        add("output.weight", take("lm_head.weight"))
    extra = sorted(set(t) - used)
    if extra:
        sys.exit(f"model.safetensors: tensors not converted: {', '.join(extra[:5])}")

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"{a.out}: {len(used)} tensors, {a.dtype}")


if __name__ == "__main__":
    main()
