"""Several decodes at once against shared models: each gets its own correct trace, in turn."""

from __future__ import annotations

import threading

from specviz.decoder import speculative_generate
from specviz.gate import DeviceGate
from specviz.trace import validate


def test_concurrent_runs_equal_sequential_runs(tiny_pair):
    target, draft = tiny_pair
    settings = [
        dict(seed=s, gamma=g, temperature=t) for s, g, t in [(1, 2, 1.0), (2, 4, 0.0), (3, 8, 0.7), (4, 1, 1.0)]
    ]
    expected = [
        speculative_generate([5, 6, 7], target=target, draft=draft, max_new_tokens=30, **kw).output_token_ids
        for kw in settings
    ]
    results: dict[int, list[int]] = {}
    waits: list[int] = []
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            trace = speculative_generate(
                [5, 6, 7], target=target, draft=draft, max_new_tokens=30, on_wait=waits.append, **settings[i]
            )
            validate(trace.to_dict())
            results[i] = trace.output_token_ids
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(settings)) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert not errors
    assert [results[i] for i in range(len(settings))] == expected
    assert waits and all(ahead >= 1 for ahead in waits)  # queued callers were told their place


def test_gate_releases_a_caller_interrupted_while_waiting():
    gate = DeviceGate()
    holding, release = threading.Event(), threading.Event()

    def holder() -> None:
        with gate.turn():
            holding.set()
            release.wait(10)

    th = threading.Thread(target=holder)
    th.start()
    holding.wait(10)

    class Stop(Exception):
        pass

    def interrupt(ahead: int) -> None:
        raise Stop  # what Streamlit does to a session whose user pressed Stop

    try:
        with gate.turn(on_wait=interrupt):
            raise AssertionError("must not get the turn while another run holds it")
    except Stop:
        pass
    assert gate.waiting() == 1
    release.set()
    th.join(10)
    assert gate.waiting() == 0
    with gate.turn():
        pass
