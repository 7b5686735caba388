"""Torch reference modules: a decoder-only LM small enough to read in one sitting.

One `Attention` module covers MHA, GQA and MQA through ``num_key_value_heads``
(`MLAttention` multi-head latent attention, with its naive and absorbed forms); norms,
MLPs, the pre-norm block and the LM follow Hugging Face's Llama, Qwen2/3 and GPT-2
modeling files, with the same parameter names as `llmmath.counting.weight_shapes` (so
counts compare tensor by tensor). `build_model` builds any `ModelConfig`, on the
``meta`` device by default: shapes without memory, so a 405B model costs nothing to
count.

Attention uses explicit matmuls (not ``scaled_dot_product_attention``) so every FLOP is
visible to `torch.utils.flop_counter.FlopCounterMode`, and an optional `KVCache` for
decoding. Explained in the chapters *Counting parameters*, *Attention* and *The KV
cache*.
"""

from __future__ import annotations

import contextlib
import math

try:  # an extra of the core install (llmmath.errors.EXTRAS)
    import torch
    import torch.nn.functional as F
    from torch import nn
except ModuleNotFoundError as error:
    from llmmath.errors import needs_extra

    raise needs_extra(error, __name__) from error

from llmmath.config import ConfigError, ModelConfig
from llmmath.messages import gettext
from llmmath.rope import apply_rope, rope_cos_sin, rope_inv_freq, scaled_inv_freq

ACTIVATIONS = {
    "silu": F.silu,
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
}


class RMSNorm(nn.Module):
    """RMSNorm (Zhang & Sennrich 2019): x / sqrt(mean(x²) + eps) · weight over the last
    dim."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class LayerNorm(nn.Module):
    """LayerNorm (Ba et al. 2016): (x − mean) / sqrt(var + eps) · weight + bias over the
    last dim."""

    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(-1, keepdim=True)
        var = x.var(-1, keepdim=True, unbiased=False)
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias


def make_norm(cfg: ModelConfig, dim: int) -> nn.Module:
    """The norm ``cfg.norm_type`` names, over ``dim`` features."""
    return (RMSNorm if cfg.norm_type == "rmsnorm" else LayerNorm)(dim, cfg.norm_eps)


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Repeat each key/value head ``n_rep`` times: ``(b, n_kv, t, d_h)`` → ``(b,
    n_kv·n_rep, t, d_h)``.

    The same as ``torch.repeat_interleave(x, n_rep, dim=1)``; Hugging Face's
    ``repeat_kv`` in ``modeling_llama.py`` (Meta's ``llama/model.py`` does the same on
    ``(b, t, n_kv, d_h)``).
    """
    if n_rep == 1:
        return x
    b, n_kv, t, d = x.shape
    return x[:, :, None].expand(b, n_kv, n_rep, t, d).reshape(b, n_kv * n_rep, t, d)


