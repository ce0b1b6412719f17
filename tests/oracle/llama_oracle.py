#!/usr/bin/python3
"""Independent PyTorch oracle for Origami's Llama model (float64, plain torch ops).

README
======
Origami's single-device model must compute the same loss, gradients and AdamW trajectory as
an independent implementation. This script is that implementation. It uses only Debian's
python3-torch (no transformers, no safetensors package: the files are parsed here with
struct + json + torch.frombuffer) and computes everything in float64, so any difference it
reports is Origami's rounding or Origami's bug.

Inputs
  --config config.json          Hugging Face Llama field names (vocab_size, hidden_size,
                                intermediate_size, num_hidden_layers, num_attention_heads,
                                num_key_value_heads, rope_theta, rms_norm_eps, head_dim,
                                rope_scaling of rope_type linear or llama3,
                                tie_word_embeddings; Mixtral's num_local_experts,
                                num_experts_per_tok, router_aux_loss_coef). Fields that
                                change the model and are not implemented (other rope_scaling
                                types, attention/mlp bias, hidden_act other than silu,
                                router_jitter_noise other than 0) are refused.
  --weights model.safetensors   Hugging Face tensor names, any float dtype (F32/BF16/F64),
                                converted to float64:
                                  model.embed_tokens.weight                 [V, h]
                                  model.layers.N.input_layernorm.weight     [h]
                                  model.layers.N.self_attn.q_proj.weight    [H*d, h]
                                  model.layers.N.self_attn.k_proj.weight    [Hkv*d, h]
                                  model.layers.N.self_attn.v_proj.weight    [Hkv*d, h]
                                  model.layers.N.self_attn.o_proj.weight    [h, H*d]
                                  model.layers.N.post_attention_layernorm.weight [h]
                                  model.layers.N.mlp.gate_proj.weight       [f, h]
                                  model.layers.N.mlp.up_proj.weight         [f, h]
                                  model.layers.N.mlp.down_proj.weight       [h, f]
                                (with num_local_experts E, instead of the three mlp.*:
                                  model.layers.N.block_sparse_moe.gate.weight [E, h]
                                  model.layers.N.block_sparse_moe.experts.M.w1.weight [f, h]
                                  ... .experts.M.w3.weight [f, h], .w2.weight [h, f])
                                  model.norm.weight                         [h]
                                  lm_head.weight                            [V, h]
                                (none when tie_word_embeddings is true: the head is
                                model.embed_tokens.weight itself, one leaf tensor, so
                                autograd adds the lookup's and the head's gradients)
                                (projections are [out, in], as nn.Linear: y = x @ W.T).
                                A missing or extra tensor, or a wrong shape, is an error.
  --batch batch.safetensors     input_ids I32 [B, S] and labels I32 [B, S]; label -100 is
                                ignored; positions are 0..S-1. Repeatable (see --steps).
                                Packed documents: an optional ends_document I32 [B, S],
                                1 at the last token of a document inside the row, else 0
                                (a document crossing the row's end has no 1 in the row).
                                A row's documents are then the runs that these ends close
                                (each row starts a new one); positions restart at 0 in each;
                                attention stays within a document; and the label of a
                                document's last token is ignored (it would be the next
                                document's first token).
  --out out.safetensors         written atomically (temporary file + rename).
  --moe-capacity-factor c       (mixture of experts) c > 0: the capacity rule below; 0
                                (default): dropless.

The model
  x = embed[ids]; per layer: x += o_proj(attn(rope(q_proj(n)), rope(k_proj(n)), v_proj(n)))
  with n = rmsnorm(x), then x += down_proj(silu(gate_proj(n)) * up_proj(n)) with
  n = rmsnorm(x); logits = lm_head(rmsnorm(x)) (tied: x @ embed.T).
  RMSNorm: x / sqrt(mean(x^2) + eps) * w, eps from the config.
  RoPE: rotate_half convention (pairs (i, i + d/2)); angle = pos * inv_freq[i] with
  inv_freq[i] = theta^(-2i/d), computed in float64, then scaled as rope_scaling says,
  written here from transformers' _compute_linear_scaling_rope_parameters (inv_freq / factor)
  and _compute_llama3_parameters (by wavelength 2 pi / inv_freq against
  original_max_position_embeddings / low_freq_factor and / high_freq_factor, smoothed in
  between). d is head_dim (default hidden / heads). Attention: causal softmax(q k^T / sqrt(d)) v; grouped-query attention repeats
  each K/V head for H/Hkv consecutive query heads (repeat_interleave on the head axis).
  Packed rows (ends_document): per row, document ids = the number of ends before a token,
  positions = the token's index minus its document's first index, and key j is visible to
  query i iff j <= i and both are in one document (block-diagonal causal).
  Loss: mean cross-entropy over tokens whose label is not -100; exactly 0 (with all-zero
  gradients, never NaN) when every label is -100.
  Mixture of experts (num_local_experts E, num_experts_per_tok k), written from the rules of
  docs/models.md, with dense masks over all B*S tokens: router probabilities
  softmax(n @ gate.T); the k experts of each token by a STABLE descending sort of the
  logits (equal logits: the lower expert index first); a dense [tokens, E] mask of the
  chosen; routing weights = probabilities * mask / their sum; with --moe-capacity-factor c
  > 0, C = ceil(c * tokens * k / E) and an expert keeps the first C of its assignments in
  the order (choice rank, token), found by a cumulative sum over that order (a dropped
  assignment's weight becomes 0, the others are not renormalised again); every expert
  runs on every token (SwiGLU, w1 gate, w3 up, w2 down) and its output is weighted by the
  masked weights. The loss adds router_aux_loss_coef x the mean over layers of
  E * sum_e f_e P_e, f_e the fraction of the tokens whose chosen set holds e (drops
  included; no gradient), P_e the mean probability of e.

Outputs (all F64)
  loss                 [] the loss of the first batch at the given weights
  <parameter name>     its gradient at the given weights (before any clipping)
With --steps K (K >= 1) it also trains K steps and writes
  losses               [K] the loss at each step, before that step's update
  param.<name>         every parameter after K steps
Step k uses batch k mod (number of --batch files), so one file gives the same batch every
step. Each step: zero grads, forward, backward, then if --max-grad-norm > 0
torch.nn.utils.clip_grad_norm_ (scale = max_norm / (total_norm + 1e-6), applied only when
below 1), then torch.optim.AdamW(lr, betas=(beta1, beta2), eps, weight_decay) with weight
decay only on 2-D tensors (the matrices, embedding and LM head included); RMSNorm weights
get none. AdamW's update: p -= lr * wd * p; m, v moments with bias correction;
p -= lr * m_hat / (sqrt(v_hat) + eps).

Self-test
  --self-test checks this script's own pieces: RoPE and attention (GQA, causal) against
  naive Python loops, RMSNorm against its formula, the all-masked loss, a safetensors round
  trip, and every gradient of a tiny model by torch.autograd.gradcheck. Exit code 0 on
  success.

Example
  /usr/bin/python3 tests/oracle/llama_oracle.py --config c.json --weights w.safetensors \\
      --batch b.safetensors --out o.safetensors --steps 3 --lr 1e-3 --weight-decay 0.1

Exit codes: 0 success, 2 bad input (message on stderr), 1 self-test failure.
"""

