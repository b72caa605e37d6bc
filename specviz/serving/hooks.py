"""How a decode shares the device with others: the one object the decoder is handed (ServingHooks).

The decoder calls `hooks.decoding(target)` around a whole decode and passes what it yields to the
target's passes; it knows nothing of queues or batching. The library's default, ServingHooks(),
takes a turn at the device's gate and decodes alone: two decodes in threads of one process never
share a model at once. The app asks for more (specviz_app/runs/running.py): its place in the queue
reported (`on_wait`), its passes batched with other sessions' (`batched`), and its target-alone
baselines waiting behind every first run (`behind`), and a new run admitted by its wait (`admission`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from specviz.serving.batching import batcher_for
from specviz.serving.gate import Admission, device_gate


@dataclass(frozen=True)
class ServingHooks:
    """on_wait(ahead): called while the decode waits for the device, with how many are ahead (raise
    from it to leave the queue). batched: share the device with other batched decodes of this target,
    their target passes run as one (the same tokens and decisions; timings that are not a solo run's).
    behind: while it waits, every decode that is not behind passes it. admission: a new run's, admitted
    by its estimated wait (specviz.serving.gate.Admission); None queues it at once."""

    on_wait: Callable[[int], None] | None = None
    batched: bool = False
    behind: bool = False
    admission: Admission | None = None

    @contextmanager
    def decoding(self, target: Any) -> Iterator[Any]:
        """Held for one whole decode of `target`: its turn at the device, and its seat at the target's
        batcher when batched (yielded, for the target's passes; None when it decodes alone)."""
        batcher = batcher_for(target) if self.batched else None
        gate = device_gate(target.device)
        with gate.turn(self.on_wait, share=batcher, behind=self.behind, admission=self.admission):
            if batcher is None:
                yield None
                return
            with batcher.seat() as seat:
                yield seat


ALONE = ServingHooks()  # the library's default: a turn at the gate, no batching
