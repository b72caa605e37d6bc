"""One decode at a time per device, first come first served, with the queue position visible.

The app serves several browser sessions from one process and one set of cached models. Runs
never share caches or generators, but two decodes at once on one device only halve each
other's speed (and make timings meaningless), and tokenizers are not safe to use from two
threads at once. So each decode takes its device's gate; a waiting caller is told how many
runs are ahead of it.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_gates: dict[str, DeviceGate] = {}
_gates_lock = threading.Lock()


class DeviceGate:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queue: deque[object] = deque()

    def waiting(self) -> int:
        """Runs holding or waiting for this gate."""
        with self._cond:
            return len(self._queue)

    @contextmanager
    def turn(self, on_wait: Callable[[int], None] | None = None, poll_s: float = 0.5) -> Iterator[None]:
        """Hold the gate for the body. on_wait(ahead) is called (outside the lock) while queued."""
        ticket = object()
        with self._cond:
            self._queue.append(ticket)
        try:
            while True:
                with self._cond:
                    ahead = self._queue.index(ticket)
                    if ahead == 0:
                        break
                if on_wait is not None:
                    on_wait(ahead)
                with self._cond:
                    if self._queue[0] is not ticket:
                        self._cond.wait(timeout=poll_s)
            yield
        finally:
            # Also runs when a waiting caller is interrupted (a browser session stopped its run).
            with self._cond:
                self._queue.remove(ticket)
                self._cond.notify_all()


def device_gate(device: str) -> DeviceGate:
    with _gates_lock:
        return _gates.setdefault(str(device), DeviceGate())