import argparse
import json
import math
import os
import struct
import sys

import torch

F64 = torch.float64
IGNORE = -100

_DTYPES = {
    "F64": (torch.float64, 8),
    "F32": (torch.float32, 4),
    "BF16": (torch.bfloat16, 2),
    "F16": (torch.float16, 2),
    "I64": (torch.int64, 8),
    "I32": (torch.int32, 4),
}
_NAMES = {dt: name for name, (dt, _) in _DTYPES.items()}


class InputError(Exception):
    """Bad input: the script exits with code 2 and this message."""


# ------------------------------------------------------------------------------------------
# safetensors, parsed by hand (Debian has no safetensors package).

def read_safetensors(path):
    """Returns {name: tensor} (tensors own their memory). Strict about the layout."""
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e}")
    if len(blob) < 8:
        raise InputError(f"{path}: {len(blob)} bytes, shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8:
        raise InputError(f"{path}: header length {n} exceeds the file")
    try:
        header = json.loads(blob[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: header is not valid JSON: {e}")
    if not isinstance(header, dict):
        raise InputError(f"{path}: header is not a JSON object")
    data = blob[8 + n:]
    header.pop("__metadata__", None)
    out = {}
    spans = []
    for name, info in header.items():
        try:
            dtype, size = _DTYPES[info["dtype"]]
            shape = [int(d) for d in info["shape"]]
            begin, end = (int(o) for o in info["data_offsets"])
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"{path}: malformed entry {name!r}: {e}")
        numel = math.prod(shape)
        if any(d < 0 for d in shape) or not 0 <= begin <= end <= len(data) \
                or end - begin != numel * size:
            raise InputError(f"{path}: entry {name!r} has shape {shape}, offsets "
                             f"[{begin}, {end}] inconsistent with {len(data)} data bytes")
        spans.append((begin, end, name))
        if numel == 0:
            out[name] = torch.zeros(shape, dtype=dtype)
        else:
            buf = bytearray(data[begin:end])
            out[name] = torch.frombuffer(buf, dtype=dtype).reshape(shape).clone()
    pos = 0
    for begin, end, name in sorted(spans):
        if begin != pos:
            raise InputError(f"{path}: tensor {name!r} starts at {begin}, expected {pos}")
        pos = end
    if pos != len(data):
        raise InputError(f"{path}: {len(data) - pos} bytes after the last tensor")
    return out


def write_safetensors(path, tensors):
    """Writes {name: tensor} in insertion order; atomic (temporary file + rename)."""
    header = {}
    chunks = []
    offset = 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        raw = t.numpy().tobytes() if t.numel() > 0 else b""
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for c in chunks:
            f.write(c)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# ------------------------------------------------------------------------------------------
# Configuration and parameters.

def load_config(path):
    try:
        with open(path) as f:
            c = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: {e}")
    return check_config(c, path)


def check_config(c, where="config"):
    def need(field):
        if field not in c:
            raise InputError(f"{where}: missing {field}")
        v = c[field]
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise InputError(f"{where}: {field} must be a positive integer, got {v!r}")
        return v
    cfg = {f: need(f) for f in ("vocab_size", "hidden_size", "intermediate_size",
                                "num_hidden_layers", "num_attention_heads")}
    kv = c.get("num_key_value_heads")
    cfg["num_key_value_heads"] = cfg["num_attention_heads"] if kv is None else int(kv)
    cfg["rope_theta"] = float(c.get("rope_theta", 10000.0))
    cfg["rms_norm_eps"] = float(c.get("rms_norm_eps", 1e-6))
    h, H, Hkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = c.get("head_dim")
    if d is None:
        if h % H:
            raise InputError(f"{where}: hidden {h} not divisible by heads {H}")
        d = h // H
    cfg["head_dim"] = int(d)
    if Hkv <= 0 or H % Hkv or cfg["head_dim"] % 2 or cfg["head_dim"] <= 0:
        raise InputError(f"{where}: inconsistent heads (hidden {h}, heads {H}, kv heads {Hkv}, "
                         f"head_dim {cfg['head_dim']})")
    cfg["rope_scaling"] = check_rope_scaling(c.get("rope_scaling"), where)
    tied = c.get("tie_word_embeddings", False)
    if not isinstance(tied, bool):
        raise InputError(f"{where}: tie_word_embeddings must be true or false, got {tied!r}")
    cfg["tie_word_embeddings"] = tied
    experts = c.get("num_local_experts")
    if experts is not None:
        if isinstance(experts, bool) or not isinstance(experts, int) or experts <= 0:
            raise InputError(f"{where}: num_local_experts must be a positive integer, "
                             f"got {experts!r}")
        top = c.get("num_experts_per_tok", 2)
        if isinstance(top, bool) or not isinstance(top, int) or not 1 <= top <= experts:
            raise InputError(f"{where}: num_experts_per_tok must be in [1, {experts}], "
                             f"got {top!r}")
        cfg["experts"] = {"E": experts, "k": top,
                          "coef": float(c.get("router_aux_loss_coef", 0.001)),
                          "capacity_factor": 0.0}
        if float(c.get("router_jitter_noise", 0.0)) != 0.0:
            raise InputError(f"{where}: router_jitter_noise is not implemented")
    if c.get("attention_bias", False) or c.get("mlp_bias", False):
        raise InputError(f"{where}: biases are not implemented")
    if c.get("hidden_act", "silu") != "silu":
        raise InputError(f"{where}: hidden_act must be silu")
    return cfg


def check_rope_scaling(r, where):
    """None (plain RoPE) or {"rope_type": "linear" | "llama3", its numbers}."""
    if r is None:
        return None
    kind = r.get("rope_type", r.get("type"))
    if kind == "default":
        return None
    need = {"linear": ("factor",),
            "llama3": ("factor", "low_freq_factor", "high_freq_factor",
                       "original_max_position_embeddings")}.get(kind)
    if need is None:
        raise InputError(f"{where}: rope_scaling type {kind!r} is not implemented")
    if any(k not in r for k in need):
        raise InputError(f"{where}: rope_scaling {kind} needs {need}")
    return {"rope_type": kind, **{k: float(r[k]) for k in need}}


def inverse_frequencies(d, theta, scaling):
    """RoPE's d/2 inverse frequencies in float64, as transformers computes them (the
    default, linear and llama3 rope types)."""
    inv_freq = 1.0 / torch.pow(torch.tensor(theta, dtype=F64),
                               torch.arange(0, d, 2, dtype=F64) / d)
    if scaling is None:
        return inv_freq
    factor = scaling["factor"]
    if scaling["rope_type"] == "linear":
        return inv_freq / factor
    # _compute_llama3_parameters, line for line.
    low_freq_factor = scaling["low_freq_factor"]
    high_freq_factor = scaling["high_freq_factor"]
    old_context_len = scaling["original_max_position_embeddings"]
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor -
                                                                     low_freq_factor)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * \
        inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)


