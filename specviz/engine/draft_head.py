"""The draft head: a one-layer draft that reads the target's own features (EAGLE, Li et al. 2024).

Words used below: f_i is the target's feature at position i (its final-norm hidden state, the
vector its LM head turns into p for token i+1); x_i is the token at position i.

One head step reads (f_{i-1}, x_i) and predicts f_i, and from it q for x_{i+1}:

    concat(f_{i-1}, embed(x_i))   [T, 2D]   (f_{i-1}: see "fused" below)
      -> fc                       [T, D]
      -> one Llama decoder layer  (initialised from the target's last layer; its own KV cache)
      -> the target's final norm  -> f^_i   [T, D]
      -> f^_i @ E_S^T             [T, S]    logits over a vocabulary subset S of the target's
                                            tied embedding E (q is 0 outside S, which stays exact:
                                            the residual max(0, p - q) then holds those tokens)

Drafting chains it: the predicted f^_i and the sampled x_{i+1} feed the next step. The token
embedding and E_S are the target's own (never trained), so the shipped head holds only fc, the
layer, the norm and the subset's token ids.

With `feature_layers` (EAGLE-3, Li et al. 2025) the head also reads the outputs of some earlier
decoder layers of the target, which hold more of the context than the final feature (that one is
specialised for one next token). Its true input is then

    fuse(concat(h_a, h_b, ..., f_{i-1}))   [T, (n+1)D] -> [T, D]   (each h scaled to unit RMS)

in place of f_{i-1}, fuse starting as [0 ... 0 I] (exactly the single-feature head); chained
steps still read the predicted f^ as above.

This module holds the network and its files; drafting lives in specviz.drafters.HeadDrafter and
training in specviz.training.train_head.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

HEAD_SCHEMA = "specviz.draft_head/1"


@dataclass(frozen=True)
class HeadConfig:
    hidden: int  # D, the target's hidden size
    intermediate: int  # the layer's MLP width
    heads: int
    kv_heads: int
    head_dim: int
    rms_eps: float
    target: str  # the target this head was trained for (its features only make sense there)
    subset_size: int  # S, draft vocabulary size
    # Decoder layers (0-based) whose outputs the head reads besides the final feature; (): none.
    feature_layers: tuple[int, ...] = ()
    depth: int = 1  # the head's own decoder layers, initialised from the target's last `depth`


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat([-b, a], dim=-1)


class HeadLayer(nn.Module):
    """A Llama decoder layer (pre-norm attention with RoPE and grouped KV heads, SwiGLU MLP),
    written out so training can use the unrolled attention of specviz.training.head_unroll."""

    def __init__(self, cfg: HeadConfig):
        super().__init__()
        d, hd = cfg.hidden, cfg.head_dim
        self.heads, self.kv_heads, self.head_dim = cfg.heads, cfg.kv_heads, hd
        self.input_norm = RMSNorm(d, cfg.rms_eps)
        self.q_proj = nn.Linear(d, cfg.heads * hd, bias=False)
        self.k_proj = nn.Linear(d, cfg.kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(d, cfg.kv_heads * hd, bias=False)
        self.o_proj = nn.Linear(cfg.heads * hd, d, bias=False)
        self.post_norm = RMSNorm(d, cfg.rms_eps)
        self.gate_proj = nn.Linear(d, cfg.intermediate, bias=False)
        self.up_proj = nn.Linear(d, cfg.intermediate, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate, d, bias=False)

    def qkv(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        """x [..., T, D] residual stream -> q [..., H, T, hd], k and v [..., Hkv, T, hd] (RoPE applied)."""
        h = self.input_norm(x)
        shape = h.shape[:-1]

        def split(t, n):  # [..., T, n*hd] -> [..., n, T, hd]
            return t.view(*shape, n, self.head_dim).transpose(-3, -2)

        q = split(self.q_proj(h), self.heads)
        k = split(self.k_proj(h), self.kv_heads)
        v = split(self.v_proj(h), self.kv_heads)
        cos, sin = cos.unsqueeze(-3), sin.unsqueeze(-3)  # [..., 1, T, hd]
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin, v

    def finish(self, x: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
        """x [..., T, D], attended [..., H, T, hd] -> the layer's output [..., T, D]."""
        merged = attended.transpose(-3, -2).reshape(*x.shape[:-1], self.heads * self.head_dim)
        x = x + self.o_proj(merged)
        h = self.post_norm(x)
        return x + self.down_proj(nn.functional.silu(self.gate_proj(h)) * self.up_proj(h))

    def expand_kv(self, t: torch.Tensor) -> torch.Tensor:
        """[..., Hkv, N, hd] -> [..., H, N, hd]: each KV head serves heads/kv_heads query heads."""
        return t.repeat_interleave(self.heads // self.kv_heads, dim=-3)


class DraftHead(nn.Module):
    """fc + one decoder layer + final norm; reads the target's embedding, never owns it."""

    def __init__(self, cfg: HeadConfig, subset: torch.Tensor):
        super().__init__()
        self.cfg = cfg
        self.fc = nn.Linear(2 * cfg.hidden, cfg.hidden, bias=False)
        layers = len(cfg.feature_layers)
        self.fuse = nn.Linear((layers + 1) * cfg.hidden, cfg.hidden, bias=False) if layers else None
        self.layers = nn.ModuleList(HeadLayer(cfg) for _ in range(cfg.depth))
        self.norm = RMSNorm(cfg.hidden, cfg.rms_eps)
        self.register_buffer("subset", subset.clone().long(), persistent=True)  # [S] token ids of the draft vocabulary
        # Set by attach(): the target's embedding E [V, D], the rows E_S as an LM head, its rotary table.
        self.embed: torch.Tensor | None = None
        self.lm_head: nn.Linear | None = None
        self.rotary = None
        self.kernels: dict = {"reason": "not chosen"}  # how its linears run (specviz.engine.kernels)
        self.static = None  # specviz.engine.static_head.StaticHead when its steps run static (CUDA), else None
        self.native = None  # specviz.engine.native_head.NativeHead when its layers run in one native call (CPU)

    # -- wiring to a target --
    def attach(self, target_model) -> DraftHead:
        """Borrow the target's token embedding and rotary table (not copied into the head's file).
        With the target's weights as shipped (specviz.engine.blocks) E_S is the subset's rows of its
        Q8_0 blocks, run by the native kernel; else a float32 copy of those rows."""
        from specviz.engine.blocks import BlockEmbedding, rows_of

        embedding = target_model.get_input_embeddings()
        object.__setattr__(self, "embedding", embedding)  # borrowed: not a submodule, never saved or moved
        self.embed = embedding.weight.detach()  # [V, D]; on the meta device (its shape only) as shipped
        lm_head = nn.Linear(self.cfg.hidden, self.cfg.subset_size, bias=False)
        if isinstance(embedding, BlockEmbedding):
            from specviz.engine.blocks import lay_out
            from specviz.engine.packing import KernelLinear

            fmt = embedding.fmt
            lm_head = KernelLinear(lm_head)
            lm_head.hold_blocks(lay_out(rows_of(embedding.layout, fmt, self.subset), fmt), fmt)  # [S/4, D/32, chunk]
        else:
            rows = self.embed[self.subset.to(self.embed.device)].float().clone()  # [S, D]
            lm_head.weight = nn.Parameter(rows, requires_grad=False)
            lm_head = lm_head.to(self.embed.device)
        self.lm_head = lm_head
        self.rotary = target_model.model.rotary_emb
        return self

    @property
    def fast_step(self):
        """The step its own caches are for: the static one (CUDA) or the native one (CPU)."""
        return self.static if self.static is not None else self.native

    @property
    def device(self) -> torch.device:
        """Where the head runs: its target's device (its norm's weight is never swapped for a layout)."""
        return self.norm.weight.device

    def rope(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """positions [..., T] -> cos, sin [..., T, hd], exactly the target's rotary table."""
        flat = positions.reshape(1, -1)
        dummy = torch.empty(0, dtype=torch.float32, device=positions.device)
        cos, sin = self.rotary(dummy, flat)
        return cos.view(*positions.shape, -1).float(), sin.view(*positions.shape, -1).float()

    def fused(self, features: torch.Tensor) -> torch.Tensor:
        """The target's true features [..., (n+1)D] (the n feature_layers' outputs, then f) -> the
        head's input feature [..., D]; with no feature_layers, f itself. Each earlier layer's output
        is scaled to unit RMS first: residual streams grow with depth, and fuse should see them on
        the scale of f."""
        features = features.float()
        if self.fuse is None:
            return features
        d = self.cfg.hidden
        blocks = features.unflatten(-1, (-1, d))  # [..., n+1, D]
        earlier = blocks[..., :-1, :]
        earlier = earlier * torch.rsqrt(earlier.pow(2).mean(-1, keepdim=True) + self.cfg.rms_eps)
        return self.fuse(torch.cat([earlier, blocks[..., -1:, :]], dim=-2).flatten(-2))

    def merge(self, features: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """features [..., T, D] (f_{i-1}), tokens [..., T] (x_i) -> the layer's input [..., T, D]."""
        return self.fc(torch.cat([features.float(), self.embedding(tokens).float()], dim=-1))

    def out(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """layer output [..., T, D] -> (f^ [..., T, D], logits over the subset [..., T, S])."""
        f = self.norm(x)
        return f, self.lm_head(f)

    # -- inference: one call per catch-up or chain step, with a KV cache --
    def new_cache(self, owner=None):
        """A KV cache for one run: with `static` set one of its preallocated caches (back to its pool when
        `owner` is collected), with `native` set its LeanCache, else a HeadCache. step and tree_step run
        the step the cache is for."""
        if self.static is not None:
            return self.static.new_cache(1, owner, larger=True)
        if self.native is not None:
            return self.native.new_cache()
        return HeadCache()

    def step(
        self, features: torch.Tensor, tokens: torch.Tensor, first_index: int, cache
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """features [T, D], tokens [T] at head indices first_index.. (input i reads f_{i-1}, x_i at
        rope position i) -> (f^ [T, D], subset logits [T, S]); appends T entries to the cache."""
        if not isinstance(cache, HeadCache):  # one of self.static's caches, or self.native's
            return self.fast_step.step(features, tokens, first_index, cache)
        t = tokens.shape[0]
        positions = torch.arange(first_index, first_index + t, device=tokens.device)
        cos, sin = self.rope(positions)
        x = self.merge(features, tokens)  # [T, D]
        for i, layer in enumerate(self.layers):
            q, k, v = layer.qkv(x, cos, sin)  # [H, T, hd], [Hkv, T, hd]
            keys, values = cache.append(i, k, v)  # [Hkv, N, hd]
            n = keys.shape[-2]
            # Query i (absolute index n - t + i) sees every cached key up to and including itself.
            allowed = torch.arange(n, device=q.device)[None, :] <= torch.arange(n - t, n, device=q.device)[:, None]
            attended = nn.functional.scaled_dot_product_attention(
                q, layer.expand_kv(keys), layer.expand_kv(values), attn_mask=allowed
            )  # [H, T, hd]
            x = layer.finish(x, attended)
        return self.out(x)

    def branch_step(
        self, features: torch.Tensor, tokens: torch.Tensor, index: int, cache: HeadCache, prefix: int, level: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One chained step for k branches of a draft tree at once: features [k, D] and tokens [k],
        all at head index `index`. The cache holds `prefix` entries shared by every branch, then
        the branches' entries level by level (k per level); branch b sees the shared ones and its
        own entries of levels 1..level, this one included -> (f^ [k, D], subset logits [k, S])."""
        k = tokens.shape[0]
        branch_of = torch.arange(k * level, device=tokens.device) % k
        allowed = torch.ones(k, prefix + k * level, dtype=torch.bool, device=tokens.device)
        allowed[:, prefix:] = branch_of[None, :] == torch.arange(k, device=tokens.device)[:, None]
        return self.tree_step(features, tokens, torch.full((k,), index, device=tokens.device), cache, allowed)

    def tree_step(
        self, features: torch.Tensor, tokens: torch.Tensor, positions: torch.Tensor, cache: HeadCache, allowed
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One step for m nodes of a draft tree at once (a whole level of EAGLE-2's dynamic tree):
        features [m, D], tokens [m] at head indices positions [m]; their m entries are appended to the
        cache and allowed [m, N] (N: the cache's length after them) says which entries each one sees
        (the shared prefix, its ancestors' entries and its own) -> (f^ [m, D], subset logits [m, S])."""
        if not isinstance(cache, HeadCache):  # one of self.static's caches, or self.native's
            return self.fast_step.tree_step(features, tokens, positions, cache, allowed)
        cos, sin = self.rope(positions)
        x = self.merge(features, tokens)  # [m, D]
        for i, layer in enumerate(self.layers):
            q, key, value = layer.qkv(x, cos, sin)  # [H, m, hd], [Hkv, m, hd]
            keys, values = cache.append(i, key, value)
            attended = nn.functional.scaled_dot_product_attention(
                q, layer.expand_kv(keys), layer.expand_kv(values), attn_mask=allowed
            )  # [H, m, hd]
            x = layer.finish(x, attended)
        return self.out(x)

    # -- files --
    def save(self, folder: Path, extra: dict | None = None) -> None:
        from safetensors.torch import save_file

        folder.mkdir(parents=True, exist_ok=True)
        tensors = {k: v.detach().to(torch.float16).contiguous() for k, v in self.state_dict().items()}
        tensors["subset"] = self.subset.to(torch.int32).contiguous()
        tensors = {k: v for k, v in tensors.items() if not k.startswith("lm_head")}  # rows of the target's E
        save_file(tensors, str(folder / "head.safetensors"))
        meta = {"schema": HEAD_SCHEMA, "config": asdict(self.cfg), **(extra or {})}
        (folder / "head.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")


class HeadCache:
    """The head's own KV cache: per layer of the head, keys and values [Hkv, N, hd], cropped on rollback."""

    def __init__(self):
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []

    @property
    def length(self) -> int:
        return 0 if not self.keys else self.keys[0].shape[-2]

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if layer == len(self.keys):  # the first entries of this layer
            self.keys.append(k)
            self.values.append(v)
        else:
            self.keys[layer] = torch.cat([self.keys[layer], k], dim=-2)
            self.values[layer] = torch.cat([self.values[layer], v], dim=-2)
        return self.keys[layer], self.values[layer]

    def crop(self, keep: int) -> None:
        self.keys = [k[..., :keep, :] for k in self.keys]
        self.values = [v[..., :keep, :] for v in self.values]


@contextmanager
def layer_outputs(target_model, layer_ids: tuple[int, ...]):
    """Inside the block, every forward of the target appends the output [B, T, D] of each decoder
    layer in layer_ids to the yielded dict's list for it (hooks, removed on leaving)."""
    captured: dict[int, list[torch.Tensor]] = {i: [] for i in layer_ids}

    def keep(i):
        # A decoder layer returns a tensor (transformers 5) or a tuple led by it (transformers 4).
        return lambda _m, _args, out: captured[i].append((out[0] if isinstance(out, tuple) else out).detach())

    hooks = [target_model.model.layers[i].register_forward_hook(keep(i)) for i in layer_ids]
    try:
        yield captured
    finally:
        for h in hooks:
            h.remove()


def head_config_for(target_model, subset_size: int, target_name: str, feature_layers=(), depth: int = 1) -> HeadConfig:
    from specviz.errors import ConfigError

    c = target_model.config
    if not 1 <= depth <= c.num_hidden_layers:
        raise ConfigError(f"--depth {depth}: a head has from 1 to the target's {c.num_hidden_layers} layers.")
    bad = [i for i in feature_layers if not 0 <= i < c.num_hidden_layers - 1]
    if bad:
        raise ConfigError(
            f"--feature-layers: {bad} are not decoder layers before the last of this target's "
            f"{c.num_hidden_layers}; choose indices from 0 to {c.num_hidden_layers - 2}."
        )
    return HeadConfig(
        hidden=c.hidden_size,
        intermediate=c.intermediate_size,
        heads=c.num_attention_heads,
        kv_heads=getattr(c, "num_key_value_heads", None) or c.num_attention_heads,
        head_dim=getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads,
        rms_eps=c.rms_norm_eps,
        target=target_name,
        subset_size=subset_size,
        feature_layers=tuple(feature_layers),
        depth=depth,
    )


def weight_of(linear: nn.Module) -> torch.Tensor:
    """A linear's weight [out, in] as loaded, whether it runs eager or only a packed layout holds it."""
    return linear.weight_as_loaded() if hasattr(linear, "weight_as_loaded") else linear.weight


def init_from_target(head: DraftHead, target_model) -> None:
    """Start the head's layers from the target's last decoder layers (in order) and the norm from
    its final norm; fc starts as [0.5 I, 0.5 I]-like: half the feature plus half the token embedding."""
    sources = target_model.model.layers[-head.cfg.depth :]
    with torch.no_grad():
        for own, src in zip(head.layers, sources, strict=True):
            pairs = {
                "input_norm.weight": src.input_layernorm.weight,
                "post_norm.weight": src.post_attention_layernorm.weight,
                "q_proj.weight": weight_of(src.self_attn.q_proj),
                "k_proj.weight": weight_of(src.self_attn.k_proj),
                "v_proj.weight": weight_of(src.self_attn.v_proj),
                "o_proj.weight": weight_of(src.self_attn.o_proj),
                "gate_proj.weight": weight_of(src.mlp.gate_proj),
                "up_proj.weight": weight_of(src.mlp.up_proj),
                "down_proj.weight": weight_of(src.mlp.down_proj),
            }
            for name, value in pairs.items():
                own.get_parameter(name).copy_(value.float())
        head.norm.weight.copy_(target_model.model.norm.weight.float())
        d = head.cfg.hidden
        eye = torch.eye(d)
        head.fc.weight.copy_(torch.cat([0.5 * eye, 0.5 * eye], dim=1))
        if head.fuse is not None:  # reads f alone at first: the earlier layers' columns start at 0
            head.fuse.weight.zero_()
            head.fuse.weight[:, -d:].copy_(eye)


def load_head(folder: Path, target_model) -> DraftHead:
    """A saved head, attached to (and checked against) the target it reads."""
    from safetensors.torch import load_file

    from specviz.errors import ModelError

    meta_path, weights_path = folder / "head.json", folder / "head.safetensors"
    if not meta_path.is_file() or not weights_path.is_file():
        raise ModelError(f"{folder} is not a draft head folder (head.json and head.safetensors are missing).")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    if meta.get("schema") != HEAD_SCHEMA:
        raise ModelError(f"{meta_path} has schema {meta.get('schema')!r}; this specviz reads {HEAD_SCHEMA}.")
    cfg = HeadConfig(**{**meta["config"], "feature_layers": tuple(meta["config"].get("feature_layers", ()))})
    if cfg.hidden != target_model.config.hidden_size:
        raise ModelError(
            f"The draft head was trained for {cfg.target!r} (hidden size {cfg.hidden}); this target's hidden "
            f"size is {target_model.config.hidden_size}. A head only reads the features of its own target."
        )
    # Heads saved before `depth` existed named their one layer "layer."; it is layers.0 now.
    tensors = {
        k.replace("layer.", "layers.0.", 1) if k.startswith("layer.") else k: v
        for k, v in load_file(str(weights_path)).items()
    }
    subset = tensors["subset"].long()
    head = DraftHead(cfg, subset)
    head.load_state_dict({k: (subset if k == "subset" else v.float()) for k, v in tensors.items()})
    head.attach(target_model)
    device = target_model.model.norm.weight.device
    head = head.to(device).eval()
    if device.type == "cuda":  # launch-bound there: its static step, captured once per shape (the CPU stays eager)
        from specviz.engine.cuda_steps import captured_head_step
        from specviz.engine.static_head import StaticHead

        head.static = StaticHead(head, capture=captured_head_step)
    return head