class KVCache:
    """Keys and values of the tokens seen so far, per layer: ``(batch, n_kv, cached,
    d_h)`` each.

    Only the n_kv key/value heads are stored, before `repeat_kv` (Meta's
    ``llama/model.py`` and Hugging Face cache the same). With a ``sliding_window`` of W
    only the last W tokens are kept (Mistral's rolling buffer). ``seen`` counts the
    tokens processed: the position of the next one.
    """

    def __init__(
        self, num_layers: int, sliding_window: int | list[int | None] | None = None
    ):
        self.keys: list[torch.Tensor | None] = [None] * num_layers
        self.values: list[torch.Tensor | None] = [None] * num_layers
        self.sliding_window = sliding_window  # one for all layers, or one per layer
        self.seen = 0

    def window(self, layer: int) -> int | None:
        """The sliding window of ``layer`` (None: it keeps every token)."""
        if isinstance(self.sliding_window, list):
            return self.sliding_window[layer]
        return self.sliding_window

    def update(
        self, layer: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Append the new tokens' ``k``, ``v``; return the keys and values they may read
        (with a window W, the last W + t_new − 1: the first new token reads W, the last
        one W too)."""
        new = k.shape[2]
        if self.keys[layer] is not None:
            k = torch.cat([self.keys[layer], k], dim=2)
            v = torch.cat([self.values[layer], v], dim=2)
        w = self.window(layer)
        if w and k.shape[2] > w:  # clone: a view would keep the whole tensor alive
            self.keys[layer], self.values[layer] = (
                k[:, :, -w:].clone(),
                v[:, :, -w:].clone(),
            )
            k, v = k[:, :, -(w + new - 1) :], v[:, :, -(w + new - 1) :]
        else:
            self.keys[layer], self.values[layer] = k, v
        return k, v

    def nbytes(self) -> int:
        """Bytes of the stored tensors, measured (``Tensor.nbytes``)."""
        return sum(t.nbytes for t in self.keys + self.values if t is not None)

    def storage_nbytes(self) -> int:
        """Bytes of the memory behind the stored tensors (more than `nbytes` if one were
        a view into a larger tensor; equal here, which the tests check)."""
        return sum(
            t.untyped_storage().nbytes()
            for t in self.keys + self.values
            if t is not None
        )


def attention_mask(
    q_len: int,
    k_len: int,
    start: int,
    window: int | None,
    device: torch.device | None = None,
) -> torch.Tensor:
    """``(q_len, k_len)`` booleans: may query i (position start + i) read key j?

    Keys are the last ``k_len`` positions up to start + q_len − 1. Causal: j ≤ i; with a
    sliding window W also j > i − W.
    """
    q_pos = torch.arange(start, start + q_len, device=device)[:, None]
    k_pos = torch.arange(start + q_len - k_len, start + q_len, device=device)[None, :]
    allowed = k_pos <= q_pos
    if window:
        allowed &= k_pos > q_pos - window
    return allowed


class Attention(nn.Module):
    """Causal self-attention with n_h query heads and n_kv key/value heads.

    n_kv = n_h is MHA, 1 < n_kv < n_h is GQA (Ainslie et al. 2023), n_kv = 1 is MQA
    (Shazeer 2019). Input and output ``(batch, seq, hidden_size)``. With a `KVCache` the
    new tokens attend to the cached ones too; ``layer`` names this block's slot in the
    cache, and ``cache.seen`` is the position of the first new token
    (`DecoderLM.forward` advances it after all layers, so call a block directly only for
    one step).
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        n_h, n_kv, d_h, H = (
            cfg.num_attention_heads,
            cfg.num_key_value_heads,
            cfg.head_dim,
            cfg.hidden_size,
        )
        if cfg.fused_qkv:  # Phi-3: one matrix, split after the matmul
            self.qkv_proj = nn.Linear(H, (n_h + 2 * n_kv) * d_h, bias=cfg.qkv_bias)
        else:
            self.q_proj = nn.Linear(H, n_h * d_h, bias=cfg.qkv_bias)
            self.k_proj = nn.Linear(H, n_kv * d_h, bias=cfg.qkv_bias)
            self.v_proj = nn.Linear(H, n_kv * d_h, bias=cfg.qkv_bias)
        self.o_proj = nn.Linear(n_h * d_h, H, bias=cfg.o_proj_bias)
        if cfg.qk_norm:  # per head (Qwen3, Gemma 3) or over all heads (OLMo 2)
            self.q_norm = make_norm(cfg, d_h if cfg.qk_norm_per_head else n_h * d_h)
            self.k_norm = make_norm(cfg, d_h if cfg.qk_norm_per_head else n_kv * d_h)
        self.window: int | None = cfg.sliding_window  # set per layer by DecoderBlock
        self.rope_theta = cfg.rope_theta  # Gemma 3's local layers: rope_local_theta

    def _qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Queries ``(b, t, n_h·d_h)``, keys and values ``(b, t, n_kv·d_h)``."""
        cfg = self.cfg
        if cfg.fused_qkv:
            q_out = cfg.num_attention_heads * cfg.head_dim
            kv_out = cfg.num_key_value_heads * cfg.head_dim
            return self.qkv_proj(x).split([q_out, kv_out, kv_out], dim=-1)
        return self.q_proj(x), self.k_proj(x), self.v_proj(x)

    def forward(
        self, x: torch.Tensor, cache: KVCache | None = None, layer: int = 0
    ) -> torch.Tensor:
        cfg = self.cfg
        b, t, _ = x.shape
        start = cache.seen if cache is not None else 0
        q, k, v = self._qkv(x)
        if cfg.qk_norm and not cfg.qk_norm_per_head:  # OLMo 2: before the head split
            q, k = self.q_norm(q), self.k_norm(k)
        q = q.view(b, t, cfg.num_attention_heads, cfg.head_dim).transpose(1, 2)
        k = k.view(b, t, cfg.num_key_value_heads, cfg.head_dim).transpose(1, 2)
        v = v.view(b, t, cfg.num_key_value_heads, cfg.head_dim).transpose(1, 2)
        if cfg.qk_norm and cfg.qk_norm_per_head:
            q, k = self.q_norm(q), self.k_norm(k)
        if cfg.position_embedding_type == "rope":
            inv_freq = (
                scaled_inv_freq(cfg)
                if self.rope_theta == cfg.rope_theta
                else rope_inv_freq(cfg.head_dim, self.rope_theta)
            )
            cos, sin = rope_cos_sin(cfg.head_dim, t, offset=start, inv_freq=inv_freq)
            q, k = (
                apply_rope(q, cos.to(x), sin.to(x)),
                apply_rope(k, cos.to(x), sin.to(x)),
            )
        if cache is not None:
            k, v = cache.update(layer, k, v)  # (b, n_kv, t_k, d_h)
        k, v = repeat_kv(k, cfg.group_size), repeat_kv(v, cfg.group_size)
        scale = cfg.query_pre_attn_scalar or cfg.head_dim  # Gemma 2/3: their scalar
        scores = q @ k.transpose(-2, -1) / math.sqrt(scale)  # (b, n_h, t, t_k)
        if cfg.attn_logit_softcapping:  # Gemma 2: c·tanh(s / c)
            cap = cfg.attn_logit_softcapping
            scores = cap * torch.tanh(scores / cap)
        mask = attention_mask(t, k.shape[2], start, self.window, x.device)
        scores = scores.masked_fill(~mask, float("-inf"))
        out = scores.softmax(dim=-1) @ v  # (b, n_h, t, d_h)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))


class MLAttention(nn.Module):
    """Multi-head latent attention (DeepSeek-V2 report, Sec. 2.1; transformers'
    ``DeepseekV3Attention``). Input and output ``(batch, seq, hidden_size)``.

    The query goes through a rank-d_q bottleneck (``q_a_proj``, ``q_a_layernorm``,
    ``q_b_proj``; one ``q_proj`` when ``q_lora_rank`` is None) to n_h heads of d_n +
    d_r.
    ``kv_a_proj_with_mqa`` maps x to the latent c (d_c, normed by ``kv_a_layernorm``)
    and one RoPE key k_r (d_r) shared by all heads: only (c, k_r) are cached,
    ``(batch, 1, t, d_c)`` and ``(batch, 1, t, d_r)`` in the `KVCache`'s key and value
    slots. ``kv_b_proj`` (W_UK and W_UV stacked per head) expands c to keys (d_n) and
    values (d_v) per head.

    ``absorbed=False`` (naive): expand c for every cached token and attend per head.
    ``absorbed=True``: fold W_UK into the query (q_n·W_UK, a d_c-wide query per head)
    and W_UV into the output, so attention runs on the latent itself (Sec. 2.1.2,
    "W^UK can be absorbed into W^Q, and W^UV into W^O"). RoPE stays on the separate
    d_r part, which is why the decoupled key exists: a rotation between q and W_UK
    would depend on the position and could not be folded once (Sec. 2.1.3).
    """

    def __init__(self, cfg: ModelConfig, absorbed: bool = False):
        super().__init__()
        self.cfg, self.absorbed = cfg, absorbed
        H, n_h = cfg.hidden_size, cfg.num_attention_heads
        d_n, d_r, d_v, d_c = (
            cfg.qk_nope_head_dim,
            cfg.qk_rope_head_dim,
            cfg.v_head_dim,
            cfg.kv_lora_rank,
        )
        if cfg.q_lora_rank is None:
            self.q_proj = nn.Linear(H, n_h * (d_n + d_r), bias=False)
        else:
            self.q_a_proj = nn.Linear(H, cfg.q_lora_rank, bias=cfg.qkv_bias)
            self.q_a_layernorm = make_norm(cfg, cfg.q_lora_rank)
            self.q_b_proj = nn.Linear(cfg.q_lora_rank, n_h * (d_n + d_r), bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(H, d_c + d_r, bias=cfg.qkv_bias)
        self.kv_a_layernorm = make_norm(cfg, d_c)
        self.kv_b_proj = nn.Linear(d_c, n_h * (d_n + d_v), bias=False)
        self.o_proj = nn.Linear(n_h * d_v, H, bias=cfg.o_proj_bias)
        self.window: int | None = None

    def query(self, x: torch.Tensor) -> torch.Tensor:
        """Queries ``(b, n_h, t, d_n + d_r)`` before RoPE."""
        b, t, _ = x.shape
        if self.cfg.q_lora_rank is None:
            q = self.q_proj(x)
        else:
            q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))
        return q.view(b, t, self.cfg.num_attention_heads, -1).transpose(1, 2)

    def latent(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """What is cached: the latent ``(b, 1, t, d_c)`` and the RoPE key ``(b, 1, t,
        d_r)`` (before RoPE)."""
        b, t, _ = x.shape
        c, k_r = self.kv_a_proj_with_mqa(x).split(
            [self.cfg.kv_lora_rank, self.cfg.qk_rope_head_dim], dim=-1
        )
        return self.kv_a_layernorm(c).view(b, 1, t, -1), k_r.view(b, 1, t, -1)

    def expand(
        self, c: torch.Tensor, k_r: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The naive form's per-head keys ``(b, n_h, t, d_n + d_r)`` (the shared RoPE
        key copied to every head) and values ``(b, n_h, t, d_v)`` from the latent ``(b,
        1, t, d_c)`` and RoPE key ``(b, 1, t, d_r)``: what the ``"expanded"`` layout of
        `llmmath.kvcache` would store."""
        cfg = self.cfg
        n_h, d_n, d_v = cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.v_head_dim
        w = self.kv_b_proj.weight.view(n_h, d_n + d_v, cfg.kv_lora_rank)
        k_n = torch.einsum("bxsc,hnc->bhsn", c, w[:, :d_n])
        v = torch.einsum("bxsc,hvc->bhsv", c, w[:, d_n:])
        k = torch.cat([k_n, k_r.expand(-1, n_h, -1, -1)], dim=-1)
        return k, v

    def forward(
        self, x: torch.Tensor, cache: KVCache | None = None, layer: int = 0
    ) -> torch.Tensor:
        cfg = self.cfg
        b, t, _ = x.shape
        n_h, d_n, d_v = cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.v_head_dim
        start = cache.seen if cache is not None else 0
        q_n, q_r = self.query(x).split([d_n, cfg.qk_rope_head_dim], dim=-1)
        c, k_r = self.latent(x)
        cos, sin = rope_cos_sin(
            cfg.qk_rope_head_dim, t, offset=start, inv_freq=scaled_inv_freq(cfg)
        )
        q_r, k_r = (
            apply_rope(q_r, cos.to(x), sin.to(x)),
            apply_rope(k_r, cos.to(x), sin.to(x)),
        )
        if cache is not None:
            c, k_r = cache.update(layer, c, k_r)  # (b, 1, t_k, d_c), (b, 1, t_k, d_r)
        w = self.kv_b_proj.weight.view(n_h, d_n + d_v, cfg.kv_lora_rank)
        w_uk, w_uv = w[:, :d_n], w[:, d_n:]  # (n_h, d_n, d_c), (n_h, d_v, d_c)
        rope_scores = q_r @ k_r.transpose(-2, -1)  # (b, n_h, t, t_k)
        if self.absorbed:  # attend over the latent: W_UK into q, W_UV after
            q_c = torch.einsum("bhtn,hnc->bhtc", q_n, w_uk)
            scores = q_c @ c.transpose(-2, -1) + rope_scores
        else:  # expand every cached token to per-head keys and values
            k, v = self.expand(c, k_r)
            scores = q_n @ k[..., :d_n].transpose(-2, -1) + rope_scores
        scores = scores / math.sqrt(cfg.head_dim)
        mask = attention_mask(t, c.shape[2], start, self.window, x.device)
        probs = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        if self.absorbed:
            out = torch.einsum("bhtc,hvc->bhtv", probs @ c, w_uv)
        else:
            out = probs @ v  # (b, n_h, t, d_v)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))


def mha_to_gqa(attn: Attention, num_key_value_heads: int) -> Attention:
    """A GQA copy of ``attn`` whose key/value heads are the means of each group's heads.

    The "uptraining" recipe of Ainslie et al. 2023, Sec. 2.1 (before its short further
    training): head j of the new K (and V) projection is the mean of the old heads j·g …
    j·g + g − 1, so each group of g query heads reads the average of its old key/value
    heads. Query and output projections are copied unchanged.

    Raises:
        ConfigError: ``num_key_value_heads`` does not divide the current number of
        key/value heads.
    """
    old = attn.cfg
    if old.num_key_value_heads % num_key_value_heads:
        raise ConfigError(
            gettext(
                "num_key_value_heads ({n}) must divide the current num_key_value_heads "
                "({m})"
            ).format(n=num_key_value_heads, m=old.num_key_value_heads)
        )
    cfg = old.replace(num_key_value_heads=num_key_value_heads, head_dim=old.head_dim)
    with torch.random.fork_rng(devices=[]):  # its random init is overwritten below
        new = Attention(cfg).to(attn.q_proj.weight)
    pool = old.num_key_value_heads // num_key_value_heads
    with torch.no_grad():
        new.load_state_dict(
            {
                k: v
                for k, v in attn.state_dict().items()
                if not k.startswith(("k_proj", "v_proj"))
            },
            strict=False,
        )
        for name in ("k_proj", "v_proj"):
            source, target = getattr(attn, name), getattr(new, name)
            w = source.weight.view(
                num_key_value_heads, pool, old.head_dim, old.hidden_size
            )
            target.weight.copy_(w.mean(dim=1).reshape_as(target.weight))
            if source.bias is not None:
                bias = source.bias.view(num_key_value_heads, pool, old.head_dim)
                target.bias.copy_(bias.mean(dim=1).reshape_as(target.bias))
    return new


class MLP(nn.Module):
    """The feed-forward network: gated (SwiGLU with SiLU: down(act(gate(x)) · up(x)),
    Shazeer 2020) or plain (GPT-2: down(act(up(x)))). Input and output ``(batch, seq,
    H)``."""

    def __init__(self, cfg: ModelConfig, width: int | None = None):
        super().__init__()
        H, I = cfg.hidden_size, width or cfg.intermediate_size
        self.gated = cfg.mlp_type == "gated"
        self.fused = cfg.fused_gate_up
        self.act = ACTIVATIONS[cfg.hidden_act]
        if self.fused:  # Phi-3: gate and up in one matrix
            self.gate_up_proj = nn.Linear(H, 2 * I, bias=cfg.mlp_bias)
        else:
            if self.gated:
                self.gate_proj = nn.Linear(H, I, bias=cfg.mlp_bias)
            self.up_proj = nn.Linear(H, I, bias=cfg.mlp_bias)
        self.down_proj = nn.Linear(I, H, bias=cfg.mlp_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fused:
            gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
            return self.down_proj(self.act(gate) * up)
        if self.gated:
            return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))
        return self.down_proj(self.act(self.up_proj(x)))


