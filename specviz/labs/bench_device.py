"""`python -m specviz bench --random-weights`: a device's step and decode speed, with no download.

Speed is set by shapes, not weights, and a GPU machine may have no room or network for the offline
target's file. So this builds a target of the offline target's shapes (SmolLM2-135M, SHAPES; or a
tiny one for a quick check) with random weights on the device, and prints, side by side in one
process (each method's runs interleaved with the others'):

    steps       one pass of R new rows over a cached context, per forward this device has: the lean
                forward (CPU), its static-shape step (specviz.engine.static_llama) eager, the same
                captured as CUDA graphs (CUDA), transformers' eager forward; beside the bytes a step
                must stream over the device's measured bandwidth (its roofline); and the shipped
                draft head's chain step of R rows: eager, its static step (specviz.engine.static_head)
                eager, the same captured (CUDA)
    decode      specviz's target alone, specviz's default decode (the hybrid draft on these shapes),
                transformers' generate() with its dynamic cache and with cache_implementation="static"
                (which compiles its step on CUDA): greedy, the same prompts (random token ids)
    exactness   the captured step's logits against the eager static step's (and the lean forward's on
                the CPU), the head's likewise; specviz's greedy tokens against transformers' generate()
                in the same dtype, with the logit gap at the first difference (a near-tie when small)

Random weights make the draft's acceptance meaningless, so τ (tokens per iteration) is also taken
from a CPU run with the real weights (--tau): the predicted tokens/s is that τ over the measured cost
of an iteration (its draft and verify phases). Scaling the random embedding (PEAKY) makes the
logits peaky enough that greedy decoding is not all near-ties.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from specviz.labs import bench_steps

# The offline target's shapes (its converted config.json; tests/test_bench_device.py checks they agree).
SHAPES = {
    "smollm2-135m": {
        "vocab_size": 49152,
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "head_dim": 64,
        "rms_norm_eps": 1e-5,
        "rope_theta": 100000.0,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": True,
    },
    "tiny": {
        "vocab_size": 512,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "max_position_embeddings": 1024,
        "tie_word_embeddings": True,
    },
}
PEAKY = 8.0  # the random embedding's scale over the usual initialiser (tied: also the LM head)
PROMPT_TOKENS = 32


def build_target(shape: str, device: str, dtype: str, seed: int = 0):
    """A random LlamaForCausalLM of SHAPES[shape] on `device`, ready as load_model readies one (no
    tokenizer, no end of sequence: every run writes all its tokens)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from specviz.engine.models import ready_model

    config = LlamaConfig(**SHAPES[shape], bos_token_id=None, eos_token_id=None, pad_token_id=None)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
        with torch.no_grad():
            model.get_input_embeddings().weight.mul_(PEAKY)
    model = model.to(device=device, dtype=getattr(torch, dtype)).eval()
    # pack=False: the CPU's kernel choice is cached per model name and times real weights' layouts;
    # these are eager linears, as transformers runs them.
    return ready_model(f"random-{shape}", model, None, dtype, pack=False), model


def random_prompts(vocab: int, count: int, seed: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(3, vocab, (PROMPT_TOKENS,), generator=g).tolist() for _ in range(count)]


def hf_generate(model, ids: list[int], new_tokens: int, static: bool) -> list[int]:
    """transformers' greedy generate(), its dynamic cache or its static one -> the new token ids."""
    from transformers import GenerationConfig

    extra = {"cache_implementation": "static"} if static else {}
    gen = GenerationConfig(
        max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, pad_token_id=0, **extra
    )
    input_ids = torch.tensor([ids], device=model.device)  # [1, P]
    with torch.inference_mode():
        out = model.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), generation_config=gen)
    return out[0, input_ids.shape[1] :].tolist()


class Methods:
    """The decode methods timed side by side: name -> f(prompt ids) -> (new token ids, trace or None)."""

    def __init__(self, target, model, new_tokens: int):
        self.target, self.model, self.new_tokens = target, model, new_tokens
        self.head = None
        if model.config.hidden_size == SHAPES["smollm2-135m"]["hidden_size"]:  # the shipped head fits these shapes
            from specviz.engine.draft_head import load_head
            from specviz.engine.models import HEAD_DRAFT, offline_path

            self.head = load_head(offline_path(HEAD_DRAFT), model)

    def draft(self):
        """The default draft on these shapes: the hybrid over the shipped head (its trained weights read
        random features here, so only its costs mean anything), else the n-gram draft."""
        from specviz.config import DEFAULT_DRAFT
        from specviz.drafters.head import HeadDrafter
        from specviz.drafters.hybrid import HybridDrafter
        from specviz.engine.models import HEAD_DRAFT

        if self.head is None:
            return "ngram"
        return HybridDrafter(HeadDrafter(self.head, HEAD_DRAFT), DEFAULT_DRAFT)  # fresh: a drafter is one decode's

    def names(self) -> list[str]:
        return ["specviz target alone", "specviz default", "transformers generate", "transformers static cache"]

    def run(self, name: str, ids: list[int], traced: bool = False):
        from specviz.config import DecodeOptions
        from specviz.decoding.decoder import autoregressive_generate, speculative_generate

        options = DecodeOptions(temperature=0.0, max_new_tokens=self.new_tokens)
        if name == "specviz target alone":
            trace = autoregressive_generate(ids, target=self.target, options=options, trace=traced)
            return trace.output_token_ids, trace
        if name == "specviz default":
            trace = speculative_generate(ids, target=self.target, draft=self.draft(), options=options, trace=traced)
            return trace.output_token_ids, trace
        return hf_generate(self.model, ids, self.new_tokens, static=name.endswith("static cache")), None


