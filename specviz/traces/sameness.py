"""Is the output unchanged? Compares a speculative run with the target alone, honestly.

At temperature 0 both runs must produce the same tokens. In float32 with one kernel for every
shape they do: a verification pass and one-token steps differ by about 3e-5 in a logit, far
below any gap seen to decide an argmax. Where the one-token step and the verification pass run
different kernels (specviz.engine.kernels) they round differently by about 1e-5, and in lower precision
a logit can round differently by a bfloat16 step; where the target's two best tokens are that
close the argmax flips.
So where the texts differ we find the first differing token, run the target once in float32 on
the common prefix and report its top-2 logit gap there: a gap under NEAR_TIE_TOLERANCE is a
numerical near-tie, anything larger is a real mismatch (a bug).

At temperature > 0 two runs are two samples of the same distribution: different texts are
expected, and sameness is a statement about distributions (the distribution lab tests it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

# The largest float32 top-2 logit gap that low-precision rounding may flip. bfloat16 keeps 8
# significant bits, so a logit near 20 is rounded to a multiple of 0.125; across the target's
# layers the measured flips sat at float32 gaps of 0.05-0.12 (docs/benchmarks.md).
NEAR_TIE_TOLERANCE = 0.25
# The same for float32 runs: kernels that add in another order differ by ~1e-5 in a logit, so a gap
# above 1e-3 is never theirs to flip (issue 23's bound for mixed kernels).
FLOAT32_NEAR_TIE_TOLERANCE = 1e-3


def near_tie_tolerance(dtype: str | None) -> float:
    """The largest float32 top-2 gap a run in `dtype` may flip by rounding."""
    return FLOAT32_NEAR_TIE_TOLERANCE if dtype == "float32" else NEAR_TIE_TOLERANCE


@dataclass(frozen=True)
class Sameness:
    verdict: str  # "identical", "near_tie", "mismatch", "differs" (gap not measured), "different_samples"
    compared_tokens: int  # tokens compared (the shorter output)
    first_difference: int | None = None  # index in the generated text
    speculative_token: int | None = None
    target_token: int | None = None
    logit_gap: float | None = None  # float32 top-2 gap of the target at the first difference
    tolerance: float = NEAR_TIE_TOLERANCE

    def to_dict(self) -> dict:
        return asdict(self)

    def sentence(self, token_text=lambda i: f"#{i}") -> str:
        """One line for a page or a terminal."""
        if self.verdict == "identical":
            return f"Identical token for token ({self.compared_tokens} tokens): the output is unchanged."
        if self.verdict == "different_samples":
            return (
                "Sampled at temperature > 0: each run is one sample of the same distribution, so the texts "
                "differ; the Distribution lab checks that the distributions are equal."
            )
        where = (
            f"First difference at token {self.first_difference + 1}: speculative "
            f"{token_text(self.speculative_token)!r}, target alone {token_text(self.target_token)!r}"
        )
        if self.verdict == "differs":
            return f"{where}. The target's logit gap there was not measured (run the pair here to measure it)."
        if self.verdict == "near_tie":
            gap = f"{self.logit_gap:.3f}"
            return f"{where}. Numerical near-tie: the target's top-2 logit gap there is {gap} in float32."
        return f"{where}, with a float32 logit gap of {self.logit_gap:.3f}: not a near-tie. This is a mismatch."


def sameness_of(speculative, target_alone) -> Sameness:
    """The verdict for a run and its baseline: the one measured at run time (with the logit gap of a
    near-tie) when the trace holds it, else compared now without the gap."""
    if "sameness" in speculative.extra:
        return Sameness(**speculative.extra["sameness"])
    return compare_runs(speculative, target_alone)


def sentence_for(speculative, verdict: Sameness) -> str:
    """The verdict in words, tokens named as the speculative trace wrote them (#id when unknown)."""
    names = speculative.extra.get("token_text", {})
    return verdict.sentence(lambda token_id: names.get(str(token_id), f"#{token_id}"))


def compare_runs(speculative, target_alone, target_fp32=None) -> Sameness:
    """Two Traces of the same prompt and settings -> their Sameness. `target_fp32` (the target
    loaded in float32) measures the gap at a greedy difference; without it the gap stays unknown."""
    a, b = speculative.output_token_ids, target_alone.output_token_ids
    n = min(len(a), len(b))
    if speculative.config.get("temperature", 0) != 0:
        return Sameness("different_samples", n)
    first = next((i for i in range(n) if a[i] != b[i]), None)
    if first is None:
        return Sameness("identical", n)
    if target_fp32 is None:
        return Sameness("differs", n, first, a[first], b[first])
    gap = top2_gap(target_fp32, speculative.prompt_token_ids + a[:first])
    tolerance = near_tie_tolerance(speculative.config.get("dtype"))
    verdict = "near_tie" if gap <= tolerance else "mismatch"
    return Sameness(verdict, n, first, a[first], b[first], gap, tolerance)


def top2_gap(target, ids: list[int]) -> float:
    """The float32 target's top-2 logit gap for the token after `ids`."""
    import torch

    with torch.inference_mode():
        logits = target.model(torch.tensor([ids], device=target.model.device)).logits[0, -1].float()
    top = torch.topk(logits[: target.vocab_size], 2).values
    return float(top[0] - top[1])