def parameter_shapes(cfg):
    """Ordered {name: shape}, Hugging Face names."""
    V, h, f = cfg["vocab_size"], cfg["hidden_size"], cfg["intermediate_size"]
    qd = cfg["num_attention_heads"] * cfg["head_dim"]
    kvd = cfg["num_key_value_heads"] * cfg["head_dim"]
    shapes = {"model.embed_tokens.weight": (V, h)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes[p + "input_layernorm.weight"] = (h,)
        shapes[p + "self_attn.q_proj.weight"] = (qd, h)
        shapes[p + "self_attn.k_proj.weight"] = (kvd, h)
        shapes[p + "self_attn.v_proj.weight"] = (kvd, h)
        shapes[p + "self_attn.o_proj.weight"] = (h, qd)
        shapes[p + "post_attention_layernorm.weight"] = (h,)
        if "experts" in cfg:
            E = cfg["experts"]["E"]
            shapes[p + "block_sparse_moe.gate.weight"] = (E, h)
            for m in range(E):
                q = f"{p}block_sparse_moe.experts.{m}."
                shapes[q + "w1.weight"] = (f, h)
                shapes[q + "w3.weight"] = (f, h)
                shapes[q + "w2.weight"] = (h, f)
            continue
        shapes[p + "mlp.gate_proj.weight"] = (f, h)
        shapes[p + "mlp.up_proj.weight"] = (f, h)
        shapes[p + "mlp.down_proj.weight"] = (h, f)
    shapes["model.norm.weight"] = (h,)
    if not cfg.get("tie_word_embeddings", False):
        shapes["lm_head.weight"] = (V, h)
    return shapes


def load_parameters(path, cfg):
    tensors = read_safetensors(path)
    shapes = parameter_shapes(cfg)
    missing = [n for n in shapes if n not in tensors]
    extra = [n for n in tensors if n not in shapes]
    if missing or extra:
        raise InputError(f"{path}: missing tensors {missing[:5]}, unexpected tensors {extra[:5]}")
    params = {}
    for name, shape in shapes.items():
        t = tensors[name]
        if tuple(t.shape) != shape or not t.is_floating_point():
            raise InputError(f"{path}: {name} is {t.dtype} {list(t.shape)}, expected a float "
                             f"tensor of shape {list(shape)}")
        params[name] = t.to(F64).requires_grad_(True)
    return params


def load_batch(path, cfg):
    t = read_safetensors(path)
    for name in ("input_ids", "labels"):
        if name not in t or t[name].dtype != torch.int32 or t[name].dim() != 2:
            raise InputError(f"{path}: needs {name} as I32 [B, S]")
    ids, labels = t["input_ids"].long(), t["labels"].long()
    if ids.shape != labels.shape:
        raise InputError(f"{path}: input_ids {list(ids.shape)} and labels "
                         f"{list(labels.shape)} differ")
    V = cfg["vocab_size"]
    if ids.numel() and (ids.min() < 0 or ids.max() >= V):
        raise InputError(f"{path}: input_ids outside [0, {V})")
    ok = (labels == IGNORE) | ((labels >= 0) & (labels < V))
    if not bool(ok.all()):
        raise InputError(f"{path}: labels outside [0, {V}) and not {IGNORE}")
    if "ends_document" not in t:
        return ids, labels
    ends = t["ends_document"]
    if ends.dtype != torch.int32 or tuple(ends.shape) != tuple(ids.shape):
        raise InputError(f"{path}: ends_document must be I32 {list(ids.shape)} like input_ids")
    if not bool(((ends == 0) | (ends == 1)).all()):
        raise InputError(f"{path}: ends_document holds values other than 0 and 1")
    return ids, labels, ends.long()


def packed_documents(ends):
    """ends [B, S] (1 at a document's last token) -> document ids [B, S] (0 at each row's
    first token) and positions [B, S] (0 at each document's first token)."""
    B, S = ends.shape
    before = torch.zeros_like(ends)
    before[:, 1:] = ends[:, :-1]                      # 1 where the previous token ended one
    documents = torch.cumsum(before, dim=1)
    index = torch.arange(S).expand(B, S)
    first = torch.zeros_like(ends)
    for b in range(B):                                # each document's first index, by loop
        start = 0
        for s in range(S):
            if s > 0 and before[b, s]:
                start = s
            first[b, s] = start
    return documents, index - first


# ------------------------------------------------------------------------------------------
# The model, in plain torch ops.

def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * w


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope(x, positions, theta, scaling=None):
    """x [B, heads, S, d]; positions [S] (global) or [B, S] (per row)."""
    d = x.shape[-1]
    inv_freq = inverse_frequencies(d, theta, scaling).to(F64)           # theta^(-2i/d), scaled
    angles = positions.to(F64)[..., None] * inv_freq                     # [(B,) S, d/2]
    emb = torch.cat((angles, angles), dim=-1)                            # [(B,) S, d]
    if emb.dim() == 3:
        emb = emb[:, None]                                               # [B, 1, S, d]
    return x * emb.cos() + rotate_half(x) * emb.sin()


def attention(q, k, v, q_pos, k_pos, documents=None):
    """q [B, H, Sq, d]; k, v [B, Hkv, Sk, d]; causal on global positions; with documents
    [B, S] (Sq = Sk = S) also masked across documents."""
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    hidden = k_pos[None, :] > q_pos[:, None]                             # [Sq, Sk]
    if documents is not None:
        other = documents[:, :, None] != documents[:, None, :]           # [B, S, S]
        hidden = (hidden[None] | other)[:, None]                         # [B, 1, S, S]
    scores = scores.masked_fill(hidden, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def sparse_moe(n, params, p, moe):
    """Mixtral's sparse MLP on n [B, S, h] with dense masks; returns (output, balance)."""
    B, S, h = n.shape
    x = n.reshape(B * S, h)
    T, E, k = x.shape[0], moe["E"], moe["k"]
    logits = x @ params[p + "block_sparse_moe.gate.weight"].T            # [T, E]
    probs = torch.softmax(logits, dim=-1)
    order = torch.sort(logits.detach(), dim=-1, descending=True, stable=True).indices[:, :k]
    chosen = torch.zeros(T, E, dtype=F64).scatter(1, order, 1.0)        # [T, E] 0/1
    weights = probs * chosen / (probs * chosen).sum(dim=-1, keepdim=True)
    if moe["capacity_factor"] > 0:
        capacity = math.ceil(moe["capacity_factor"] * T * k / E)
        slots = torch.nn.functional.one_hot(order, E).to(F64)            # [T, k, E]
        queue = slots.transpose(0, 1).reshape(k * T, E)                  # choice rank, token
        place = torch.cumsum(queue, dim=0) * queue                       # 1-based, per expert
        kept = ((place >= 1) & (place <= capacity)).to(F64)
        weights = weights * kept.reshape(k, T, E).sum(dim=0)
    out = torch.zeros_like(x)
    for m in range(E):
        q = f"{p}block_sparse_moe.experts.{m}."
        gate, up = x @ params[q + "w1.weight"].T, x @ params[q + "w3.weight"].T
        y = (torch.nn.functional.silu(gate) * up) @ params[q + "w2.weight"].T
        out = out + weights[:, m:m + 1] * y
    balance = E * (chosen.mean(dim=0) * probs.mean(dim=0)).sum()
    return out.reshape(B, S, h), balance


def forward_loss(params, cfg, ids, labels, ends=None):
    B, S = ids.shape
    h, H, Hkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d, eps, theta = cfg["head_dim"], cfg["rms_norm_eps"], cfg["rope_theta"]
    scaling = cfg["rope_scaling"]
    pos = torch.arange(S)
    documents, rope_pos = None, pos
    if ends is not None:  # packed rows: a document's last label is no target
        documents, rope_pos = packed_documents(ends)
        labels = labels.masked_fill(ends == 1, IGNORE)
    x = params["model.embed_tokens.weight"][ids]                         # [B, S, h]
    balances = []
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        n = rms_norm(x, params[p + "input_layernorm.weight"], eps)
        q = (n @ params[p + "self_attn.q_proj.weight"].T).view(B, S, H, d).transpose(1, 2)
        k = (n @ params[p + "self_attn.k_proj.weight"].T).view(B, S, Hkv, d).transpose(1, 2)
        v = (n @ params[p + "self_attn.v_proj.weight"].T).view(B, S, Hkv, d).transpose(1, 2)
        o = attention(rope(q, rope_pos, theta, scaling), rope(k, rope_pos, theta, scaling), v,
                      pos, pos, documents)
        o = o.transpose(1, 2).reshape(B, S, H * d)
        x = x + o @ params[p + "self_attn.o_proj.weight"].T
        n = rms_norm(x, params[p + "post_attention_layernorm.weight"], eps)
        if "experts" in cfg:
            y, balance = sparse_moe(n, params, p, cfg["experts"])
            x = x + y
            balances.append(balance)
            continue
        gate = n @ params[p + "mlp.gate_proj.weight"].T
        up = n @ params[p + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(gate) * up) @ params[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, params["model.norm.weight"], eps)
    head = params["model.embed_tokens.weight" if cfg.get("tie_word_embeddings", False)
                  else "lm_head.weight"]
    logits = (x @ head.T).reshape(B * S, -1)
    flat = labels.reshape(-1)
    mask = flat != IGNORE
    count = int(mask.sum())
    aux = cfg["experts"]["coef"] * sum(balances) / len(balances) if balances else 0.0
    if count == 0:
        return (logits * 0).sum() + aux  # 0, with zero gradients flowing to every parameter
    lse = torch.logsumexp(logits[mask], dim=-1)
    target = logits[mask].gather(1, flat[mask][:, None]).squeeze(1)
    return (lse - target).sum() / count + aux


# ------------------------------------------------------------------------------------------
# Runs.

def gradients(params):
    return {n: (p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p))
            for n, p in params.items()}


def run(args):
    cfg = load_config(args.config)
    if args.moe_capacity_factor != 0:
        if "experts" not in cfg or args.moe_capacity_factor < 0:
            raise InputError("--moe-capacity-factor needs num_local_experts and a value > 0")
        cfg["experts"]["capacity_factor"] = args.moe_capacity_factor
    params = load_parameters(args.weights, cfg)
    batches = [load_batch(b, cfg) for b in args.batch]
    out = {}

    loss = forward_loss(params, cfg, *batches[0])
    loss.backward()
    out["loss"] = loss.detach().reshape(())
    for n, g in gradients(params).items():
        out[n] = g

    if args.steps > 0:
        for p in params.values():
            p.grad = None
        decay = [p for p in params.values() if p.dim() == 2]
        no_decay = [p for p in params.values() if p.dim() != 2]
        opt = torch.optim.AdamW(
            [{"params": decay, "weight_decay": args.weight_decay},
             {"params": no_decay, "weight_decay": 0.0}],
            lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps)
        losses = []
        for step in range(args.steps):
            opt.zero_grad(set_to_none=False)
            loss = forward_loss(params, cfg, *batches[step % len(batches)])
            loss.backward()
            losses.append(loss.item())
            if args.max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(list(params.values()), args.max_grad_norm)
            opt.step()
        out["losses"] = torch.tensor(losses, dtype=F64)
        for n, p in params.items():
            out["param." + n] = p.detach().clone()
    write_safetensors(args.out, out)
    print(f"oracle: loss {out['loss'].item():.17g}, {len(params)} gradients"
          + (f", {args.steps} AdamW steps, last loss {out['losses'][-1].item():.17g}"
             if args.steps > 0 else "") + f" -> {args.out}")


# ------------------------------------------------------------------------------------------
# Self-test.

def _check(name, ok, detail=""):
    print(f"  {'ok  ' if ok else 'FAIL'} {name} {detail}")
    if not ok:
        raise AssertionError(name)


def _random_params(cfg, gen):
    return {n: (torch.randn(s, dtype=F64, generator=gen) * (0.5 if len(s) == 2 else 0.1)
                + (1.0 if len(s) == 1 else 0.0)).requires_grad_(True)
            for n, s in parameter_shapes(cfg).items()}


def self_test():
    gen = torch.Generator().manual_seed(1234)
    print("llama_oracle self-test")

    # RoPE against the rotation of each pair (i, i + d/2) by pos * theta^(-2i/d).
    B, H, S, d, theta = 2, 3, 5, 6, 500.0
    x = torch.randn(B, H, S, d, dtype=F64, generator=gen)
    pos = torch.tensor([0, 3, 4, 9, 17])
    got = rope(x, pos, theta)
    want = torch.empty_like(x)
    for s in range(S):
        for i in range(d // 2):
            a = pos[s].item() * theta ** (-2.0 * i / d)
            c, sn = math.cos(a), math.sin(a)
            x1, x2 = x[..., s, i], x[..., s, i + d // 2]
            want[..., s, i] = x1 * c - x2 * sn
            want[..., s, i + d // 2] = x2 * c + x1 * sn
    _check("rope vs per-pair rotation", torch.allclose(got, want, rtol=0, atol=1e-13),
           f"max err {(got - want).abs().max().item():.2e}")

    # llama3 scaling against the three bands written out one frequency at a time; every band
    # is present (d 16, theta 10000: wavelengths 6.3 .. 2e4 around 64 / 4 and 64 / 1).
    sc = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 64.0}
    got = inverse_frequencies(16, 10000.0, sc)
    bands = set()
    for i in range(8):
        f = 10000.0 ** (-2.0 * i / 16)
        w = 2 * math.pi / f
        if w < 64 / 4.0:
            want_f, band = f, "high"
        elif w > 64 / 1.0:
            want_f, band = f / 8.0, "low"
        else:
            s_ = (64 / w - 1.0) / (4.0 - 1.0)
            want_f, band = (1 - s_) * f / 8.0 + s_ * f, "medium"
        bands.add(band)
        _check(f"llama3 inverse frequency {i} ({band})",
               abs(got[i].item() - want_f) <= 1e-15 * want_f)
    _check("llama3 test covers every band", bands == {"high", "medium", "low"})
    lin = inverse_frequencies(6, 500.0, {"rope_type": "linear", "factor": 4.0})
    _check("linear scaling divides every frequency",
           all(abs(lin[i].item() - 500.0 ** (-2.0 * i / 6) / 4.0) < 1e-15 for i in range(3)))

    # Attention (GQA 4 query heads over 2 KV heads, causal on arbitrary global positions)
    # against explicit loops.
    H, Hkv, Sq, Sk, d = 4, 2, 4, 6, 3
    q = torch.randn(B, H, Sq, d, dtype=F64, generator=gen)
    k = torch.randn(B, Hkv, Sk, d, dtype=F64, generator=gen)
    v = torch.randn(B, Hkv, Sk, d, dtype=F64, generator=gen)
    q_pos = torch.tensor([2, 3, 7, 8])
    k_pos = torch.tensor([0, 1, 2, 3, 6, 7])
    got = attention(q, k, v, q_pos, k_pos)
    want = torch.zeros_like(got)
    for b in range(B):
        for hq in range(H):
            hk = hq // (H // Hkv)
            for i in range(Sq):
                w = [math.exp(float(q[b, hq, i] @ k[b, hk, j]) / math.sqrt(d))
                     if k_pos[j] <= q_pos[i] else 0.0 for j in range(Sk)]
                z = sum(w)
                for j in range(Sk):
                    want[b, hq, i] += w[j] / z * v[b, hk, j]
    _check("attention vs naive loops (GQA, causal, global positions)",
           torch.allclose(got, want, rtol=0, atol=1e-13),
           f"max err {(got - want).abs().max().item():.2e}")

    # RMSNorm against its formula, one row at a time.
    xr = torch.randn(3, 7, dtype=F64, generator=gen)
    w = torch.randn(7, dtype=F64, generator=gen)
    want = torch.stack([r / math.sqrt(float((r * r).sum()) / 7 + 1e-5) * w for r in xr])
    _check("rmsnorm vs formula", torch.allclose(rms_norm(xr, w, 1e-5), want, rtol=0, atol=1e-14))

    # A tiny grouped-query model: every gradient by finite differences.
    cfg = check_config({"vocab_size": 11, "hidden_size": 8, "intermediate_size": 12,
                        "num_hidden_layers": 2, "num_attention_heads": 2,
                        "num_key_value_heads": 1, "rope_theta": 10000.0, "rms_norm_eps": 1e-5})
    params = _random_params(cfg, gen)
    ids = torch.randint(0, 11, (2, 5), generator=gen)
    labels = torch.randint(0, 11, (2, 5), generator=gen)
    labels[0, 1] = IGNORE
    labels[1, 4] = IGNORE
    names = list(params)

    def loss_of(*tensors):
        return forward_loss(dict(zip(names, tensors)), cfg, ids, labels)

    ok = torch.autograd.gradcheck(loss_of, tuple(params.values()), eps=1e-6, atol=1e-7,
                                  rtol=1e-5)
    _check("gradcheck of every parameter (2 layers, GQA, masked labels)", ok)

    # Tied embeddings: every gradient by finite differences, and the shared table's gradient
    # equals the untied model's embedding gradient plus its head gradient when the head holds
    # the same values (the two uses of one table add).
    tied_cfg = dict(cfg, tie_word_embeddings=True)
    tied = {n: p.detach().clone().requires_grad_(True)
            for n, p in params.items() if n != "lm_head.weight"}
    tied_names = list(tied)
    _check("tied model has no lm_head", "lm_head.weight" not in parameter_shapes(tied_cfg))
    ok = torch.autograd.gradcheck(
        lambda *t: forward_loss(dict(zip(tied_names, t)), tied_cfg, ids, labels),
        tuple(tied.values()), eps=1e-6, atol=1e-7, rtol=1e-5)
    _check("gradcheck of every parameter, tied embeddings", ok)
    untied = {n: p.detach().clone().requires_grad_(True) for n, p in params.items()}
    with torch.no_grad():
        untied["lm_head.weight"].copy_(untied["model.embed_tokens.weight"])
    forward_loss(untied, cfg, ids, labels).backward()
    forward_loss(tied, tied_cfg, ids, labels).backward()
    both = untied["model.embed_tokens.weight"].grad + untied["lm_head.weight"].grad
    _check("tied table's gradient = embedding's + head's",
           torch.allclose(tied["model.embed_tokens.weight"].grad, both, rtol=0, atol=1e-13)
           and bool((untied["lm_head.weight"].grad != 0).any()))

    # The loss is the mean over unmasked tokens: equal to the mean of the losses of batches
    # in which only one of those tokens is unmasked (not a sum, not a mean over B*S).
    with torch.no_grad():
        loss = loss_of(*params.values()).item()
        singles = []
        for b, s in (labels != IGNORE).nonzero().tolist():
            one = torch.full_like(labels, IGNORE)
            one[b, s] = labels[b, s]
            singles.append(forward_loss(params, cfg, ids, one).item())
    _check("loss = mean of per-token losses over unmasked tokens",
           math.isfinite(loss) and len(singles) == 8
           and abs(loss - sum(singles) / len(singles)) < 1e-13, f"{loss:.6f}")

    # Packed rows: documents of lengths 1, 3, 1 (row 0) and 2, then 3 crossing the row's end
    # (row 1). Their positions restart per document, and the packed loss summed over its
    # targets equals the sum over each document run alone as its own row (whose last label
    # is dropped when the document ends inside the row): nothing crosses a boundary.
    ends = torch.tensor([[1, 0, 0, 1, 1], [0, 1, 0, 0, 0]])
    docs, positions = packed_documents(ends)
    _check("packed documents and positions",
           docs.tolist() == [[0, 1, 1, 1, 2], [0, 0, 1, 1, 1]]
           and positions.tolist() == [[0, 0, 1, 2, 0], [0, 1, 0, 1, 2]])
    with torch.no_grad():
        packed_labels = labels.masked_fill(ends == 1, IGNORE)
        packed = forward_loss(params, cfg, ids, labels, ends).item() * int(
            (packed_labels != IGNORE).sum())
        alone = 0.0
        for b, lengths in ((0, (1, 3, 1)), (1, (2, 3))):
            begin = 0
            for n in lengths:
                lab = labels[b:b + 1, begin:begin + n].clone()
                if int(ends[b, begin + n - 1]):
                    lab[0, -1] = IGNORE
                count = int((lab != IGNORE).sum())
                if count:
                    alone += forward_loss(params, cfg, ids[b:b + 1, begin:begin + n],
                                          lab).item() * count
                begin += n
    _check("packed row = its documents run alone", abs(packed - alone) < 1e-12 * abs(alone),
           f"{packed:.6f} vs {alone:.6f}")

    # Mixture of experts: the routing against a loop over tokens (ties to the lower index,
    # capacity in (choice rank, token) order), and every gradient by finite differences.
    moe = {"E": 4, "k": 2, "coef": 0.5, "capacity_factor": 0.75}
    moe_cfg = dict(cfg, experts=moe, num_hidden_layers=1)
    moe_params = _random_params(moe_cfg, gen)
    with torch.no_grad():
        xt = torch.randn(1, 6, 8, dtype=F64, generator=gen)
        gate = moe_params["model.layers.0.block_sparse_moe.gate.weight"]
        gate[1] = gate[0]  # experts 0 and 1 tie on every token: 0 must win
        got, _ = sparse_moe(xt, moe_params, "model.layers.0.", moe)
        want = torch.zeros(6, 8, dtype=F64)
        taken = [0] * 4
        picks = []
        for t in range(6):
            lg = [float(xt[0, t] @ gate[e]) for e in range(4)]
            best = sorted(range(4), key=lambda e: (-lg[e], e))[:2]
            _check("tie goes to the lower expert", 1 not in best or 0 in best)
            z = sum(math.exp(lg[e]) for e in best)
            picks.append([(e, math.exp(lg[e]) / z) for e in best])
        for j in range(2):
            for t in range(6):
                e, w = picks[t][j]
                taken[e] += 1
                if taken[e] <= math.ceil(0.75 * 6 * 2 / 4):
                    q = f"model.layers.0.block_sparse_moe.experts.{e}."
                    xv = xt[0, t]
                    a, u = xv @ moe_params[q + "w1.weight"].T, xv @ moe_params[q + "w3.weight"].T
                    want[t] += w * ((a * torch.sigmoid(a) * u) @ moe_params[q + "w2.weight"].T)
        _check("moe routing and capacity vs a loop over tokens",
               torch.allclose(got[0], want, rtol=0, atol=1e-13) and max(taken) > 3,
               f"max err {(got[0] - want).abs().max().item():.2e}")
    moe_params = _random_params(moe_cfg, gen)  # untied: finite differences must not flip
    moe_names = list(moe_params)
    ok = torch.autograd.gradcheck(
        lambda *t: forward_loss(dict(zip(moe_names, t)), moe_cfg, ids, labels),
        tuple(p.detach().clone().requires_grad_(True) for p in moe_params.values()),
        eps=1e-6, atol=1e-7, rtol=1e-5)
    _check("gradcheck of every parameter, mixture of experts (top-2, capacity, aux loss)", ok)

    # All labels masked: loss exactly 0 and every gradient exactly zero.
    for p in params.values():
        p.grad = None
    zero = forward_loss(params, cfg, ids, torch.full_like(labels, IGNORE))
    zero.backward()
    _check("all-masked batch: loss 0, zero gradients, no NaN",
           zero.item() == 0.0 and all(bool((p.grad == 0).all()) for p in params.values()))

    # safetensors round trip of every dtype, zero-size and scalar tensors.
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.safetensors")
        src = {"a": torch.randn(3, 4, dtype=F64, generator=gen), "b": torch.arange(5, dtype=torch.int32),
               "c": torch.randn(2, dtype=torch.float32, generator=gen), "e": torch.zeros(0, 3),
               "s": torch.tensor(2.5, dtype=F64), "i": torch.tensor([-(2 ** 40)], dtype=torch.int64)}
        write_safetensors(path, src)
        back = read_safetensors(path)
        _check("safetensors round trip", set(back) == set(src) and all(
            back[n].dtype == t.dtype and back[n].shape == t.shape and torch.equal(back[n], t)
            for n, t in src.items()))
        with open(path, "rb") as f:
            blob = f.read()
        with open(path, "wb") as f:
            f.write(blob[:-1])
        try:
            read_safetensors(path)
            _check("truncated safetensors refused", False)
        except InputError:
            _check("truncated safetensors refused", True)
    print("self-test passed")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 epilog="See the README in this script's docstring.")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--config")
    ap.add_argument("--weights")
    ap.add_argument("--batch", action="append", default=[])
    ap.add_argument("--out")
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.999)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--max-grad-norm", type=float, default=0.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--moe-capacity-factor", type=float, default=0.0)
    args = ap.parse_args(argv)
    torch.set_num_threads(max(1, args.threads))
    if args.self_test:
        try:
            self_test()
        except AssertionError as e:
            print(f"self-test FAILED: {e}", file=sys.stderr)
            return 1
        return 0
    if not (args.config and args.weights and args.batch and args.out):
        ap.error("--config, --weights, --batch and --out are required (or --self-test)")
    if args.steps < 0:
        ap.error("--steps must be >= 0")
    try:
        run(args)
    except InputError as e:
        print(f"oracle: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