def time_decodes(methods: Methods, prompts: list[list[int]], reps: int) -> dict:
    """Tokens per second of each method, its runs interleaved with the others' (the order rotating per
    prompt and repetition), after one untimed warm-up each (allocations, capture, compilation)."""
    names = methods.names()
    for name in names:
        methods.run(name, prompts[0])
    seconds = {n: [] for n in names}
    tokens = {n: 0 for n in names}
    turn = 0
    for _ in range(reps):
        for ids in prompts:
            turn += 1
            for name in names[turn % len(names) :] + names[: turn % len(names)]:
                bench_steps.sync(methods.target.device)
                start = time.perf_counter()
                out, _ = methods.run(name, ids)
                bench_steps.sync(methods.target.device)
                seconds[name].append(time.perf_counter() - start)
                tokens[name] += len(out)
    return {n: tokens[n] / sum(seconds[n]) for n in names}


def greedy_agreement(methods: Methods, prompts: list[list[int]], static_cache: bool) -> dict:
    """specviz's greedy target alone against transformers' generate() in the same dtype: prompts whose
    tokens are all equal, and at each first difference its index and the logit gap there."""
    equal, differences = 0, []
    for ids in prompts:
        ours, _ = methods.run("specviz target alone", ids)
        theirs = hf_generate(methods.model, ids, methods.new_tokens, static=static_cache)
        first = next((i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b), None)
        if first is None and len(ours) == len(theirs):
            equal += 1
            continue
        gap = bench_steps.logit_gap(methods.model, ids + ours[:first], ours[first], theirs[first])
        differences.append({"index": first, "logit_gap": round(gap, 4)})
    return {"prompts": len(prompts), "equal": equal, "differences": differences}


def decode_costs(methods: Methods, prompts: list[list[int]]) -> dict:
    """From traced decodes: τ with the random draft, and an iteration's draft and verify milliseconds."""
    traces = [methods.run("specviz default", ids, traced=True)[1] for ids in prompts]
    alone = [methods.run("specviz target alone", ids, traced=True)[1] for ids in prompts]
    iterations = sum(t.summary["iterations"] for t in traces)
    return {
        "tau_random": sum(t.summary["new_tokens"] for t in traces) / iterations,
        "draft_ms": sum(t.summary["draft_ms"] for t in traces) / iterations,
        "verify_ms": sum(t.summary["verify_ms"] for t in traces) / iterations,
        "step_ms": sum(t.summary["verify_ms"] for t in alone) / sum(t.summary["iterations"] for t in alone),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m specviz bench --random-weights", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--random-weights", action="store_true", help="(how `bench` hands over to this check)")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when present)")
    parser.add_argument("--dtype", default=None, choices=("float32", "bfloat16"), help="default: bfloat16 on cuda")
    parser.add_argument("--shape", default="smollm2-135m", choices=sorted(SHAPES))
    parser.add_argument("--new-tokens", type=int, default=96)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--reps", type=int, default=2, help="timed passes over the prompts per method")
    parser.add_argument("--rows", default="1,4,7", help="rows per timed pass (1: a step; 4, 7: γ 3's chain, tree)")
    parser.add_argument("--tau", default=None, help="τ per temperature from a CPU run with the real weights, e.g. 1.82")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    from specviz.errors import SpecvizError

    try:
        report(args)
    except SpecvizError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def report(args) -> None:
    """Build, measure and check, printing each part as it is done (a device session's time is short)."""
    from specviz.engine.models import default_device

    if args.threads:
        torch.set_num_threads(args.threads)
    device = args.device or default_device()
    dtype = args.dtype or ("bfloat16" if device.startswith("cuda") else "float32")
    target, model = build_target(args.shape, device, dtype, args.seed)
    prompts = random_prompts(model.config.vocab_size, args.prompts, args.seed)
    methods = Methods(target, model, args.new_tokens)
    rows = [int(r) for r in args.rows.split(",")]
    with torch.inference_mode():
        steps = bench_steps.time_steps(target, model, rows)
        exact = bench_steps.step_exactness(target, model, max(rows))
    head = f"{target.name} on {bench_steps.device_name(device)}, {dtype}, forward: {target.forward}"
    say(bench_steps.render_steps(head, steps, bench_steps.roofline(model, device), exact))
    if methods.head is None:
        say("\ndraft head step: none timed (the shipped head reads only the smollm2-135m shapes)")
    else:
        with torch.inference_mode():
            head_steps = bench_steps.time_head_steps(methods.head, rows)
            head_exact = bench_steps.head_exactness(methods.head, max(rows))
        say(bench_steps.render_head_steps(head_steps, head_exact))
    say(bench_steps.render_agreement({"dynamic": greedy_agreement(methods, prompts, False)}))
    taus = [float(t) for t in args.tau.split(",")] if args.tau else []
    say(bench_steps.render_decodes(time_decodes(methods, prompts, args.reps), decode_costs(methods, prompts), taus))
    say(bench_steps.render_agreement({"static": greedy_agreement(methods, prompts, True)}))


def say(text: str) -> None:
    print(text, flush=True)
