"""The offline target is converted once into the specviz cache, however many processes start on a
cold cache at once (the app and its preload, the suite's workers)."""

from __future__ import annotations

import threading

import specviz.engine.models as models


def test_callers_that_start_on_a_cold_cache_together_convert_once(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    conversions, arrived = [], []
    all_arrived = threading.Event()
    real_lock = models._cross_process_lock

    def lock(path):  # counts the callers that came to the lock, then takes it as the real one does
        arrived.append(path)
        if len(arrived) == 4:
            all_arrived.set()
        return real_lock(path)

    def convert(out):  # a conversion that lasts until every caller came to the lock while it ran
        conversions.append(out)
        all_arrived.wait(60)  # bounds a hang only
        out.mkdir(parents=True)
        (out / "config.json").write_text("{}")
        (out / "model.safetensors").write_bytes(b"")

    monkeypatch.setattr(models, "_cross_process_lock", lock)
    monkeypatch.setattr(models, "_convert_offline_target", convert)
    folders = []
    callers = [threading.Thread(target=lambda: folders.append(models.prepare_offline_target())) for _ in range(4)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(60)  # bounds a hang only
    assert all_arrived.is_set()  # all four found no converted folder and came to the lock
    assert len(conversions) == 1, conversions
    assert len(folders) == 4 and len(set(folders)) == 1 and models._converted(folders[0])