class MoE(nn.Module):
    """A mixture-of-experts FFN: a bias-free router picks k of E gated experts per
    token, weighted by its softmax, renormalised over the k when ``cfg.norm_topk_prob``
    (Mixtral, HF ``MixtralSparseMoeBlock``; MiniMind's ``MoEGate`` when k > 1), plus S
    shared experts every token uses. Each routed expert runs only on the tokens sent to
    it, so its FLOPs are those of k experts per token."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.top_k, self.norm_topk_prob = cfg.num_experts_per_tok, cfg.norm_topk_prob
        self.router = nn.Linear(cfg.hidden_size, cfg.num_local_experts, bias=False)
        if cfg.router_score_bias:  # DeepSeek-V3: shifts the choice, not the weights
            self.e_score_correction_bias = nn.Parameter(
                torch.zeros(cfg.num_local_experts)
            )
        width = cfg.expert_intermediate_size
        self.experts = nn.ModuleList(
            MLP(cfg, width) for _ in range(cfg.num_local_experts)
        )
        self.shared_experts = nn.ModuleList(
            MLP(cfg, width) for _ in range(cfg.n_shared_experts)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])
        probs = self.router(flat).softmax(dim=-1, dtype=torch.float32)  # as HF: in fp32
        if hasattr(self, "e_score_correction_bias"):  # picks by biased score
            chosen = (probs + self.e_score_correction_bias).topk(self.top_k, -1)[1]
            weights = probs.gather(-1, chosen)
        else:
            weights, chosen = probs.topk(self.top_k, dim=-1)
        if self.norm_topk_prob:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        weights = weights.to(flat.dtype)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            rows, slot = torch.nonzero(chosen == e, as_tuple=True)
            if rows.numel():
                out.index_add_(0, rows, expert(flat[rows]) * weights[rows, slot, None])
        for expert in self.shared_experts:
            out = out + expert(flat)
        return out.reshape_as(x)


class DecoderBlock(nn.Module):
    """A decoder block. Pre-norm (every model here): x + attn(norm(x)), then h +
    mlp(norm(h)). With ``pre_norm=False``, the original Transformer's post-norm (Vaswani
    et al. 2017): norm(x + attn(x)), then norm(h + mlp(h)). Same parameters either way
    (in post-norm mode ``input_layernorm`` runs after attention and
    ``post_attention_layernorm`` after the FFN; the names are Hugging Face's pre-norm
    ones)."""

    def __init__(self, cfg: ModelConfig, pre_norm: bool = True, layer: int = 0):
        super().__init__()
        self.pre_norm = pre_norm
        self.layout = cfg.norm_layout
        H = cfg.hidden_size
        if self.layout != "post":
            self.input_layernorm = make_norm(cfg, H)
        self.self_attn = MLAttention(cfg) if cfg.is_mla else Attention(cfg)
        self.self_attn.window = cfg.window_of(layer)
        if cfg.rope_local_theta and cfg.window_of(layer):  # Gemma 3's local layers
            self.self_attn.rope_theta = cfg.rope_local_theta
        self.post_attention_layernorm = make_norm(cfg, H)
        if self.layout == "sandwich":
            self.pre_feedforward_layernorm = make_norm(cfg, H)
        if self.layout in ("sandwich", "post"):
            self.post_feedforward_layernorm = make_norm(cfg, H)
        moe = cfg.is_moe and layer not in cfg.dense_layers
        self.mlp = MoE(cfg) if moe else MLP(cfg)

    def forward(
        self, x: torch.Tensor, cache: KVCache | None = None, layer: int = 0
    ) -> torch.Tensor:
        if self.layout == "sandwich":  # Gemma 2/3: norms before and after each block
            attn = self.self_attn(self.input_layernorm(x), cache, layer)
            h = x + self.post_attention_layernorm(attn)
            ffn = self.mlp(self.pre_feedforward_layernorm(h))
            return h + self.post_feedforward_layernorm(ffn)
        if self.layout == "post":  # OLMo 2: norms on the blocks' outputs only
            h = x + self.post_attention_layernorm(self.self_attn(x, cache, layer))
            return h + self.post_feedforward_layernorm(self.mlp(h))
        if not self.pre_norm:
            h = self.input_layernorm(x + self.self_attn(x, cache, layer))
            return self.post_attention_layernorm(h + self.mlp(h))
        h = x + self.self_attn(self.input_layernorm(x), cache, layer)
        return h + self.mlp(self.post_attention_layernorm(h))


def embedding(num_embeddings: int, dim: int) -> nn.Embedding:
    """``nn.Embedding(num_embeddings, dim)``. Under ``torch.device("meta")`` its random
    initialisation is skipped: ``normal_`` on a meta tensor imports torch's compiler
    (about 1.5 s) to produce values that do not exist."""
    if torch.empty(0).is_meta:
        return nn.Embedding(
            num_embeddings, dim, _weight=torch.empty(num_embeddings, dim)
        )
    return nn.Embedding(num_embeddings, dim)


class DecoderLM(nn.Module):
    """A decoder-only language model: token ids ``(batch, seq)`` → logits ``(batch, seq,
    V)``.

    With ``tie_word_embeddings`` the LM head reuses the embedding matrix (one parameter,
    counted once by ``parameters()``).
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = embedding(cfg.vocab_size, cfg.hidden_size)
        if cfg.position_embedding_type == "learned":
            self.embed_positions = embedding(
                cfg.max_position_embeddings, cfg.hidden_size
            )
        self.layers = nn.ModuleList(
            DecoderBlock(cfg, layer=i) for i in range(cfg.num_hidden_layers)
        )
        self.norm = make_norm(cfg, cfg.hidden_size)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight

    def new_cache(self) -> KVCache:
        """An empty `KVCache` for this model."""
        cfg = self.cfg
        if cfg.layer_types is None:
            return KVCache(cfg.num_hidden_layers, cfg.sliding_window)
        windows = [cfg.window_of(i) for i in range(cfg.num_hidden_layers)]
        return KVCache(cfg.num_hidden_layers, windows)

    def forward(
        self, input_ids: torch.Tensor, cache: KVCache | None = None
    ) -> torch.Tensor:
        """Logits ``(batch, seq, V)``. With a ``cache``, ``input_ids`` are the tokens
        after the ``cache.seen`` already processed, and the cache is extended by them.
        """
        start = cache.seen if cache is not None else 0
        end = start + input_ids.shape[1]
        if (
            self.cfg.position_embedding_type == "learned"
            and end > self.cfg.max_position_embeddings
        ):
            raise ConfigError(
                gettext(
                    "position {position} is beyond max_position_embeddings ({n}) of "
                    "the learned position table"
                ).format(position=end - 1, n=self.cfg.max_position_embeddings)
            )
        x = self.embed_tokens(input_ids)
        if self.cfg.embedding_scale:  # Gemma: times √H, no parameters
            x = x * math.sqrt(self.cfg.hidden_size)
        if self.cfg.position_embedding_type == "learned":
            positions = torch.arange(start, start + input_ids.shape[1], device=x.device)
            x = x + self.embed_positions(positions)
        for i, layer in enumerate(self.layers):
            x = layer(x, cache, i)
        if cache is not None:
            cache.seen += input_ids.shape[1]
        logits = self.lm_head(self.norm(x))
        if self.cfg.final_logit_softcapping:  # Gemma 2: c·tanh(logits / c)
            cap = self.cfg.final_logit_softcapping
            logits = cap * torch.tanh(logits / cap)
        return logits


