"""llama.cpp as a measured peer (specviz.labs.peer): its timings read from llama-completion's real output
(tests/fixtures/llama_completion_stderr.txt: release b10605 decoding the shipped GGUF, 96 new tokens), the
binary found where it is said to be, and a clear error where it is not. CI does not build llama.cpp."""

from __future__ import annotations

from pathlib import Path

import pytest

from specviz.errors import ConfigError, SpecvizError
from specviz.labs import peer

pytestmark = pytest.mark.quick

FIXTURE = Path(__file__).parent / "fixtures" / "llama_completion_stderr.txt"


def test_the_timings_are_read_from_real_output():
    timings = peer.parse_timings(FIXTURE.read_text(encoding="utf-8"))
    assert timings == {"prompt_tokens": 37, "prompt_ms": 215.66, "decode_runs": 95, "decode_ms": 1372.94}


def test_output_without_timings_is_an_error_not_a_zero():
    with pytest.raises(SpecvizError, match="no timings"):
        peer.parse_timings("llama_model_load: error loading model\n")


def test_the_binary_is_found_in_a_build_folder_or_said_missing(tmp_path):
    (tmp_path / "build" / "bin").mkdir(parents=True)
    binary = tmp_path / "build" / "bin" / peer.BINARY
    binary.write_text("#!/bin/sh\n")
    assert peer.find_binary(str(tmp_path)) == binary
    assert peer.find_binary(str(binary)) == binary
    with pytest.raises(ConfigError, match="No llama-completion found at"):
        peer.find_binary(str(tmp_path / "nowhere"))


def test_the_report_divides_by_llama_cpp_round_by_round():
    def sample(r, rate):
        return {"round": r, "prompt": 0, "decode_tokens_per_s": rate, "tokens_per_s": rate}

    samples = {
        "llama.cpp": [sample(0, 100.0), sample(1, 50.0)],
        "shipped default T=0": [sample(0, 120.0), sample(1, 60.0)],
        "shipped alone T=0": [sample(0, 100.0), sample(1, 40.0)],
    }
    rows = peer._report(samples, "version")["methods"]
    assert rows["shipped default T=0"]["x_llama_cpp"] == pytest.approx(1.2)  # 1.2 in both rounds
    assert rows["shipped default T=0"]["x_target_alone"] == pytest.approx((1.2 + 1.5) / 2)
    assert "| shipped alone T=0 |" in peer.table({"methods": rows})