def build_model(
    cfg: ModelConfig,
    device: str | torch.device = "meta",
    dtype: torch.dtype | None = None,
    seed: int | None = 0,
) -> DecoderLM:
    """A `DecoderLM` for ``cfg``. On ``"meta"`` (the default) no memory is allocated, so
    any size can be counted with ``sum(p.numel() for p in model.parameters())``. On a
    real device weights are random (``torch.manual_seed(seed)`` first, unless ``seed``
    is None)."""
    if seed is not None and str(device) != "meta":
        torch.manual_seed(seed)
    with torch.device(device), _no_linear_init(str(device) == "meta"):
        model = DecoderLM(cfg)
    return model.to(dtype) if dtype is not None else model


@contextlib.contextmanager
def _no_linear_init(skip: bool):
    """On the meta device, skip ``nn.Linear``'s random initialisation: values that do
    not exist, and most of the time of building DeepSeek-V3's 45,000 linear layers
    (7 s instead of 2)."""
    saved = nn.Linear.reset_parameters
    if skip:
        nn.Linear.reset_parameters = lambda self: None
    try:
        yield
    finally:
        nn.Linear.reset_parameters = saved


@torch.no_grad()
def generate(
    model: DecoderLM,
    input_ids: torch.Tensor,
    max_new_tokens: int,
    use_cache: bool = True,
) -> tuple[torch.Tensor, KVCache | None]:
    """Greedy decoding: ``(batch, t)`` prompt → ``(batch, t + max_new_tokens)`` tokens.

    With ``use_cache`` the prompt is processed once (prefill) and each step feeds only
    the newest token (decode); without it every step recomputes the whole sequence. Both
    give the same tokens. Returns the tokens and the cache (None without one).
    """
    cache = model.new_cache() if use_cache else None
    tokens, step_input = input_ids, input_ids
    for _ in range(max_new_tokens):
        logits = model(step_input, cache) if use_cache else model(tokens)
        next_token = logits[:, -1].argmax(dim=-1, keepdim=True)
        tokens = torch.cat([tokens, next_token], dim=1)
        step_input = next_token
    return tokens, cache


def numel(model: nn.Module) -> int:
    """``sum(p.numel() for p in model.parameters())``: shared (tied) tensors counted
    once."""
    return sum(p.numel() for p in model.parameters())
